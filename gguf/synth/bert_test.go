package synth

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// TestBert generates the tiny bert in F32 and Q8_0 and checks its tensors against llama.cpp's
// BERT loader (names, shapes; quantized matrices but F32 vectors, position and token-type
// tables), the values' spread, its metadata and its tokenizer.
func TestBert(t *testing.T) {
	type shape = []uint64
	// The tiny preset: dim 64, 4 heads of 16, 2 KV heads, ff 172, vocab 512, ctx 512.
	want := map[string]shape{
		"token_embd.weight": {64, 512}, "position_embd.weight": {64, 512}, "token_types.weight": {64, 2},
		"token_embd_norm.weight": {64}, "token_embd_norm.bias": {64},
	}
	for i := range 2 {
		for name, s := range map[string]shape{
			"attn_q.weight": {64, 64}, "attn_q.bias": {64}, "attn_k.weight": {64, 32}, "attn_k.bias": {32},
			"attn_v.weight": {64, 32}, "attn_v.bias": {32}, "attn_output.weight": {64, 64}, "attn_output.bias": {64},
			"attn_output_norm.weight": {64}, "attn_output_norm.bias": {64}, "ffn_up.weight": {64, 172}, "ffn_up.bias": {172},
			"ffn_down.weight": {172, 64}, "ffn_down.bias": {64}, "layer_output_norm.weight": {64}, "layer_output_norm.bias": {64},
		} {
			want[fmt.Sprintf("blk.%d.%s", i, name)] = s
		}
	}
	for _, mix := range []quantize.Mix{quantize.MixF32, quantize.MixQ8_0} {
		t.Run(mix.String(), func(t *testing.T) {
			c := tiny(t, mix)
			c.Arch = "bert"
			f, b := generate(t, c)
			if _, again := generate(t, c); !bytes.Equal(b, again) {
				t.Error("same seed, different bytes")
			}
			if len(f.Tensors) != len(want) {
				t.Errorf("%d tensors, want %d", len(f.Tensors), len(want))
			}
			if f.Tensors[0].Name != "token_embd.weight" || f.Tensors[len(f.Tensors)-1].Name != "blk.1.layer_output_norm.bias" {
				t.Errorf("tensors from %s to %s", f.Tensors[0].Name, f.Tensors[len(f.Tensors)-1].Name)
			}
			for _, ti := range f.Tensors {
				if s, ok := want[ti.Name]; !ok || !slices.Equal(ti.Shape, s) {
					t.Errorf("%s %v, want %v", ti.Name, ti.Shape, s)
				}
				wantType := mix.DefaultType()
				switch {
				case len(ti.Shape) == 1 || ti.Name == "position_embd.weight" || ti.Name == "token_types.weight":
					wantType = gguf.TypeF32 // llama.cpp quantizes neither table
				case mix == quantize.MixQ8_0 && ti.Shape[0] == 172:
					wantType = gguf.TypeF16 // rows of 172 are no whole Q8_0 blocks
				}
				if ti.Type != wantType {
					t.Errorf("%s: %s, want %s", ti.Name, ti.Type, wantType)
				}
				vals := make([]float32, ti.NumElements())
				if err := gguf.Dequantize(ti.Type, f.TensorData(&ti), vals); err != nil {
					t.Fatal(err)
				}
				// Matrices normal(0, 0.02); LayerNorm weights 1 + normal(0, 0.1); biases normal(0, 0.1).
				mean, scale := 0.0, weightScale
				switch {
				case strings.HasSuffix(ti.Name, "_norm.weight"):
					mean, scale = 1, spreadScale
				case strings.HasSuffix(ti.Name, ".bias"):
					scale = spreadScale
				}
				if m, s := fillOf("bert", ti.Name); m != mean || s != scale {
					t.Errorf("%s: filled as %g + %g normal", ti.Name, m, s)
				}
				var sum, sq float64
				for _, v := range vals {
					sum += float64(v)
					sq += (float64(v) - mean) * (float64(v) - mean)
					if mix == quantize.MixF32 && gguf.F16ToF32(gguf.F32ToF16(v)) != v {
						t.Fatalf("%s: %g is no float16 value", ti.Name, v)
					}
				}
				gotMean, gotSD := sum/float64(len(vals)), math.Sqrt(sq/float64(len(vals)))
				if math.Abs(gotMean-mean) > 0.1 || math.Abs(gotSD-scale) > 0.3*scale {
					t.Errorf("%s: mean %.3g sd %.3g, want %g and %g", ti.Name, gotMean, gotSD, mean, scale)
				}
			}
			if got, _ := f.String("general.architecture"); got != "bert" {
				t.Errorf("general.architecture %q", got)
			}
			for key, v := range map[string]uint64{"bert.embedding_length": 64, "bert.block_count": 2, "bert.feed_forward_length": 172,
				"bert.attention.head_count": 4, "bert.attention.head_count_kv": 2, "bert.context_length": 512, "bert.pooling_type": 1,
				"bert.vocab_size": 512, "tokenizer.ggml.token_type_count": 2, "general.file_type": uint64(mix.FileType())} {
				if got, ok := f.Uint(key); !ok || got != v {
					t.Errorf("%s = %d (%v), want %d", key, got, ok, v)
				}
			}
			if eps, ok := f.Float("bert.attention.layer_norm_epsilon"); !ok || float32(eps) != c.NormEps {
				t.Errorf("bert.attention.layer_norm_epsilon = %g (%v), want %g", eps, ok, c.NormEps)
			}
			if causal, ok := f.Bool("bert.attention.causal"); !ok || causal {
				t.Errorf("bert.attention.causal = %v (%v), want false", causal, ok)
			}
			for _, kv := range f.KV {
				if strings.Contains(kv.Key, "rope") || strings.Contains(kv.Key, "rms") || strings.Contains(kv.Key, "key_length") {
					t.Errorf("bert has %s", kv.Key)
				}
			}
			checkTokenizer(t, f)
		})
	}
	// Pooling and the LayerNorm epsilon come from the configuration.
	c := tiny(t, quantize.MixF32)
	c.Arch, c.Pooling, c.NormEps = "bert", 2, 1e-12
	f, _ := generate(t, c)
	if p, _ := f.Uint("bert.pooling_type"); p != 2 {
		t.Errorf("Pooling 2: pooling_type %d", p)
	}
	if eps, _ := f.Float("bert.attention.layer_norm_epsilon"); float32(eps) != 1e-12 {
		t.Errorf("NormEps 1e-12: layer_norm_epsilon %g", eps)
	}
}

