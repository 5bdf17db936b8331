package tokenizer

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

func loadGGUF(tb testing.TB, path string) *Tokenizer {
	tb.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	tk, err := FromGGUF(f)
	if err != nil {
		tb.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return tk
}

// TestStories260K checks the answers llama-server gave for stories260K (see
// shared/reference/llama-server-wire).
func TestStories260K(t *testing.T) {
	tk := loadGGUF(t, shareddata.Path(t, "models", "stories260K.gguf"))
	if got, want := tk.Encode("Once upon a time", false, false), []int32{403, 407, 261, 378}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	withBOS := tk.Encode("Once upon a time", true, false)
	if want := []int32{1, 403, 407, 261, 378}; !slices.Equal(withBOS, want) {
		t.Errorf("Encode with BOS = %v, want %v", withBOS, want)
	}
	if got := tk.Detokenize(withBOS, false, true); got != "<s> Once upon a time" {
		t.Errorf("Detokenize = %q", got)
	}
	if got, want := tk.Encode("<s>Hello", false, true), []int32{1, 346, 306, 414}; !slices.Equal(got, want) {
		t.Errorf("Encode(<s>Hello, parse special) = %v, want %v", got, want)
	}
	var pieces []string
	for _, id := range withBOS {
		pieces = append(pieces, string(tk.Piece(id, true)))
	}
	if want := []string{"<s>", " Once", " upon", " a", " time"}; !slices.Equal(pieces, want) {
		t.Errorf("pieces = %q, want %q", pieces, want)
	}
	if tk.NVocab() != 512 || tk.BOS() != 1 || tk.EOS() != 2 || tk.UNK() != 0 || tk.PAD() != -1 || !tk.AddBOS() || !tk.IsEOG(2) {
		t.Error("special tokens differ from llama.cpp's reading of the file")
	}
	// Pieces put back together give the text, with the space SentencePiece prefixed.
	for _, text := range []string{"Once upon a time", "Lily said: \"Wow!\"\n\tÄpfel 🦙", "  spaces  "} {
		var b []byte
		for _, id := range tk.Encode(text, true, false) {
			b = append(b, tk.Piece(id, false)...)
		}
		if string(b) != " "+text {
			t.Errorf("pieces of %q join to %q", text, b)
		}
	}
}

// vocabTests reads a llama.cpp test-tokenizer-0 vector pair: inputs separated by
// "\n__ggml_vocab_test__\n", one line of space-separated ids per input.
func vocabTests(t *testing.T, inpPath, outPath string) (inputs []string, outputs [][]int32) {
	t.Helper()
	inp, err := os.ReadFile(inpPath)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	for s := string(inp); s != ""; {
		i := strings.Index(s, sep)
		if i < 0 {
			inputs = append(inputs, s)
			break
		}
		inputs = append(inputs, s[:i])
		s = s[i+len(sep):]
	}
	lines := strings.Split(string(out), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1] // getline yields no line after the final newline
	}
	for _, line := range lines {
		var ids []int32
		for _, f := range strings.Fields(line) {
			id, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s: %v", outPath, err)
			}
			ids = append(ids, int32(id))
		}
		outputs = append(outputs, ids)
	}
	if len(inputs) != len(outputs) {
		t.Fatalf("%d inputs but %d outputs", len(inputs), len(outputs))
	}
	return inputs, outputs
}

// TestLlamaCppVectors runs llama.cpp's test-tokenizer-0 vectors (add_special=false,
// parse_special=false) for every vocabulary with vectors, and checks that the ids turn back
// into the text.
func TestLlamaCppVectors(t *testing.T) {
	dir := shareddata.Path(t, "models", "vocab")
	files, err := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, path := range files {
		name := filepath.Base(path)
		if _, err := os.Stat(path + ".out"); err != nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			tk := loadGGUF(t, path)
			inputs, outputs := vocabTests(t, path+".inp", path+".out")
			for i, in := range inputs {
				got := tk.Encode(in, false, false)
				if !slices.Equal(got, outputs[i]) {
					t.Errorf("Encode(%q)\n got %v\nwant %v", in, got, outputs[i])
					continue
				}
				total++
				checkRoundTrip(t, tk, in, got)
			}
		})
	}
	t.Logf("%d llama.cpp vectors matched", total)
}

// checkRoundTrip checks that ids, the tokens of in, turn back into in: exactly for SentencePiece
// (less the prefixed space) and byte-level BPE (after llama.cpp's clean_spaces where the
// pre-tokenizer has it); for lossy WordPiece, the detokenized text must encode to the same ids.
func checkRoundTrip(t *testing.T, tk *Tokenizer, in string, ids []int32) {
	t.Helper()
	back := tk.Detokenize(ids, false, false)
	d := tk.NewStreamDecoder()
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(d.Add(id))
	}
	sb.WriteString(d.Flush())
	stream := sb.String()
	switch tk.Model() {
	case "llama":
		// The text comes back unchanged: Detokenize drops the prefixed space; streaming the
		// same ids gives the text with its prefixed space.
		if back != in {
			t.Errorf("Detokenize(Encode(%q)) = %q", in, back)
		}
		if want := " " + in; in != "" && stream != want {
			t.Errorf("stream of %q = %q, want %q", in, stream, want)
		}
	case "gpt2":
		want := in
		if tk.cleanSpaces {
			want = cleanSpaces(in)
		}
		if back != want {
			t.Errorf("Detokenize(Encode(%q)) = %q, want %q", in, back, want)
		}
		if stream != in {
			t.Errorf("stream of %q = %q", in, stream)
		}
	case "bert":
		if slices.Contains(ids, tk.UNK()) {
			return // [UNK] renders as nothing
		}
		if again := tk.Encode(back, false, false); !slices.Equal(again, ids) {
			t.Errorf("Encode(Detokenize(Encode(%q))) = %v, want %v", in, again, ids)
		}
		if stream != strings.ReplaceAll(stream, "\uFFFD", "") {
			t.Errorf("stream of %q has broken characters: %q", in, stream)
		}
	}
}

