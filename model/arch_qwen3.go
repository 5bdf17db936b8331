package model

// qwen3: Qwen3 dense, llama's block with per-head RMS norms of q and k (QK-norm) and GPT-NeoX
// RoPE pairs, as llama.cpp's src/models/qwen3.cpp.
func init() {
	register(&arch{name: "qwen3", hparams: neox, layer: decoderLayer, block: preNormBlock, stripsLast: true})
}
