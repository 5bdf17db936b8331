package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Ids of the hand-built test vocabulary.
const (
	tUNK  = 0
	tBOS  = 1
	tEOS  = 2
	tByte = 3 // <0x00> .. <0xFF> occupy 3..258
)

// testVocab is a tiny SentencePiece vocabulary: the three llama specials, the 256 byte tokens,
// a few words and a user-defined and an end-of-turn token.
func testVocab() Vocab {
	v := Vocab{
		Model:  "llama",
		Tokens: []string{"<unk>", "<s>", "</s>"},
		Scores: []float32{0, 0, 0},
		Types:  []TokenType{TypeUnknown, TypeControl, TypeControl},
		BOS:    tBOS, EOS: tEOS, EOT: -1, UNK: tUNK, PAD: -1,
		AddBOS: true, AddSpacePrefix: true,
	}
	for b := range 256 {
		v.Tokens = append(v.Tokens, fmt.Sprintf("<0x%02X>", b))
		v.Scores = append(v.Scores, 0)
		v.Types = append(v.Types, TypeByte)
	}
	add := func(text string, score float32, typ TokenType) {
		v.Tokens = append(v.Tokens, text)
		v.Scores = append(v.Scores, score)
		v.Types = append(v.Types, typ)
	}
	for _, w := range []struct {
		text  string
		score float32
	}{
		{"▁", -1}, {"h", -2}, {"e", -2}, {"l", -2}, {"o", -2}, {"a", -2}, {"b", -2}, {"c", -2},
		{"▁h", -3}, {"he", -4}, {"ll", -5}, {"▁he", -6}, {"▁hell", -7}, {"▁hello", -8},
		{"ab", -10}, {"bc", -10}, {"▁a", -20},
	} {
		add(w.text, w.score, TypeNormal)
	}
	add("<tool>", 0, TypeUserDefined)
	add("<|im_end|>", 0, TypeNormal) // llama.cpp turns it into a control, end-of-turn token
	return v
}

