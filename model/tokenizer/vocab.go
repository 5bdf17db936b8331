// Package tokenizer turns text into token ids and back exactly as llama.cpp does, so prompts,
// /tokenize answers and streamed text match llama-server token for token.
//
// Three of llama.cpp's tokenizer models are implemented: SentencePiece ("llama"), byte-level BPE
// ("gpt2", with llama.cpp's pre-tokenizer regexes) and WordPiece ("bert"). The vocabulary comes
// either from a GGUF file (FromGGUF) or from plain slices (New).
package tokenizer

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// TokenType is the per-token type stored in GGUF (tokenizer.ggml.token_type); it decides how a
// token is matched in text and rendered back.
type TokenType int32

// Token types as numbered in GGUF and llama.cpp's llama_token_type.
const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

// Vocab is everything a tokenizer needs, in the shape GGUF stores it, so tests and tools can
// build one without a file. Special ids are -1 when the vocabulary has no such token; note that
// the zero value 0 is a real id.
type Vocab struct {
	Model  string      // tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (BPE) or "bert" (WordPiece)
	Name   string      // general.name; llama.cpp keys per-model quirks on it (Phi-3 strips spaces after special tokens)
	Tokens []string    // token text, indexed by id
	Scores []float32   // merge priority per token (SentencePiece); nil means all zero
	Types  []TokenType // nil means all TypeNormal

	// Pre is tokenizer.ggml.pre, the BPE pre-tokenizer ("" is llama.cpp's "default"); Merges
	// is tokenizer.ggml.merges ("left right", highest priority first). Both are for "gpt2" only.
	Pre    string
	Merges []string // ignored unless Model is "gpt2"

	// BOS, EOS, EOT (end of turn), UNK and PAD are the special ids tokenizer.ggml.*_token_id
	// name, or the tokenizer model's defaults; -1 when none.
	BOS, EOS, EOT, UNK, PAD int32
	// SEP is the separator WordPiece appends after the text (BERT's [SEP]); -1 when none. Note
	// that the zero value is a real id.
	SEP int32

	// EOG lists further end-of-generation ids the file names (EOM, FIM pad/repo/sep). Tokens
	// recognised by their text (<|eot_id|>, <|im_end|>, <|end|>, ...) are added regardless.
	EOG []int32

	// AddBOS and AddEOS wrap tokenized text in BOS/EOS when special tokens are added;
	// AddSpacePrefix (SentencePiece) puts a space before the text and after each special token.
	AddBOS, AddEOS, AddSpacePrefix bool
	// AddSEP is tokenizer.ggml.add_sep_token; llama.cpp reports it but WordPiece appends SEP
	// whenever special tokens are added.
	AddSEP bool

	// KeepCase and KeepAccents turn off the BERT normaliser's lowercasing and accent stripping,
	// which llama.cpp applies by default ("bert" only).
	KeepCase, KeepAccents bool

	// FIM holds the fill-in-the-middle ids the file names (tokenizer.ggml.fim_*_token_id); a kind
	// it leaves out is found by its text, as llama.cpp does.
	FIM map[FIMKind]int32
}

// FIMKind is one of the fill-in-the-middle special tokens.
type FIMKind int

// The fill-in-the-middle tokens: prefix, suffix and middle markers, padding, repository name
// and file separator.
const (
	FIMPre FIMKind = iota
	FIMSuf
	FIMMid
	FIMPad
	FIMRep
	FIMSep
	numFIM
)

// modelKind is llama.cpp's llama_vocab_type for the models implemented.
type modelKind uint8

const (
	kindSPM modelKind = iota
	kindBPE
	kindWPM
)

// tokenAttr mirrors llama.cpp's llama_token_attr bit set: llama.cpp adjusts types after loading
// (e.g. marks end-of-turn tokens as control), which a single TokenType cannot express.
type tokenAttr uint32

const (
	attrUnknown     tokenAttr = 1 << 0
	attrUnused      tokenAttr = 1 << 1
	attrNormal      tokenAttr = 1 << 2
	attrControl     tokenAttr = 1 << 3
	attrUserDefined tokenAttr = 1 << 4
	attrByte        tokenAttr = 1 << 5
	attrLStrip      tokenAttr = 1 << 7
	attrRStrip      tokenAttr = 1 << 8
)

