package tokenizer

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// bpeVocab is a tiny byte-level BPE vocabulary: every printable ASCII byte plus a few merges.
func bpeVocab(pre string) Vocab {
	tokens := []string{"<|endoftext|>"}
	for c := '!'; c <= '~'; c++ {
		tokens = append(tokens, string(c))
	}
	tokens = append(tokens, "Ġ", "Ċ", "Ġh", "he", "ll", "llo", "hello", "Ġhe", "Ġhello", "Ã", "¤", "Ã¤")
	merges := []string{"Ġ h", "h e", "l l", "ll o", "he llo", "Ġh e", "Ġhe llo", "Ã ¤"}
	types := make([]TokenType, len(tokens))
	for i := range types {
		types[i] = TypeNormal
	}
	types[0] = TypeControl
	return Vocab{Model: "gpt2", Pre: pre, Tokens: tokens, Types: types, Merges: merges,
		BOS: 0, EOS: 0, EOT: -1, UNK: -1, PAD: -1, SEP: -1}
}

func TestBPEHandVocab(t *testing.T) {
	tk := mustNew(t, bpeVocab("gpt-2"))
	tests := []struct {
		text string
		want []string
	}{
		// "Ġh e" ranks after "h e", so "hello" forms from h+e first: Ġ h e llo -> Ġh ello? No:
		// ranks decide: "Ġ h"(0) first, then "l l"(2), "ll o"(3); "h e" no longer applies.
		{"hello", []string{"hello"}},
		{" hello", []string{"Ġhello"}},
		{"hello hello", []string{"hello", "Ġhello"}},
		{"ä", []string{"Ã¤"}},
		{"\n", []string{"Ċ"}},
		{"<|endoftext|>", []string{"<", "|", "e", "n", "d", "o", "f", "t", "e", "x", "t", "|", ">"}},
	}
	for _, tc := range tests {
		if got, want := tk.Encode(tc.text, false, false), ids(t, tk, tc.want...); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.text, got, want)
		}
		if back := tk.Detokenize(tk.Encode(tc.text, false, false), false, false); back != tc.text {
			t.Errorf("Detokenize(Encode(%q)) = %q", tc.text, back)
		}
	}
	// Special tokens are matched only with parseSpecial; add_bos is off by default for gpt2.
	if got := tk.Encode("<|endoftext|>hello", true, true); !slices.Equal(got, ids(t, tk, "<|endoftext|>", "hello")) {
		t.Errorf("Encode with parse special = %v", got)
	}
	// A byte without a token (é is C3 A9; "©" is no token) is dropped as llama.cpp drops it.
	if got := tk.Encode("é", false, false); !slices.Equal(got, ids(t, tk, "Ã")) {
		t.Errorf("Encode(é) = %v", got)
	}
	if tk.Model() != "gpt2" || tk.AddBOS() || tk.AddSpacePrefix() {
		t.Errorf("model %q addBOS %v prefix %v", tk.Model(), tk.AddBOS(), tk.AddSpacePrefix())
	}
}