func mustNew(t *testing.T, v Vocab) *Tokenizer {
	t.Helper()
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// ids maps token texts to ids so expectations read as text.
func ids(t *testing.T, tk *Tokenizer, texts ...string) []int32 {
	t.Helper()
	out := make([]int32, len(texts))
	for i, s := range texts {
		id, ok := tk.TokenID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		out[i] = id
	}
	return out
}

func TestEncodeHandVocab(t *testing.T) {
	tk := mustNew(t, testVocab())
	noPrefix := testVocab()
	noPrefix.AddSpacePrefix = false
	tkNoPrefix := mustNew(t, noPrefix)
	eosVocab := testVocab()
	eosVocab.AddEOS = true
	tkEOS := mustNew(t, eosVocab)

	tests := []struct {
		name                     string
		tk                       *Tokenizer
		text                     string
		addSpecial, parseSpecial bool
		want                     []string
	}{
		{"merge", tk, "hello", false, false, []string{"▁hello"}},
		{"space prefix off", tkNoPrefix, "hello", false, false, []string{"he", "ll", "o"}},
		{"bos", tk, "hello", true, false, []string{"<s>", "▁hello"}},
		{"bos and eos", tkEOS, "hello", true, false, []string{"<s>", "▁hello", "</s>"}},
		{"empty with bos", tk, "", true, false, []string{"<s>"}},
		{"empty", tk, "", false, false, []string{}},
		{"spaces", tk, "hello  hello", false, false, []string{"▁hello", "▁", "▁hello"}},
		// é is not in the vocabulary: its two UTF-8 bytes become byte tokens.
		{"byte fallback", tk, "hé", false, false, []string{"▁h", "<0xC3>", "<0xA9>"}},
		// Equal scores: the leftmost pair merges first.
		{"tie leftmost", tkNoPrefix, "abc", false, false, []string{"ab", "c"}},
		{"parse special", tk, "<s>hello", false, true, []string{"<s>", "▁hello"}},
		{"special spelled out", tk, "</s>", false, false, []string{"▁", "<0x3C>", "<0x2F>", "<0x73>", "<0x3E>"}},
		// User-defined tokens are matched even without parseSpecial, and text after any
		// special token gets the space prefix again.
		{"user defined", tk, "hello<tool>hello", false, false, []string{"▁hello", "<tool>", "▁hello"}},
		{"user defined at start", tk, "<tool>a", false, false, []string{"<tool>", "▁a"}},
		{"end of turn parsed", tk, "a<|im_end|>", false, true, []string{"▁a", "<|im_end|>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.tk.Encode(tc.text, tc.addSpecial, tc.parseSpecial)
			want := ids(t, tc.tk, tc.want...)
			if !slices.Equal(got, want) {
				t.Errorf("Encode(%q) = %v, want %v (%q)", tc.text, got, want, tc.want)
			}
		})
	}
}

func TestTieBreakByScore(t *testing.T) {
	v := testVocab()
	v.AddSpacePrefix = false
	for i, s := range v.Tokens {
		if s == "bc" {
			v.Scores[i] = -9 // now higher than "ab"
		}
	}
	tk := mustNew(t, v)
	if got, want := tk.Encode("abc", false, false), ids(t, tk, "a", "bc"); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestSpecialTokens(t *testing.T) {
	tk := mustNew(t, testVocab())
	imEnd, _ := tk.TokenID("<|im_end|>")
	tool, _ := tk.TokenID("<tool>")
	if tk.EOT() != imEnd {
		t.Errorf("EOT = %d, want %d (recognised by text)", tk.EOT(), imEnd)
	}
	for _, id := range []int32{tEOS, imEnd} {
		if !tk.IsEOG(id) {
			t.Errorf("IsEOG(%d) = false", id)
		}
	}
	if tk.IsEOG(tBOS) || tk.IsEOG(tool) || tk.IsEOG(-1) {
		t.Error("BOS, user-defined or -1 reported as end of generation")
	}
	if !tk.IsControl(tBOS) || !tk.IsControl(imEnd) || tk.IsControl(tool) || tk.IsControl(1<<20) {
		t.Error("IsControl wrong")
	}
	if got := tk.EOGs(); !slices.Equal(got, []int32{tEOS, imEnd}) {
		t.Errorf("EOGs = %v", got)
	}
	if tk.NVocab() != len(testVocab().Tokens) || tk.BOS() != tBOS || tk.EOS() != tEOS || !tk.AddBOS() {
		t.Error("accessors disagree with the vocabulary")
	}
	if tk.TokenText(tByte+10) != "<0x0A>" || tk.TokenText(-1) != "" {
		t.Error("TokenText wrong")
	}
}

func TestPieceAndDetokenize(t *testing.T) {
	tk := mustNew(t, testVocab())
	hello := ids(t, tk, "▁hello")[0]
	tool := ids(t, tk, "<tool>")[0]
	pieces := []struct {
		id      int32
		special bool
		want    string
	}{
		{hello, false, " hello"},
		{tBOS, false, ""},
		{tBOS, true, "<s>"},
		{tUNK, false, ""},
		{tUNK, true, "<unk>"},
		{tool, false, "<tool>"},
		{tByte + 0x0A, false, "\n"},
		{-1, true, ""},
		{int32(tk.NVocab()), true, ""},
	}
	for _, p := range pieces {
		if got := string(tk.Piece(p.id, p.special)); got != p.want {
			t.Errorf("Piece(%d, %v) = %q, want %q", p.id, p.special, got, p.want)
		}
	}

	seq := append([]int32{tBOS}, tk.Encode("hello hello", false, false)...)
	detok := []struct {
		remove, unparse bool
		ids             []int32
		want            string
	}{
		{false, true, seq, "<s> hello hello"},
		{false, false, seq, " hello hello"}, // the hidden BOS still takes the space strip
		{true, false, seq, " hello hello"},  // llama.cpp keeps the space once it removed BOS
		{false, false, seq[1:], "hello hello"},
		{true, true, append(slices.Clone(seq), tEOS), " hello hello</s>"}, // EOS kept: AddEOS is off
	}
	for _, d := range detok {
		if got := tk.Detokenize(d.ids, d.remove, d.unparse); got != d.want {
			t.Errorf("Detokenize(%v, %v, %v) = %q, want %q", d.ids, d.remove, d.unparse, got, d.want)
		}
	}

	v := testVocab()
	v.AddEOS = true
	tkEOS := mustNew(t, v)
	if got := tkEOS.Detokenize(tkEOS.Encode("hello", true, false), true, true); got != " hello" {
		t.Errorf("Detokenize with EOS removal = %q", got)
	}
}

func TestStreamDecoder(t *testing.T) {
	tk := mustNew(t, testVocab())
	d := tk.NewStreamDecoder()
	// "€" is E2 82 AC: nothing may come out until its last byte arrives.
	for i, b := range []byte("€") {
		got := d.Add(tByte + int32(b))
		want := ""
		if i == 2 {
			want = "€"
		}
		if got != want {
			t.Errorf("byte %d: Add = %q, want %q", i, got, want)
		}
	}
	if got := d.Add(ids(t, tk, "▁hello")[0]); got != " hello" {
		t.Errorf("Add(▁hello) = %q", got)
	}
	if got := d.Add(tBOS); got != "" {
		t.Errorf("control token produced %q", got)
	}
	// A stray continuation byte can never complete: it is replaced at once.
	if got := d.Add(tByte + 0x82); got != "\uFFFD" {
		t.Errorf("stray continuation byte: %q", got)
	}
	// An incomplete character followed by text: the broken bytes become one U+FFFD.
	d.Add(tByte + 0xE2)
	d.Add(tByte + 0x82)
	if got := d.Add(ids(t, tk, "a")[0]); got != "\uFFFDa" {
		t.Errorf("broken sequence then text: %q", got)
	}
	// Flush gives up on a held, incomplete character.
	d.Add(tByte + 0xF0)
	if got := d.Add(tByte + 0x9F); got != "" {
		t.Errorf("incomplete 4-byte character emitted %q", got)
	}
	if got := d.Flush(); got != "\uFFFD" {
		t.Errorf("Flush = %q, want U+FFFD", got)
	}
	if got := d.Flush(); got != "" {
		t.Errorf("second Flush = %q", got)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Vocab)
		want   string
	}{
		{"model", func(v *Vocab) { v.Model = "t5" }, `tokenizer model "t5" not supported yet (supported: llama, gpt2, bert)`},
		{"empty", func(v *Vocab) { v.Tokens, v.Scores, v.Types = nil, nil, nil }, "empty vocabulary"},
		{"scores", func(v *Vocab) { v.Scores = v.Scores[:3] }, "scores"},
		{"types", func(v *Vocab) { v.Types = v.Types[1:] }, "token types"},
		{"bos range", func(v *Vocab) { v.BOS = 100000 }, "BOS id 100000 out of range"},
		{"pad negative", func(v *Vocab) { v.PAD = -2 }, "PAD id -2"},
		{"eog range", func(v *Vocab) { v.EOG = []int32{-1} }, "end-of-generation id -1"},
		{"add bos", func(v *Vocab) { v.BOS = -1 }, "AddBOS"},
		{"add eos", func(v *Vocab) { v.AddEOS, v.EOS = true, -1 }, "AddEOS"},
		{"duplicate", func(v *Vocab) { v.Tokens[len(v.Tokens)-1] = "▁hello" }, "duplicate token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := testVocab()
			tc.modify(&v)
			_, err := New(v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestNilScoresAndTypes(t *testing.T) {
	tk := mustNew(t, Vocab{Model: "llama", Tokens: []string{"a", "b", "ab", ""}, BOS: -1, EOS: -1, EOT: -1, UNK: -1, PAD: -1})
	if got := tk.Encode("ab", false, false); !slices.Equal(got, []int32{2}) {
		t.Errorf("Encode = %v", got)
	}
	// No byte tokens and no UNK: unknown characters are dropped rather than panicking.
	if got := tk.Encode("xa", false, false); !slices.Equal(got, []int32{0}) {
		t.Errorf("Encode without byte tokens = %v", got)
	}
	if tk.TokenText(3) != "[EMPTY_3]" {
		t.Errorf("empty token text = %q", tk.TokenText(3))
	}
}