func typeAttr(t TokenType) tokenAttr {
	switch t {
	case TypeNormal:
		return attrNormal
	case TypeUnknown:
		return attrUnknown
	case TypeControl:
		return attrControl
	case TypeUserDefined:
		return attrUserDefined
	case TypeUnused:
		return attrUnused
	case TypeByte:
		return attrByte
	}
	return 0
}

// Tokenizer is an immutable, loaded vocabulary; all methods are safe for concurrent use.
type Tokenizer struct {
	tokens []string
	scores []float32
	attrs  []tokenAttr
	ids    map[string]int32
	pieces []string // rendering with special=true, as llama.cpp's token-to-piece cache
	// special lists the tokens matched verbatim in text before SentencePiece runs (control,
	// user-defined and unknown), longest text first.
	special []int32
	byteIDs [256]int32 // byte-fallback token per byte value, -1 when missing
	eog     map[int32]struct{}
	pairs   *tokenPairs
	charIDs [nSmallChars]int32 // token of each smallChar, -1 when not a token

	kind        modelKind
	bpe         *bpeModel // kindBPE only
	maxTokenLen int       // longest token in bytes, bounding WordPiece's search
	cleanSpaces bool      // Detokenize tidies spaces around punctuation (clean_spaces)

	lowercase, stripAccents bool // BERT normaliser (kindWPM)

	bos, eos, eot, eom, unk, pad, sep      int32
	fim                                    [numFIM]int32
	addBOS, addEOS, addSpacePrefix, addSEP bool
}

// Texts llama.cpp recognises as special tokens when the file does not name them; each match is
// also forced to be a control token.
var (
	eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	eomTexts    = []string{"<|eom_id|>"}
	fimPreTexts = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
		"▁<PRE>", "<|code_prefix|>", "<|prefix|>"}
	fimSufTexts = []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
		"▁<SUF>", "<|code_suffix|>", "<|suffix|>"}
	fimMidTexts = []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
		"▁<MID>", "<|code_middle|>", "<|middle|>"}
	fimPadTexts = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}
	fimRepTexts = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepTexts = []string{"<|file_sep|>"}
	eogTexts    = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
		"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
		"[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~["}
	// alwaysRendered are gpt-oss tokens llama.cpp turns into user-defined ones so they show in output.
	alwaysRendered = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
)

// New checks v and builds the lookup tables, applying the same post-load adjustments as
// llama.cpp (special-token detection by text, end-of-generation set, per-model quirks).
func New(v Vocab) (*Tokenizer, error) {
	var kind modelKind
	switch v.Model {
	case "llama":
		kind = kindSPM
	case "gpt2":
		kind = kindBPE
	case "bert":
		kind = kindWPM
	default:
		return nil, fmt.Errorf("tokenizer model %q not supported yet (supported: llama, gpt2, bert)", v.Model)
	}
	n := len(v.Tokens)
	if n == 0 {
		return nil, errors.New("tokenizer: empty vocabulary")
	}
	if n > 1<<31-1 {
		return nil, fmt.Errorf("tokenizer: vocabulary of %d tokens is too large", n)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(v.Types), n)
	}
	for _, s := range []struct {
		name string
		id   int32
	}{{"BOS", v.BOS}, {"EOS", v.EOS}, {"EOT", v.EOT}, {"UNK", v.UNK}, {"PAD", v.PAD}, {"SEP", v.SEP}} {
		if s.id < -1 || int(s.id) >= n {
			return nil, fmt.Errorf("tokenizer: %s id %d out of range [0, %d) (use -1 for none)", s.name, s.id, n)
		}
	}
	for _, id := range v.EOG {
		if id < 0 || int(id) >= n {
			return nil, fmt.Errorf("tokenizer: end-of-generation id %d out of range [0, %d)", id, n)
		}
	}
	if v.AddBOS && v.BOS < 0 {
		return nil, errors.New("tokenizer: AddBOS is set but there is no BOS token")
	}
	if v.AddEOS && v.EOS < 0 {
		return nil, errors.New("tokenizer: AddEOS is set but there is no EOS token")
	}
	if v.AddSEP && v.SEP < 0 {
		return nil, errors.New("tokenizer: AddSEP is set but there is no SEP token")
	}

	t := &Tokenizer{
		tokens:         make([]string, n),
		scores:         make([]float32, n),
		attrs:          make([]tokenAttr, n),
		ids:            make(map[string]int32, n),
		eog:            make(map[int32]struct{}),
		bos:            v.BOS,
		eos:            v.EOS,
		eot:            v.EOT,
		eom:            -1,
		unk:            v.UNK,
		pad:            v.PAD,
		sep:            v.SEP,
		addBOS:         v.AddBOS,
		addEOS:         v.AddEOS,
		addSpacePrefix: v.AddSpacePrefix,
		addSEP:         v.AddSEP,
		kind:           kind,
		lowercase:      !v.KeepCase,
		stripAccents:   !v.KeepAccents,
	}
	switch kind {
	case kindBPE:
		m, err := newBPEModel(v.Pre, v.Merges)
		if err != nil {
			return nil, err
		}
		t.bpe = m
		t.cleanSpaces = m.pre.cleanSpaces
	case kindWPM:
		t.cleanSpaces = true
	}
	for i, s := range v.Tokens {
		if s == "" {
			s = fmt.Sprintf("[EMPTY_%d]", i) // as llama.cpp, so every id stays addressable by text
		}
		if prev, dup := t.ids[s]; dup {
			return nil, fmt.Errorf("tokenizer: duplicate token %q has ids %d and %d", s, prev, i)
		}
		t.ids[s] = int32(i)
		t.tokens[i] = s
		t.maxTokenLen = max(t.maxTokenLen, len(s))
		if v.Scores != nil {
			t.scores[i] = v.Scores[i]
		}
		t.attrs[i] = attrNormal
		if v.Types != nil {
			t.attrs[i] = typeAttr(v.Types[i])
		}
	}
	t.detectSpecial(v.EOG, v.FIM)
	t.buildCaches()
	t.applyModelQuirks(v.Name)
	return t, nil
}

