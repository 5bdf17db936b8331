package model

// phi3: Phi-3 and Phi-4, llama's block with q, k and v in one matrix (attn_qkv), gate and up
// in one (ffn_up holds both) and GPT-NeoX RoPE pairs, as llama.cpp's src/models/phi3.cpp.
func init() {
	register(&arch{name: "phi3", hparams: neox, layer: decoderLayer, block: preNormBlock, stripsLast: true})
}
