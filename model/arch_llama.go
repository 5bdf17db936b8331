package model

// llama: Llama 1-3, Mistral, and Mixtral-style experts (ffn_gate_inp with ffn_*_exps in
// place of the dense FFN, softmax gating, the chosen weights normalised), as llama.cpp's
// src/models/llama.cpp. Llama 3.1's RoPE frequency factors come as rope_freqs.weight; RoPE
// pairs adjacent dimensions.
func init() {
	register(&arch{name: "llama", layer: decoderLayer, block: preNormBlock, stripsLast: true})
}
