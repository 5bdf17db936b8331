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

func tiny(t *testing.T, mix quantize.Mix) Config {
	t.Helper()
	c, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.Mix = mix
	if mix.DefaultType().BlockSize() == 256 {
		c.Dim, c.FF = 256, 512 // K-quants need rows of 256
	}
	return c
}

// checkShapes checks that f holds exactly the tensors of want, each of its shape.
func checkShapes(t *testing.T, f *gguf.File, want map[string][]uint64) {
	t.Helper()
	if len(f.Tensors) != len(want) {
		t.Errorf("%d tensors, want %d", len(f.Tensors), len(want))
	}
	for _, ti := range f.Tensors {
		if s, ok := want[ti.Name]; !ok || !slices.Equal(ti.Shape, s) {
			t.Errorf("%s %v, want %v", ti.Name, ti.Shape, s)
		}
	}
}

func generate(t *testing.T, c Config) (*gguf.File, []byte) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := Write(&buf, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Plans) != len(f.Tensors) || sum.Elements == 0 {
		t.Errorf("summary: %d plans, %d elements", len(sum.Plans), sum.Elements)
	}
	return f, buf.Bytes()
}

// TestEveryType generates the tiny model in every type and checks the tensors, metadata and
// tokenizer of what comes back.
func TestEveryType(t *testing.T) {
	for _, mix := range quantize.Mixes() {
		t.Run(mix.String(), func(t *testing.T) {
			c := tiny(t, mix)
			f, _ := generate(t, c)
			plans, err := c.Plan()
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Tensors) != 2+9*c.Layers+1 {
				t.Fatalf("%d tensors", len(f.Tensors))
			}
			for i, ti := range f.Tensors {
				p := plans[i]
				if ti.Name != p.Name || ti.Type != p.To || !slices.Equal(ti.Shape, p.Shape) {
					t.Errorf("tensor %d: %s %s %v, planned %s %s %v", i, ti.Name, ti.Type, ti.Shape, p.Name, p.To, p.Shape)
				}
				if len(ti.Shape) == 1 && ti.Type != gguf.TypeF32 {
					t.Errorf("%s: norm stored as %s", ti.Name, ti.Type)
				}
				if len(ti.Shape) == 2 && p.To != mix.DefaultType() && !p.Fallback() &&
					ti.Name != "output.weight" && !strings.Contains(mix.String(), "_K_") && mix != quantize.MixQ2_K &&
					mix != quantize.MixMXFP4_MOE { // MXFP4 goes to experts alone: a dense model's matrices are Q8_0
					t.Errorf("%s: %s, want the default %s", ti.Name, ti.Type, mix.DefaultType())
				}
			}
			if ffn, _ := f.Tensor("blk.0.ffn_down.weight"); c.FF == 172 && mix.DefaultType().BlockSize() > 1 && ffn.Type != gguf.TypeF16 {
				t.Errorf("ffn_down with rows of 172: %s, want the F16 fallback", ffn.Type)
			}
			for key, want := range map[string]uint64{
				"general.file_type": uint64(mix.FileType()), "llama.embedding_length": uint64(c.Dim),
				"llama.block_count": uint64(c.Layers), "llama.feed_forward_length": uint64(c.FF),
				"llama.attention.head_count": 4, "llama.attention.head_count_kv": 2,
				"llama.rope.dimension_count": uint64(c.Dim / 4), "llama.vocab_size": 512,
				"llama.context_length": 512, "general.quantization_version": 2, "general.alignment": 32,
			} {
				if got, ok := f.Uint(key); !ok || got != want {
					t.Errorf("%s = %d, want %d", key, got, want)
				}
			}
			// Every tensor decodes to finite values of the expected size.
			for _, ti := range f.Tensors {
				vals := make([]float32, ti.NumElements())
				if err := gguf.Dequantize(ti.Type, f.TensorData(&ti), vals); err != nil {
					t.Fatalf("%s: %v", ti.Name, err)
				}
				var sq float64
				for _, v := range vals {
					sq += float64(v) * float64(v)
				}
				rms := math.Sqrt(sq / float64(len(vals)))
				want := weightScale
				if len(ti.Shape) == 1 {
					want = 1
				}
				if math.IsNaN(rms) || math.Abs(rms-want) > 0.25*want {
					t.Errorf("%s (%s): rms %g, want about %g", ti.Name, ti.Type, rms, want)
				}
			}
			checkTokenizer(t, f)
		})
	}
}