const multilingual = "Hello world! Привет, мир! こんにちは世界 🦙 Grüße aus Köln — ¿qué tal? 你好，世界。 नमस्ते"

func TestLlama2Vocab(t *testing.T) {
	tk := loadGGUF(t, shareddata.Path(t, "models", "llama-2-tiny-random.gguf"))
	if tk.NVocab() != 32000 {
		t.Fatalf("NVocab = %d", tk.NVocab())
	}
	got := tk.Encode(multilingual, true, false)
	if len(got) < 10 || got[0] != tk.BOS() || slices.Contains(got, tk.UNK()) {
		t.Fatalf("Encode = %v", got)
	}
	if back := tk.Detokenize(got, true, false); back != " "+multilingual {
		t.Errorf("round trip = %q", back)
	}
	// The same Llama 2 vocabulary ships as llama.cpp's llama-spm test vocab: both agree.
	spm := loadGGUF(t, shareddata.Path(t, "models", "vocab", "ggml-vocab-llama-spm.gguf"))
	if want := spm.Encode(multilingual, true, false); !slices.Equal(got, want) {
		t.Errorf("llama-2-tiny-random %v\nllama-spm          %v", got, want)
	}
}

// benchText is about 1 MB of mixed English, code-like and multilingual text.
func benchText() string {
	var b bytes.Buffer
	parts := []string{
		"Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ",
		multilingual, "\n",
		"func main() {\n\tfmt.Println(\"hello, world\")\n}\n",
		"The quick brown fox jumps over the lazy dog; 3.14159 26535 89793. ",
	}
	for i := 0; b.Len() < 1<<20; i++ {
		b.WriteString(parts[i%len(parts)])
	}
	return b.String()
}

func BenchmarkEncode(b *testing.B) {
	tk := loadGGUF(b, shareddata.Path(b, "models", "llama-2-tiny-random.gguf"))
	text := benchText()
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		tk.Encode(text, true, false)
	}
}

// TestSegmentationExact checks that cutting the text where no token can span (the speed-up in
// spmSession.tokenize) gives the same ids as one merge queue over the whole text.
func TestSegmentationExact(t *testing.T) {
	tk := loadGGUF(t, shareddata.Path(t, "models", "vocab", "ggml-vocab-llama-spm.gguf"))
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "e", "t", "h", "n", " ", "  ", "\n", "0", "1", ".", ",", "'", "é", "ü", "д", "ы", "中", "文", "🦙", "▁", "\xff", "\x80", "\xe2\x82"}
	texts := []string{benchText()[:20000]}
	for range 300 {
		var sb strings.Builder
		for range rng.IntN(40) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		texts = append(texts, sb.String())
	}
	var s spmSession
	for _, text := range texts {
		escaped := escapeSpaces([]byte(spaceMark), text)
		got := s.tokenize(tk, escaped, nil)
		want := s.tokenizeSegment(tk, escaped, nil)
		if !slices.Equal(got, want) {
			t.Fatalf("%q: segmented %v, whole %v", text, got, want)
		}
	}
}

// TestConcurrentEncode tokenizes from several goroutines at once, as llama.cpp's
// test-tokenizer-0 does, so the race detector can see that a Tokenizer is read-only.
func TestConcurrentEncode(t *testing.T) {
	tk := loadGGUF(t, shareddata.Path(t, "models", "vocab", "ggml-vocab-phi-3.gguf"))
	want := tk.Encode(multilingual, true, true)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if got := tk.Encode(multilingual, true, true); !slices.Equal(got, want) {
					t.Errorf("concurrent Encode = %v, want %v", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestFIMTokens checks the fill-in-the-middle tokens found in real vocabularies, which name
// none of them in their metadata: llama.cpp finds them by their text.
func TestFIMTokens(t *testing.T) {
	tests := []struct {
		file string
		want [numFIM]int32 // pre, suf, mid, pad, rep, sep
	}{
		{"ggml-vocab-deepseek-coder.gguf", [numFIM]int32{32016, 32015, 32017, -1, -1, -1}},
		{"ggml-vocab-starcoder.gguf", [numFIM]int32{1, 3, 2, 4, -1, -1}},
		{"ggml-vocab-refact.gguf", [numFIM]int32{1, 3, 2, 4, 18, -1}},
		{"ggml-vocab-llama-spm.gguf", [numFIM]int32{-1, -1, -1, -1, -1, -1}},
	}
	for _, tt := range tests {
		tk := loadGGUF(t, shareddata.Path(t, "models", "vocab", tt.file))
		for k := FIMPre; k < numFIM; k++ {
			if got := tk.FIM(k); got != tt.want[k] {
				t.Errorf("%s: FIM(%d) = %d, want %d", tt.file, k, got, tt.want[k])
			}
		}
	}
}
