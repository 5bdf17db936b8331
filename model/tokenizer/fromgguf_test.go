package tokenizer

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// kv is one metadata entry for ggufImage; value is a string, bool, uint32, int32, []string,
// []float32 or []int32.
type kv struct {
	key   string
	value any
}

// ggufImage encodes a tensor-less GGUF v3 file holding kvs.
func ggufImage(t *testing.T, kvs ...kv) *gguf.File {
	t.Helper()
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	str := func(s string) { le(uint64(len(s))); b.WriteString(s) }
	b.WriteString("GGUF")
	le(uint32(3))
	le(uint64(0))
	le(uint64(len(kvs)))
	for _, e := range kvs {
		str(e.key)
		switch v := e.value.(type) {
		case string:
			le(uint32(gguf.TypeString))
			str(v)
		case bool:
			le(uint32(gguf.TypeBool))
			le(v)
		case uint32:
			le(uint32(gguf.TypeUint32))
			le(v)
		case int32:
			le(uint32(gguf.TypeInt32))
			le(v)
		case []string:
			le(uint32(gguf.TypeArray))
			le(uint32(gguf.TypeString))
			le(uint64(len(v)))
			for _, s := range v {
				str(s)
			}
		case []float32:
			le(uint32(gguf.TypeArray))
			le(uint32(gguf.TypeFloat32))
			le(uint64(len(v)))
			for _, x := range v {
				le(math.Float32bits(x))
			}
		case []int32:
			le(uint32(gguf.TypeArray))
			le(uint32(gguf.TypeInt32))
			le(uint64(len(v)))
			le(v)
		default:
			t.Fatalf("ggufImage: unsupported %T", v)
		}
	}
	f, err := gguf.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFromGGUFMinimal(t *testing.T) {
	v := testVocab()
	types := make([]int32, len(v.Types))
	for i, ty := range v.Types {
		types[i] = int32(ty)
	}
	intScores := make([]int32, len(v.Scores))
	for i, s := range v.Scores {
		intScores[i] = int32(s)
	}
	f := ggufImage(t,
		kv{"general.name", "phi-3 mini"},
		kv{"tokenizer.ggml.model", "llama"},
		kv{"tokenizer.ggml.tokens", v.Tokens},
		kv{"tokenizer.ggml.scores", intScores}, // llama.cpp accepts int32 scores too
		kv{"tokenizer.ggml.token_type", types},
		kv{"tokenizer.ggml.eos_token_id", uint32(0xFFFFFFFF)}, // out of range: default kept
		kv{"tokenizer.ggml.padding_token_id", uint32(0xFFFFFFFF)},
		kv{"tokenizer.ggml.add_space_prefix", false},
		kv{"tokenizer.ggml.add_eos_token", true},
	)
	tk, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if tk.BOS() != 1 || tk.EOS() != 2 || tk.UNK() != 0 || tk.PAD() != -1 || !tk.AddBOS() || !tk.AddEOS() || tk.AddSpacePrefix() {
		t.Errorf("defaults: bos %d eos %d unk %d pad %d addBOS %v addEOS %v prefix %v",
			tk.BOS(), tk.EOS(), tk.UNK(), tk.PAD(), tk.AddBOS(), tk.AddEOS(), tk.AddSpacePrefix())
	}
	// A Phi-3 name makes user-defined tokens swallow the whitespace after them.
	if got, want := tk.Encode("a<tool>  a", true, false), ids(t, tk, "<s>", "a", "<tool>", "a", "</s>"); !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}

func TestFromGGUFErrors(t *testing.T) {
	tokens := []string{"<unk>", "<s>", "</s>", "a"}
	tests := []struct {
		name string
		kvs  []kv
		want string
	}{
		{"no model", []kv{{"tokenizer.ggml.tokens", tokens}}, "tokenizer.ggml.model is missing"},
		{"model type", []kv{{"tokenizer.ggml.model", uint32(1)}}, "tokenizer.ggml.model is uint32, want string"},
		{"unsupported", []kv{{"tokenizer.ggml.model", "t5"}}, `tokenizer model "t5" not supported yet (supported: llama, gpt2, bert)`},
		{"no tokens", []kv{{"tokenizer.ggml.model", "llama"}}, "tokenizer.ggml.tokens is missing"},
		{"tokens type", []kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", []int32{1}}},
			"tokenizer.ggml.tokens is array of int32, want array of strings"},
		{"short scores", []kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", tokens}, {"tokenizer.ggml.scores", []float32{0}}},
			"tokenizer.ggml.scores has 1 entries for 4 tokens"},
		{"scores type", []kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", tokens}, {"tokenizer.ggml.scores", "x"}},
			"tokenizer.ggml.scores is string"},
		{"types type", []kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", tokens}, {"tokenizer.ggml.token_type", []float32{1, 1, 1, 1}}},
			"tokenizer.ggml.token_type is array of float32"},
		{"bos type", []kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", tokens}, {"tokenizer.ggml.bos_token_id", "1"}},
			"tokenizer.ggml.bos_token_id is string, want integer"},
		{"add bos type", []kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", tokens}, {"tokenizer.ggml.add_bos_token", uint32(1)}},
			"tokenizer.ggml.add_bos_token is uint32, want bool"},
		{"add bos without bos", []kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", []string{"a"}}},
			"tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromGGUF(ggufImage(t, tc.kvs...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("FromGGUF: error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestFromGGUFFIM(t *testing.T) {
	tokens := []string{"<unk>", "<s>", "</s>", "<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<PRE>", "<|file_sep|>", "a"}
	base := []kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", tokens}}
	check := func(tk *Tokenizer, want [numFIM]int32) {
		t.Helper()
		for k := FIMPre; k < numFIM; k++ {
			if got := tk.FIM(k); got != want[k] {
				t.Errorf("FIM(%d) = %d, want %d", k, got, want[k])
			}
		}
	}
	// By text: llama.cpp's spellings, first match in its list order.
	tk, err := FromGGUF(ggufImage(t, base...))
	if err != nil {
		t.Fatal(err)
	}
	check(tk, [numFIM]int32{3, 4, 5, -1, -1, 7})
	if !tk.IsEOG(7) || !tk.IsControl(3) {
		t.Error("the file separator does not end generation, or <fim_prefix> is not a control token")
	}
	// Keys win over texts; the older prefix/suffix/middle names are read too.
	tk, err = FromGGUF(ggufImage(t, append(base,
		kv{"tokenizer.ggml.prefix_token_id", uint32(6)},
		kv{"tokenizer.ggml.fim_suf_token_id", uint32(8)},
		kv{"tokenizer.ggml.fim_rep_token_id", uint32(1)},
	)...))
	if err != nil {
		t.Fatal(err)
	}
	check(tk, [numFIM]int32{6, 8, 5, -1, 1, 7})
	if tk.FIM(numFIM) != -1 || tk.FIM(-1) != -1 {
		t.Error("an unknown kind has an id")
	}
}