func checkTokenizer(t *testing.T, f *gguf.File) {
	t.Helper()
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	ids := tk.Encode("Once upon a time", true, false)
	if len(ids) < 2 || ids[0] != 1 || len(ids) > 6 {
		t.Errorf("Encode(Once upon a time) = %v, want BOS and a few word tokens", ids)
	}
	for _, id := range ids {
		if id == tk.UNK() {
			t.Errorf("Encode(Once upon a time) = %v has <unk>", ids)
		}
	}
	if got := tk.Detokenize(ids, true, false); got != "Once upon a time" && got != " Once upon a time" {
		t.Errorf("Detokenize = %q", got)
	}
	// Text outside the vocabulary falls back to byte tokens, never <unk>.
	text := "Zebra & ünïcödé 🦙\n\t42"
	var back []byte
	for _, id := range tk.Encode(text, false, false) {
		if id == tk.UNK() {
			t.Errorf("<unk> in the encoding of %q", text)
		}
		back = append(back, tk.Piece(id, false)...)
	}
	if string(back) != " "+text {
		t.Errorf("pieces join to %q", back)
	}
}

func TestDeterministic(t *testing.T) {
	c := tiny(t, quantize.MixQ4_K_M)
	_, a := generate(t, c)
	_, b := generate(t, c)
	if !bytes.Equal(a, b) {
		t.Error("same seed, different bytes")
	}
	c.Seed = 2
	_, d := generate(t, c)
	if bytes.Equal(a, d) || len(a) != len(d) {
		t.Errorf("seeds 1 and 2: equal %v, %d vs %d bytes", bytes.Equal(a, d), len(a), len(d))
	}
}

// TestF16MatchesF32 checks that the weights are float16 values, so the F32 and F16 files
// hold the same model.
func TestF16MatchesF32(t *testing.T) {
	f32, _ := generate(t, tiny(t, quantize.MixF32))
	f16, _ := generate(t, tiny(t, quantize.MixF16))
	for i, a := range f32.Tensors {
		b := f16.Tensors[i]
		va, vb := make([]float32, a.NumElements()), make([]float32, b.NumElements())
		if gguf.Dequantize(a.Type, f32.TensorData(&a), va) != nil || gguf.Dequantize(b.Type, f16.TensorData(&b), vb) != nil {
			t.Fatal("dequantize failed")
		}
		if !slices.Equal(va, vb) {
			t.Errorf("%s differs between F32 and F16", a.Name)
		}
	}
}