// detectSpecial reproduces llama.cpp's recognition of end-of-turn, FIM and end-of-generation
// tokens by their text, including forcing them to control type.
func (t *Tokenizer) detectSpecial(extraEOG []int32, fim map[FIMKind]int32) {
	find := func(texts []string) int32 {
		for _, s := range texts {
			if id, ok := t.ids[s]; ok {
				t.attrs[id] |= attrControl
				return id
			}
		}
		return -1
	}
	if t.eot < 0 {
		t.eot = find(eotTexts)
	}
	t.eom = find(eomTexts)
	for k, texts := range [numFIM][]string{fimPreTexts, fimSufTexts, fimMidTexts, fimPadTexts, fimRepTexts, fimSepTexts} {
		id := find(texts)
		if given, ok := fim[FIMKind(k)]; ok && given >= 0 && int(given) < len(t.tokens) {
			id = given
		}
		t.fim[k] = id
		if FIMKind(k) >= FIMPad && id >= 0 {
			t.eog[id] = struct{}{}
		}
	}
	for _, id := range extraEOG {
		t.eog[id] = struct{}{}
	}
	for _, s := range eogTexts {
		if id, ok := t.ids[s]; ok {
			t.eog[id] = struct{}{}
			t.attrs[id] |= attrControl
		}
	}
	for _, s := range alwaysRendered {
		if id, ok := t.ids[s]; ok {
			t.attrs[id] = attrUserDefined
		}
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id >= 0 {
			t.eog[id] = struct{}{}
		}
	}
	// o200k_harmony and solar-open: <|end|> ends a message, not the generation.
	has := func(s string) bool {
		id, ok := t.ids[s]
		_, eog := t.eog[id]
		return ok && eog
	}
	if has("<|end|>") && ((has("<|return|>") && (has("<|call|>") || has("<|calls|>"))) || (has("<|flush|>") && (has("<|call|>") || has("<|calls|>")))) {
		id := t.ids["<|end|>"]
		delete(t.eog, id)
		t.attrs[id] = attrUserDefined
	}
	// gemma4 and paddleocr: </s> is an ordinary token there.
	if has("<|tool_response>") && has("</s>") {
		id := t.ids["</s>"]
		delete(t.eog, id)
		t.attrs[id] = attrNormal
	}
}