func TestBPECleanSpaces(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a , b . c ! d ?", "a, b. c! d?"},
		{"it ' s", "it's"},
		{"we 're and I 've and you 'll", "we're and I've and you 'll"},
		{"I 'm", "I'm"},
		{" ,", ","},
		{"x", "x"},
		{"", ""},
	} {
		if got := cleanSpaces(tc.in); got != tc.want {
			t.Errorf("cleanSpaces(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// gpt-2 cleans spaces on detokenize, qwen2 does not.
	text := "a ,b"
	for pre, want := range map[string]string{"gpt-2": "a,b", "qwen2": "a ,b"} {
		tk := mustNew(t, bpeVocab(pre))
		if got := tk.Detokenize(tk.Encode(text, false, false), false, false); got != want {
			t.Errorf("%s: Detokenize = %q, want %q", pre, got, want)
		}
	}
}

func TestDecodeBPEText(t *testing.T) {
	if got := decodeBPEText("ĠhelloĊ"); got != " hello\n" {
		t.Errorf("decode = %q", got)
	}
	// A rune outside the byte table is reported as llama.cpp does.
	if got := decodeBPEText("a→"); got != "a[UNK_BYTE_0xe28692a→]" {
		t.Errorf("decode = %q", got)
	}
	for b := range 256 {
		if got := decodeBPEText(string(byteRunes[b])); got != string([]byte{byte(b)}) {
			t.Fatalf("byte %#x round trip = %q", b, got)
		}
	}
}

// words splits text with the pre-tokenizer of pre and returns the pieces.
func words(t *testing.T, pre, text string) []string {
	t.Helper()
	pt, err := preTypeFor(pre)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := newSplitter(pt.regexes)
	if err != nil {
		t.Fatal(err)
	}
	cpts := decodeCpts(nil, text)
	var out []string
	start := 0
	for _, n := range sp.split(cpts) {
		out = append(out, string(cpts[start:start+n]))
		start += n
	}
	return out
}

func TestPreTokenizers(t *testing.T) {
	tests := []struct {
		pre, text string
		want      []string
	}{
		{"gpt-2", "Hello, y'all!  123 x", []string{"Hello", ",", " y", "'", "all", "!", " ", " 123", " x"}},
		{"gpt-2", "I've  ", []string{"I", "'ve", "  "}},
		{"llama-bpe", "Hello, Y'ALL!\n\n 1234567", []string{"Hello", ",", " Y", "'ALL", "!\n\n", " ", "123", "456", "7"}},
		{"llama-bpe", "I'M it'S", []string{"I", "'M", " it", "'S"}},
		{"llama-bpe", "a  b\t\n", []string{"a", " ", " b", "\t\n"}},
		{"qwen2", "x 1234 y's", []string{"x", " ", "1", "2", "3", "4", " y", "'s"}},
		{"qwen2", "é!?\n\n", []string{"é", "!?\n\n"}},
		{"deepseek-coder", "ab 12\ncd", []string{"ab", " ", "1", "2", "\n", "cd"}},
		{"deepseek-v3", "abc 12345 中文", []string{"abc", " ", "123", "45", " ", "中文"}},
		{"starcoder", "x=12", []string{"x", "=", "1", "2"}},
		{"falcon", "a.. 12345", []string{"a", "..", " ", "123", "45"}},
		{"default", "a 1234!", []string{"a", " ", "123", "4", "!"}},
	}
	for _, tc := range tests {
		if got := words(t, tc.pre, tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("%s: split(%q) = %q, want %q", tc.pre, tc.text, got, tc.want)
		}
	}
	if _, err := preTypeFor("no-such-pre"); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("unknown pre: %v", err)
	}
}

// TestCollapseRegex checks the rewriting of \p{..} classes for collapsed text.
func TestCollapseRegex(t *testing.T) {
	got := collapseRegex(`\p{N}+|[^\s\p{L}\p{N}]+`)
	want := `[\u00D10-9]+|[^\s\u00D2A-Za-z\u00D10-9]+`
	if got != want {
		t.Errorf("collapseRegex = %s, want %s", got, want)
	}
}

func TestDecodeCpts(t *testing.T) {
	// Malformed bytes become U+FFFD one byte at a time; surrogates and overlong forms pass.
	got := decodeCpts(nil, "a\xff\xc3\xa4\xed\xa0\x80\xc0\x80\xe2\x82")
	want := []rune{'a', 0xFFFD, 'ä', 0xD800, 0, 0xFFFD, 0xFFFD}
	if !slices.Equal(got, want) {
		t.Errorf("decodeCpts = %U, want %U", got, want)
	}
	if b := appendCpt(nil, 0xD800); string(b) != "\xed\xa0\x80" {
		t.Errorf("appendCpt(D800) = %q", b)
	}
}

// BenchmarkEncodeModels measures each tokenizer model on about 1 MB of text.
func BenchmarkEncodeModels(b *testing.B) {
	text := benchText()
	for _, name := range []string{"llama-spm", "gpt-2", "falcon", "deepseek-llm", "deepseek-coder", "starcoder", "bert-bge"} {
		b.Run(name, func(b *testing.B) {
			tk := loadGGUF(b, filepath.Join(shareddata.Path(b, "models", "vocab"), "ggml-vocab-"+name+".gguf"))
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			for b.Loop() {
				tk.Encode(text, true, false)
			}
		})
	}
}
