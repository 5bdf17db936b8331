package model

// qwen2: Qwen2 and Qwen2.5, llama's block with biases on the q, k and v projections and
// GPT-NeoX RoPE pairs, as llama.cpp's src/models/qwen2.cpp.
func init() {
	register(&arch{name: "qwen2", hparams: neox, layer: decoderLayer, block: preNormBlock, stripsLast: true})
}
