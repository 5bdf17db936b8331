package synth

import (
	"bytes"
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
					ti.Name != "output.weight" && !strings.Contains(mix.String(), "_K_") && mix != quantize.MixQ2_K {
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
	for _, bad := range []func(*Config){
		func(c *Config) { c.Dim = 0 },
		func(c *Config) { c.Heads = 3 },
		func(c *Config) { c.KVHeads = 3 },
		func(c *Config) { c.Vocab = 100 },
		func(c *Config) { c.Mix = 99 },
		func(c *Config) { c.Dim, c.Heads, c.KVHeads = 60, 4, 4 }, // head size 15 is odd
	} {
		b := c
		bad(&b)
		if err := b.Validate(); err == nil {
			t.Errorf("%+v accepted", b)
		}
	}
}