// TestBertMixRules checks llama-quantize's rules on bert: with no output.weight, token_embd is
// the output matrix (Q6_K in Q4_K_M); attn_v and ffn_down get Q6_K in the first, last and
// every third layer; position_embd, token_types, the biases and the LayerNorms stay F32.
func TestBertMixRules(t *testing.T) {
	c := tiny(t, quantize.MixQ4_K_M)
	c.Arch, c.Layers = "bert", 8
	plans, err := c.Plan()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]gguf.GGMLType{}
	for _, p := range plans {
		types[p.Name] = p.To
		if (len(p.Shape) == 1 || strings.HasPrefix(p.Name, "position_embd") || strings.HasPrefix(p.Name, "token_types")) && p.To != gguf.TypeF32 {
			t.Errorf("%s: %s, want F32", p.Name, p.To)
		}
	}
	if got := types["token_embd.weight"]; got != gguf.TypeQ6_K {
		t.Errorf("token_embd.weight: %s, want Q6_K (the tied output's type)", got)
	}
	for i := range 8 {
		more := gguf.TypeQ4_K
		if i == 0 || i == 3 || i >= 6 {
			more = gguf.TypeQ6_K
		}
		for name, want := range map[string]gguf.GGMLType{"attn_q.weight": gguf.TypeQ4_K, "attn_k.weight": gguf.TypeQ4_K,
			"attn_v.weight": more, "attn_output.weight": gguf.TypeQ4_K, "ffn_up.weight": gguf.TypeQ4_K, "ffn_down.weight": more} {
			if got := types[fmt.Sprintf("blk.%d.%s", i, name)]; got != want {
				t.Errorf("blk.%d.%s: %s, want %s", i, name, got, want)
			}
		}
	}
}

// TestBertRank generates the tiny bert with a rank head: the classification head's tensors
// after the layers (cls n_embd x n_embd quantized with the mix, cls.output one F32 row, their
// F32 biases), pooling_type 4, and XLM-RoBERTa's separators in the vocabulary.
func TestBertRank(t *testing.T) {
	c := tiny(t, quantize.MixQ8_0)
	c.Arch, c.Rank = "bert", true
	f, _ := generate(t, c)
	n := len(f.Tensors)
	want := []struct {
		name  string
		shape []uint64
		typ   gguf.GGMLType
	}{
		{"cls.weight", []uint64{64, 64}, gguf.TypeQ8_0}, {"cls.bias", []uint64{64}, gguf.TypeF32},
		{"cls.output.weight", []uint64{64, 1}, gguf.TypeF32}, {"cls.output.bias", []uint64{1}, gguf.TypeF32},
	}
	for i, w := range want {
		ti := f.Tensors[n-len(want)+i]
		if ti.Name != w.name || !slices.Equal(ti.Shape, w.shape) || ti.Type != w.typ {
			t.Errorf("tensor %d: %s %v %s, want %s %v %s", n-len(want)+i, ti.Name, ti.Shape, ti.Type, w.name, w.shape, w.typ)
		}
	}
	if m, s := fillOf("bert", "cls.weight"); m != 0 || s != headScale {
		t.Errorf("cls.weight filled as %g + %g normal", m, s)
	}
	if p, _ := f.Uint("bert.pooling_type"); p != 4 {
		t.Errorf("pooling_type %d, want 4 (rank)", p)
	}
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if !tk.AddBOS() || !tk.AddEOS() || !tk.AddSEP() || tk.SEP() != 2 || tk.EOS() != 2 {
		t.Errorf("add_bos %v add_eos %v add_sep %v sep %d eos %d", tk.AddBOS(), tk.AddEOS(), tk.AddSEP(), tk.SEP(), tk.EOS())
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Arch = "llama" },
		func(c *Config) { c.Pooling = 2 },
	} {
		b := c
		bad(&b)
		if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "rank head") {
			t.Errorf("%s with pooling %d: %v, want the rank head refused", b.Arch, b.Pooling, err)
		}
	}
}
