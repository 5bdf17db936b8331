package tokenizer

import (
	"slices"
	"testing"
)

// wpmVocab is a tiny WordPiece vocabulary in llama.cpp's converted form: word-initial pieces
// carry "▁", continuations are bare.
func wpmVocab() Vocab {
	tokens := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "▁hello", "▁world", "ing", "▁play", "▁,", "▁!", "▁cafe", "▁中", "s"}
	types := make([]TokenType, len(tokens))
	for i := range types {
		types[i] = TypeNormal
	}
	for i := range 4 {
		types[i] = TypeControl
	}
	types[1] = TypeUnknown
	return Vocab{Model: "bert", Tokens: tokens, Types: types, BOS: 2, EOS: -1, EOT: -1, UNK: 1, PAD: 0, SEP: 3, AddBOS: true, AddSEP: true}
}

func TestWPMHandVocab(t *testing.T) {
	tk := mustNew(t, wpmVocab())
	tests := []struct {
		text string
		want []string
	}{
		{"Hello, WORLD!", []string{"▁hello", "▁,", "▁world", "▁!"}},
		{"playing plays", []string{"▁play", "ing", "▁play", "s"}},
		{"Café", []string{"▁cafe"}},                 // lowercased, accent stripped
		{"中文", []string{"▁中", "[UNK]"}},             // each Chinese character is a word
		{"hellox", []string{"[UNK]"}},               // a word that cannot be covered is UNK as a whole
		{"  \t\x00hello\u200b", []string{"▁hello"}}, // controls and format characters are dropped
	}
	for _, tc := range tests {
		if got, want := tk.Encode(tc.text, false, false), ids(t, tk, tc.want...); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.text, got, want)
		}
	}
	// With special tokens: [CLS] ... [SEP].
	if got, want := tk.Encode("hello", true, false), ids(t, tk, "[CLS]", "▁hello", "[SEP]"); !slices.Equal(got, want) {
		t.Errorf("Encode with special = %v, want %v", got, want)
	}
	// Pieces have their phantom space; Detokenize keeps it (no space prefix to remove) and
	// cleans the spaces before punctuation.
	got := tk.Detokenize(tk.Encode("Hello, world!", true, false), false, false)
	if got != " hello, world!" {
		t.Errorf("Detokenize = %q", got)
	}
	if got := tk.Detokenize(tk.Encode("Hello", true, false), false, true); got != "[CLS] hello[SEP]" {
		t.Errorf("Detokenize with special = %q", got)
	}
	if tk.Model() != "bert" || tk.SEP() != 3 || !tk.AddSEP() {
		t.Errorf("model %q sep %d addSEP %v", tk.Model(), tk.SEP(), tk.AddSEP())
	}
	// KeepCase and KeepAccents turn the normaliser off.
	v := wpmVocab()
	v.KeepCase, v.KeepAccents = true, true
	keep := mustNew(t, v)
	if got, want := keep.Encode("Hello hello", false, false), ids(t, keep, "[UNK]", "▁hello"); !slices.Equal(got, want) {
		t.Errorf("KeepCase Encode = %v, want %v", got, want)
	}
}

func TestNFDFirst(t *testing.T) {
	for c, want := range map[rune]rune{'é': 'e', 'Ä': 'A', 'ử': 'u', 'a': 'a', '가': 0x1100, '中': '中', 0x1F7D: 0x3C9} {
		if got := nfdFirstOf(c); got != want {
			t.Errorf("nfdFirstOf(%U) = %U, want %U", c, got, want)
		}
	}
}