// buildCaches fills the special-token match list, the piece cache and the lookup tables Encode
// uses.
func (t *Tokenizer) buildCaches() {
	for i, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special = append(t.special, int32(i))
		}
	}
	// Longest first so that a token containing another wins; ties by id keep it deterministic.
	slices.SortStableFunc(t.special, func(a, b int32) int {
		return cmp.Compare(len(t.tokens[b]), len(t.tokens[a]))
	})
	t.pieces = make([]string, len(t.tokens))
	for i := range t.tokens {
		t.pieces[i] = t.renderPiece(int32(i))
	}
	const hex = "0123456789ABCDEF"
	for b := range 256 {
		t.byteIDs[b] = -1
		if id, ok := t.ids[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})]; ok {
			t.byteIDs[b] = id
		} else if id, ok := t.ids[string([]byte{byte(b)})]; ok {
			t.byteIDs[b] = id
		}
	}
	for c := range t.charIDs {
		t.charIDs[c] = -1
		text := string(rune(c))
		if c == 0x80 {
			text = spaceMark
		}
		if id, ok := t.ids[text]; ok {
			t.charIDs[c] = id
		}
	}
	if t.kind == kindSPM {
		t.pairs = newTokenPairs(t.tokens)
	}
}

// applyModelQuirks sets the strip attributes llama.cpp assigns by model name after loading.
func (t *Tokenizer) applyModelQuirks(name string) {
	name = strings.ToLower(name)
	if strings.Contains(name, "phi-3") || strings.Contains(name, "phi3") {
		for _, id := range t.special {
			t.attrs[id] |= attrRStrip
		}
		if id, ok := t.ids["</s>"]; ok {
			t.attrs[id] |= attrRStrip
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if id, ok := t.ids[s]; ok {
				t.attrs[id] &^= attrRStrip
			}
		}
	}
}

func (t *Tokenizer) valid(id int32) bool { return id >= 0 && int(id) < len(t.tokens) }

// NVocab is the number of tokens, the width of the model's logits.
func (t *Tokenizer) NVocab() int { return len(t.tokens) }

// BOS is the beginning-of-sequence id, -1 when the vocabulary has none.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence id, -1 when the vocabulary has none.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT is the end-of-turn id (given or recognised by text), -1 when there is none.
func (t *Tokenizer) EOT() int32 { return t.eot }

// UNK is the unknown-token id, -1 when there is none.
func (t *Tokenizer) UNK() int32 { return t.unk }

// PAD is the padding id, -1 when there is none.
func (t *Tokenizer) PAD() int32 { return t.pad }

// SEP is the separator id (BERT's [SEP]), -1 when there is none.
func (t *Tokenizer) SEP() int32 { return t.sep }

// FIM returns a fill-in-the-middle token's id, -1 when the vocabulary has none.
func (t *Tokenizer) FIM(k FIMKind) int32 {
	if k < 0 || k >= numFIM {
		return -1
	}
	return t.fim[k]
}

// AddSEP reports tokenizer.ggml.add_sep_token (llama.cpp's add_sep), which rerankers use to
// join a query and a document.
func (t *Tokenizer) AddSEP() bool { return t.addSEP }

// Model is the tokenizer model: "llama", "gpt2" or "bert".
func (t *Tokenizer) Model() string {
	switch t.kind {
	case kindBPE:
		return "gpt2"
	case kindWPM:
		return "bert"
	}
	return "llama"
}

// AddBOS reports whether Encode with addSpecial prepends BOS, which callers building prompts
// from pieces need to know.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode with addSpecial appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// AddSpacePrefix reports whether text at the start (or after a special token) gets a leading
// space before SentencePiece runs.
func (t *Tokenizer) AddSpacePrefix() bool { return t.addSpacePrefix }

// IsEOG reports whether generating id should stop generation (EOS, EOT, EOM and the other
// end-of-generation tokens llama.cpp recognises).
func (t *Tokenizer) IsEOG(id int32) bool {
	_, ok := t.eog[id]
	return ok
}

// EOGs lists the end-of-generation ids in increasing order.
func (t *Tokenizer) EOGs() []int32 {
	ids := make([]int32, 0, len(t.eog))
	for id := range t.eog {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// IsControl reports whether id is a control token, which is hidden from output unless special
// rendering is asked for.
func (t *Tokenizer) IsControl(id int32) bool { return t.valid(id) && t.attrs[id]&attrControl != 0 }

// TokenText is the raw vocabulary text of id (with "▁" for spaces, "<0x0A>" for bytes); empty for
// an id outside the vocabulary.
func (t *Tokenizer) TokenText(id int32) string {
	if !t.valid(id) {
		return ""
	}
	return t.tokens[id]
}

// TokenID looks a token up by its exact vocabulary text.
func (t *Tokenizer) TokenID(text string) (int32, bool) {
	id, ok := t.ids[text]
	return id, ok
}