func TestVocab(t *testing.T) {
	for _, n := range []int{MinVocab, 512, 32000, 128256} {
		tokens, scores, types, err := Vocab(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(tokens) != n || len(scores) != n || len(types) != n {
			t.Fatalf("Vocab(%d): %d tokens, %d scores, %d types", n, len(tokens), len(scores), len(types))
		}
		seen := map[string]bool{}
		for i, tok := range tokens {
			if seen[tok] {
				t.Fatalf("Vocab(%d): duplicate %q", n, tok)
			}
			seen[tok] = true
			if i > 0 && types[i] == tokenNormal && types[i-1] == tokenNormal && scores[i] >= scores[i-1] {
				t.Fatalf("Vocab(%d): score of %q not below the previous one", n, tok)
			}
		}
		if tokens[0] != "<unk>" || tokens[1] != "<s>" || tokens[2] != "</s>" || tokens[3] != "<0x00>" ||
			tokens[258] != "<0xFF>" || tokens[259] != "▁" || types[0] != tokenUnknown || types[2] != tokenControl ||
			types[10] != tokenByte || types[259] != tokenNormal {
			t.Errorf("Vocab(%d): fixed part %q", n, tokens[:4])
		}
	}
	if _, _, _, err := Vocab(MinVocab - 1); err == nil {
		t.Error("Vocab below the minimum accepted")
	}
}

func TestPresetsAndValidate(t *testing.T) {
	for _, name := range Presets() {
		c, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if c, _ := Preset("8b"); c.Dim != 4096 || c.Layers != 32 || c.KVHeads != 8 || c.FF != 14336 || c.Vocab != 128256 {
		t.Errorf("8b preset %+v", c)
	}
	if _, err := Preset("70b"); err == nil {
		t.Error("unknown preset accepted")
	}
	c, _ := Preset("tiny")
	for _, arch := range Archs() {
		a := c
		a.Arch = arch
		if hybrid(arch) || arch == "gemma4" {
			a.Layers = 4 // the fourth block is the first attention (hybrids) or global one (gemma4) (TestQwen35Validate)
		}
		if err := a.Validate(); err != nil {
			t.Errorf("tiny %s: %v", arch, err)
		}
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Dim = 0 },
		func(c *Config) { c.Heads = 3 },
		func(c *Config) { c.KVHeads = 3 },
		func(c *Config) { c.Vocab = 100 },
		func(c *Config) { c.Mix = 99 },
		func(c *Config) { c.Dim, c.Heads, c.KVHeads = 60, 4, 4 }, // head size 15 is odd
		func(c *Config) { c.Arch = "gpt2" },
		func(c *Config) { c.RopeDim = 18 },                                       // more than the head size 16
		func(c *Config) { c.Arch, c.RopeDim = "qwen2", 8 },                       // qwen2 rotates whole heads
		func(c *Config) { c.Arch, c.HeadDim = "phi3", 32 },                       // phi3's attn_output is square
		func(c *Config) { c.Arch, c.Dim, c.Heads, c.KVHeads = "phi3", 72, 4, 4 }, // rope dim 18/2 = 9 is odd
		func(c *Config) { c.HeadDim = -2 },
		func(c *Config) { c.Arch, c.RopeDim = "gemma2", 8 }, // Gemma rotates whole heads
		func(c *Config) { c.Arch, c.SlidingWindow = "gemma3", -1 },
		func(c *Config) { c.Arch, c.AttnSoftCap = "gemma2", -50 },
		func(c *Config) { c.RopeScale = -2 },
		func(c *Config) { c.Arch, c.HeadDim = "bert", 32 }, // bert's attn_q and attn_output are square
		func(c *Config) { c.Arch, c.Pooling = "bert", 4 },  // rank pooling: not an embedding
		func(c *Config) { c.Arch, c.Pooling = "bert", -1 },
		func(c *Config) { c.Pooling = 2 }, // llama has no pooling
	} {
		b := c
		bad(&b)
		if err := b.Validate(); err == nil {
			t.Errorf("%+v accepted", b)
		}
	}
}

// TestArchs generates each decoder's tiny model in F32 and Q8_0 and checks its tensors
// (names, shapes, types, value scales), its "<arch>.*" metadata, its tokenizer and that it is
// deterministic.
func TestArchs(t *testing.T) {
	type shape = []uint64
	// The tiny preset: dim 64, 4 heads, 2 KV heads, ff 172, vocab 512.
	layer0 := map[string]map[string]shape{
		"llama": {"attn_q.weight": {64, 64}, "attn_k.weight": {64, 32}, "attn_v.weight": {64, 32}, "attn_output.weight": {64, 64},
			"ffn_gate.weight": {64, 172}, "ffn_up.weight": {64, 172}},
		"qwen2": {"attn_q.weight": {64, 64}, "attn_q.bias": {64}, "attn_k.weight": {64, 32}, "attn_k.bias": {32},
			"attn_v.weight": {64, 32}, "attn_v.bias": {32}, "attn_output.weight": {64, 64},
			"ffn_gate.weight": {64, 172}, "ffn_up.weight": {64, 172}},
		"qwen2vl": {"attn_q.weight": {64, 64}, "attn_q.bias": {64}, "attn_k.weight": {64, 32}, "attn_k.bias": {32},
			"attn_v.weight": {64, 32}, "attn_v.bias": {32}, "attn_output.weight": {64, 64},
			"ffn_gate.weight": {64, 172}, "ffn_up.weight": {64, 172}},
		// Heads of 32 (2*dim/heads): q is 4x32 = 128 wide, k and v 2x32.
		"qwen3": {"attn_q.weight": {64, 128}, "attn_q_norm.weight": {32}, "attn_k.weight": {64, 64}, "attn_k_norm.weight": {32},
			"attn_v.weight": {64, 64}, "attn_output.weight": {128, 64}, "ffn_gate.weight": {64, 172}, "ffn_up.weight": {64, 172}},
		// Fused q/k/v (64 + 2x32 rows) and gate/up (2x172 rows).
		"phi3": {"attn_qkv.weight": {64, 128}, "attn_output.weight": {64, 64}, "ffn_up.weight": {64, 344}},
		// Post-norms after each block; gemma3 adds q/k norms of the head size 16.
		"gemma2": {"attn_q.weight": {64, 64}, "attn_k.weight": {64, 32}, "attn_v.weight": {64, 32}, "attn_output.weight": {64, 64},
			"post_attention_norm.weight": {64}, "ffn_gate.weight": {64, 172}, "ffn_up.weight": {64, 172}, "post_ffw_norm.weight": {64}},
		"gemma3": {"attn_q.weight": {64, 64}, "attn_q_norm.weight": {16}, "attn_k.weight": {64, 32}, "attn_k_norm.weight": {16},
			"attn_v.weight": {64, 32}, "attn_output.weight": {64, 64}, "post_attention_norm.weight": {64},
			"ffn_gate.weight": {64, 172}, "ffn_up.weight": {64, 172}, "post_ffw_norm.weight": {64}},
	}
	keys := map[string]map[string]uint64{ // beyond the common ones
		"llama":   {"rope.dimension_count": 16},
		"qwen2":   {"rope.dimension_count": 16},
		"qwen2vl": {"rope.dimension_count": 16},
		"qwen3":   {"rope.dimension_count": 32, "attention.key_length": 32, "attention.value_length": 32},
		"phi3":    {"rope.dimension_count": 8},
		"gemma2": {"rope.dimension_count": 16, "attention.key_length": 16, "attention.value_length": 16,
			"attention.sliding_window": 4},
		"gemma3": {"rope.dimension_count": 16, "attention.key_length": 16, "attention.value_length": 16,
			"attention.sliding_window": 4},
	}
	floats := map[string]map[string]float64{ // beyond rope.freq_base and the norm epsilon
		"gemma2": {"attn_logit_softcapping": 50, "final_logit_softcapping": 30},
		"gemma3": {"rope.scaling.factor": 2},
	}
	for _, arch := range Archs() {
		if arch == "bert" {
			continue // an encoder, with tensors and keys of its own: TestBert
		}
		if MoE(arch) || hybrid(arch) || arch == "gemma4" {
			continue // Mixtures of Experts, the hybrids and Gemma 4: TestMoEArchs, TestQwen35, TestGemma4
		}
		for _, mix := range []quantize.Mix{quantize.MixF32, quantize.MixQ8_0} {
			t.Run(arch+"/"+mix.String(), func(t *testing.T) {
				c := tiny(t, mix)
				c.Arch = arch
				f, b := generate(t, c)
				if _, again := generate(t, c); !bytes.Equal(b, again) {
					t.Error("same seed, different bytes")
				}
				if got, _ := f.String("general.architecture"); got != arch {
					t.Errorf("general.architecture %q", got)
				}
				gemma := strings.HasPrefix(arch, "gemma")
				want := map[string]shape{"token_embd.weight": {64, 512}, "output_norm.weight": {64}}
				if !gemma { // Gemma ties the output to the embeddings
					want["output.weight"] = shape{64, 512}
				}
				for i := range c.Layers {
					for name, s := range layer0[arch] {
						want[fmt.Sprintf("blk.%d.%s", i, name)] = s
					}
					for name, s := range map[string]shape{"attn_norm.weight": {64}, "ffn_norm.weight": {64}, "ffn_down.weight": {172, 64}} {
						want[fmt.Sprintf("blk.%d.%s", i, name)] = s
					}
				}
				checkShapes(t, f, want)
				for _, ti := range f.Tensors {
					wantType := mix.DefaultType()
					switch {
					case len(ti.Shape) == 1:
						wantType = gguf.TypeF32
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
					mean, scale := fillOf(arch, ti.Name)
					if len(ti.Shape) == 1 && strings.HasSuffix(ti.Name, "_norm.weight") && (scale > 0) != (gemma || strings.Contains(ti.Name, "attn_q_norm") || strings.Contains(ti.Name, "attn_k_norm")) {
						t.Errorf("%s: norm spread %g", ti.Name, scale)
					}
					var sum, sq float64
					for _, v := range vals {
						sum += float64(v)
						sq += (float64(v) - mean) * (float64(v) - mean)
					}
					gotMean, gotSD := sum/float64(len(vals)), math.Sqrt(sq/float64(len(vals)))
					if math.Abs(gotMean-mean) > 0.1 || math.Abs(gotSD-scale) > 0.3*scale+1e-9 {
						t.Errorf("%s: mean %.3g sd %.3g, want %g and %g", ti.Name, gotMean, gotSD, mean, scale)
					}
				}
				for key, v := range map[string]uint64{"embedding_length": 64, "block_count": 2, "feed_forward_length": 172,
					"attention.head_count": 4, "attention.head_count_kv": 2, "context_length": 512, "vocab_size": 512} {
					keys[arch][key] = v
				}
				for key, v := range keys[arch] {
					if got, ok := f.Uint(arch + "." + key); !ok || got != v {
						t.Errorf("%s.%s = %d (%v), want %d", arch, key, got, ok, v)
					}
				}
				for _, key := range []string{"rope.freq_base", "attention.layer_norm_rms_epsilon"} {
					if _, ok := f.Float(arch + "." + key); !ok {
						t.Errorf("%s.%s missing", arch, key)
					}
				}
				if _, ok := f.Lookup(arch + ".attention.key_length"); ok != (arch == "qwen3" || gemma) {
					t.Errorf("%s.attention.key_length present: %v", arch, ok)
				}
				for key, v := range floats[arch] {
					if got, ok := f.Float(arch + "." + key); !ok || got != v {
						t.Errorf("%s.%s = %g (%v), want %g", arch, key, got, ok, v)
					}
				}
				if typ, _ := f.String(arch + ".rope.scaling.type"); typ != map[bool]string{true: "linear"}[arch == "gemma3"] {
					t.Errorf("%s.rope.scaling.type %q", arch, typ)
				}
				for _, key := range []string{"attention.sliding_window", "attn_logit_softcapping", "final_logit_softcapping", "rope.scaling.factor"} {
					_, want := keys[arch][key]
					if _, ok := floats[arch][key]; ok {
						want = true
					}
					if _, ok := f.Lookup(arch + "." + key); ok != want {
						t.Errorf("%s.%s present: %v", arch, key, ok)
					}
				}
				if sect, ok := f.Int32s(arch + ".rope.dimension_sections"); ok != (arch == "qwen2vl") || ok && fmt.Sprint(sect) != "[2 3 3 0]" {
					t.Errorf("%s.rope.dimension_sections %v (%v)", arch, sect, ok)
				}
				checkTokenizer(t, f)
			})
		}
	}
}

// TestArchMixRules checks that a K-quant mix types the new tensors by llama.cpp's rules: phi3's
// fused attn_qkv counts as attn_v, and qwen3's norms stay F32.
func TestArchMixRules(t *testing.T) {
	c := tiny(t, quantize.MixQ4_K_M)
	c.Arch, c.Layers = "phi3", 8
	plans, err := c.Plan()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]gguf.GGMLType{}
	for _, p := range plans {
		types[p.Name] = p.To
	}
	// Q4_K_M gives attn_qkv (counted as attn_v) and ffn_down Q6_K in the first, last and every
	// third layer of 8: 0, 6, 7 and 3.
	for i := range 8 {
		want := gguf.TypeQ4_K
		if i == 0 || i == 3 || i >= 6 {
			want = gguf.TypeQ6_K
		}
		for _, name := range []string{"attn_qkv.weight", "ffn_down.weight"} {
			if got := types[fmt.Sprintf("blk.%d.%s", i, name)]; got != want {
				t.Errorf("blk.%d.%s: %s, want %s", i, name, got, want)
			}
		}
		if got := types[fmt.Sprintf("blk.%d.ffn_up.weight", i)]; got != gguf.TypeQ4_K {
			t.Errorf("blk.%d.ffn_up.weight: %s", i, got)
		}
	}
	q3 := tiny(t, quantize.MixQ4_K_M)
	q3.Arch = "qwen3"
	f, _ := generate(t, q3)
	for _, name := range []string{"blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight"} {
		if ti, ok := f.Tensor(name); !ok || ti.Type != gguf.TypeF32 || ti.Shape[0] != 128 {
			t.Errorf("%s: %v", name, ti)
		}
	}
}

// TestGemma4 checks gemma4's blocks: sliding ones with heads half the global ones' and their own
// attn_v, global ones with keys for values (no attn_v), the blocks from gemma4KVFrom on with no
// keys or values of their own, a layer_output_scale each near 1, rope_freqs turning the first
// half of the pairs, and Gemma 4's keys.
func TestGemma4(t *testing.T) {
	c, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.Arch, c.Layers, c.HeadDim, c.FF = "gemma4", 8, 32, 192
	f, _ := generate(t, c)
	shapes := map[string]string{}
	for _, ti := range f.Tensors {
		shapes[ti.Name] = fmt.Sprint(ti.Shape)
	}
	for name, want := range map[string]string{
		"blk.0.attn_q.weight": "[64 64]", "blk.0.attn_k.weight": "[64 32]", "blk.0.attn_v.weight": "[64 32]", "blk.0.attn_k_norm.weight": "[16]",
		"blk.3.attn_q.weight": "[64 128]", "blk.3.attn_k.weight": "[64 64]", "blk.3.attn_output.weight": "[128 64]", "blk.3.attn_q_norm.weight": "[32]",
		"blk.4.attn_q.weight": "[64 64]", "blk.7.attn_q.weight": "[64 128]", "blk.5.layer_output_scale.weight": "[1]", "rope_freqs.weight": "[16]",
		"blk.0.post_ffw_norm.weight": "[64]", "output.weight": "[64 512]",
	} {
		if shapes[name] != want {
			t.Errorf("%s: shape %q, want %s", name, shapes[name], want)
		}
	}
	for _, absent := range []string{"blk.3.attn_v.weight", "blk.4.attn_k.weight", "blk.4.attn_v.weight", "blk.7.attn_k_norm.weight"} {
		if _, ok := shapes[absent]; ok {
			t.Errorf("%s present", absent)
		}
	}
	for key, v := range map[string]uint64{"attention.key_length": 32, "attention.key_length_swa": 16, "rope.dimension_count_swa": 16,
		"attention.shared_kv_layers": 4, "attention.sliding_window": 4, "embedding_length_per_layer_input": 0} {
		if got, ok := f.Uint("gemma4." + key); !ok || got != v {
			t.Errorf("gemma4.%s = %d (%v), want %d", key, got, ok, v)
		}
	}
	fr, ok := f.Tensor("rope_freqs.weight")
	if !ok {
		t.Fatal("no rope_freqs")
	}
	vals := make([]float32, 16)
	if err := gguf.Dequantize(fr.Type, f.TensorData(fr), vals); err != nil {
		t.Fatal(err)
	}
	if vals[0] != 1 || vals[7] != 1 || vals[8] < 1e29 {
		t.Errorf("rope_freqs %v: want 1 for the first half, 1e30 after", vals)
	}
}
