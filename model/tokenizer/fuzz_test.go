package tokenizer

import (
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// FuzzTokenizers encodes text with an SPM (llama), a byte-level BPE (gpt-2) and a WordPiece
// (bert) vocabulary: never a panic, bounded time, every id in the vocabulary; the byte-level
// BPE's pieces give valid UTF-8 text back exactly, as they must (they cover every byte).
func FuzzTokenizers(f *testing.F) {
	dir := shareddata.Path(f, "models", "vocab")
	spm := loadGGUF(f, dir+"/ggml-vocab-llama-spm.gguf")
	bpe := loadGGUF(f, dir+"/ggml-vocab-gpt-2.gguf")
	wpm := loadGGUF(f, dir+"/ggml-vocab-bert-bge.gguf")
	for _, seed := range []string{
		"Once upon a time, there was a little girl named Lily.",
		"  leading spaces\tand\ttabs\n\nnewlines  ",
		"Ünïcödé 中文 日本語 🦙 emoji, and <s> special </s> tokens",
		"def f(x):\n    return x**2  # code",
		"\x00\x01 control \u200b zero-width",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 2048 {
			return
		}
		start := time.Now()
		for name, tk := range map[string]*Tokenizer{"spm": spm, "bpe": bpe, "wpm": wpm} {
			ids := tk.Encode(text, true, true)
			for _, id := range ids {
				if id < 0 || int(id) >= tk.NVocab() {
					t.Fatalf("%s: id %d outside the vocabulary of %d", name, id, tk.NVocab())
				}
			}
			tk.Detokenize(ids, false, true)
			if name != "bpe" || !utf8.ValidString(text) {
				continue
			}
			// the pieces themselves: Detokenize also cleans spaces before punctuation, as
			// llama.cpp's does for this vocabulary
			var back []byte
			for _, id := range ids {
				back = append(back, tk.Piece(id, true)...)
			}
			if string(back) != text {
				t.Fatalf("bpe round trip: %q became %q", text, back)
			}
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%v for %d bytes", d, len(text))
		}
	})
}
