package synth

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
)

// bertTypes is the number of token types (segments) bert's token_types table holds, as
// BERT's type_vocab_size: sentence A and sentence B. llama.cpp adds the first row to every
// token.
const bertTypes = 2

// bertTensors lists bert's tensors in convert_hf_to_gguf's order (Hugging Face BertModel's):
// the embeddings (token_embd, position_embd with Ctx rows, token_types with 2 rows, and the
// embedding LayerNorm token_embd_norm), then each layer's q/k/v, attn_output, attn_output_norm,
// ffn_up, ffn_down and layer_output_norm, every one with its bias, and nothing after the layers
// (an encoder has no output norm or matrix) but a reranker's classification head: cls, n_embd
// x n_embd, and cls.output, one row, each with its bias.
func (c Config) bertTensors() []quantize.Tensor {
	hd := uint64(c.headDim())
	d, q, kv, ff := uint64(c.Dim), uint64(c.Heads)*hd, uint64(c.KVHeads)*hd, uint64(c.FF)
	ts := []quantize.Tensor{
		{Name: "token_embd.weight", Shape: []uint64{d, uint64(c.Vocab)}},
		{Name: "position_embd.weight", Shape: []uint64{d, uint64(c.Ctx)}},
		{Name: "token_types.weight", Shape: []uint64{d, bertTypes}},
		{Name: "token_embd_norm.weight", Shape: []uint64{d}},
		{Name: "token_embd_norm.bias", Shape: []uint64{d}},
	}
	for i := range c.Layers {
		// Each matrix of rows x cols (GGUF shape [cols, rows]) and its bias of rows.
		for _, m := range []struct {
			name       string
			cols, rows uint64
		}{
			{"attn_q", d, q}, {"attn_k", d, kv}, {"attn_v", d, kv}, {"attn_output", q, d},
			{"attn_output_norm", 0, d}, {"ffn_up", d, ff}, {"ffn_down", ff, d}, {"layer_output_norm", 0, d},
		} {
			name := fmt.Sprintf("blk.%d.%s.", i, m.name)
			w := []uint64{m.cols, m.rows}
			if m.cols == 0 { // a LayerNorm: weight and bias vectors
				w = []uint64{m.rows}
			}
			ts = append(ts, quantize.Tensor{Name: name + "weight", Shape: w}, quantize.Tensor{Name: name + "bias", Shape: []uint64{m.rows}})
		}
	}
	if c.Rank {
		ts = append(ts,
			quantize.Tensor{Name: "cls.weight", Shape: []uint64{d, d}},
			quantize.Tensor{Name: "cls.bias", Shape: []uint64{d}},
			quantize.Tensor{Name: "cls.output.weight", Shape: []uint64{d, 1}},
			quantize.Tensor{Name: "cls.output.bias", Shape: []uint64{1}},
		)
	}
	for i := range ts {
		ts[i].Type = gguf.TypeF32
	}
	return ts
}

// bertKVs is bert's metadata, with the keys llama.cpp's BERT loader reads (load_hparams:
// attention.layer_norm_epsilon and attention.causal required, pooling_type optional) and
// tokenizer.ggml.token_type_count, which sizes token_types. There are no RoPE keys; the
// vocabulary is the other architectures' SentencePiece one (llama.cpp's tokenizer does not
// depend on the architecture, though real BERT files carry a WordPiece vocabulary).
func (c Config) bertKVs(tokens []string, scores []float32, types []int32) []gguf.KV {
	u32 := func(k string, v int) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeUint32, Value: uint32(v)} }
	f32 := func(k string, v float32) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeFloat32, Value: v} }
	str := func(k, v string) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeString, Value: v} }
	boolean := func(k string, v bool) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeBool, Value: v} }
	const a = "bert"
	kvs := c.headerKVs()
	// No key_length: heads x head size = dim, as Validate requires of bert.
	kvs = append(kvs,
		f32(a+".attention.layer_norm_epsilon", c.NormEps),
		boolean(a+".attention.causal", false),
		u32(a+".pooling_type", c.pooling()),
		u32(a+".vocab_size", c.Vocab),
		u32("general.file_type", int(c.Mix.FileType())),
		u32("general.quantization_version", quantize.QuantizationVersion),
		str("tokenizer.ggml.model", "llama"),
		gguf.KV{Key: "tokenizer.ggml.tokens", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeString, Values: tokens}},
		gguf.KV{Key: "tokenizer.ggml.scores", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeFloat32, Values: scores}},
		gguf.KV{Key: "tokenizer.ggml.token_type", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeInt32, Values: types}},
		u32("tokenizer.ggml.token_type_count", bertTypes),
		u32("tokenizer.ggml.unknown_token_id", 0),
		u32("tokenizer.ggml.bos_token_id", 1),
		u32("tokenizer.ggml.eos_token_id", 2),
		boolean("tokenizer.ggml.add_bos_token", true),
		boolean("tokenizer.ggml.add_eos_token", c.Rank),
		boolean("tokenizer.ggml.add_space_prefix", true),
	)
	if c.Rank {
		kvs = append(kvs, u32("tokenizer.ggml.seperator_token_id", 2), boolean("tokenizer.ggml.add_sep_token", true))
	}
	return kvs
}
