package tokenizer

// WordPiece as llama.cpp's llm_tokenizer_wpm_session runs it: BERT normalisation splits the text
// into words (lowercased and stripped of accents by default), each word gets the phantom-space
// prefix "▁" that llama.cpp's converter puts on word-initial tokens, and is then covered
// greedily by the longest tokens from the left. A word that cannot be covered becomes UNK.

// wpmWords is llm_tokenizer_wpm_session::preprocess.
func (t *Tokenizer) wpmWords(text string, cpts []rune, words []string) ([]rune, []string) {
	cpts = decodeCpts(cpts[:0], text)
	if t.stripAccents {
		for i, c := range cpts {
			cpts[i] = nfdFirstOf(c)
		}
	}
	var cur []byte
	flush := func() {
		if len(cur) > 0 {
			words = append(words, string(cur))
			cur = cur[:0]
		}
	}
	for _, c := range cpts {
		f := flagsOf(c)
		if f&flagWhitespace != 0 {
			flush()
			continue
		}
		if c == 0 || c == replacementChar || f&flagControl != 0 {
			continue
		}
		if t.stripAccents && f&flagMark != 0 {
			continue
		}
		lc := c
		if t.lowercase {
			lc = toLower(c)
		}
		if f&flagPunct != 0 || (c < 0x7F && f&flagSymbol != 0) || isChineseChar(c) {
			flush()
			words = append(words, string(appendCpt(nil, lc)))
			continue
		}
		cur = appendCpt(cur, lc)
	}
	flush()
	return cpts, words
}

// isChineseChar is llama.cpp's is_chinese_char, including its copy of the Hugging Face range
// that starts at U+2B920 instead of U+2B820.
func isChineseChar(c rune) bool {
	return (c >= 0x4E00 && c <= 0x9FFF) ||
		(c >= 0x3400 && c <= 0x4DBF) ||
		(c >= 0x20000 && c <= 0x2A6DF) ||
		(c >= 0x2A700 && c <= 0x2B73F) ||
		(c >= 0x2B740 && c <= 0x2B81F) ||
		(c >= 0x2B920 && c <= 0x2CEAF) ||
		(c >= 0xF900 && c <= 0xFAFF) ||
		(c >= 0x2F800 && c <= 0x2FA1F)
}

// wpmSession holds scratch space reused across the fragments of one Encode call.
type wpmSession struct {
	cpts  []rune
	words []string
	buf   []byte
}

func (s *wpmSession) tokenize(t *Tokenizer, text string, out []int32) []int32 {
	s.cpts, s.words = t.wpmWords(text, s.cpts, s.words[:0])
	for _, w := range s.words {
		s.buf = append(append(s.buf[:0], spaceMark...), w...)
		word := s.buf
		n := len(word)
		before := len(out)
		for i := 0; i < n; i++ {
			match := false
			for j := min(n, i+t.maxTokenLen+1); j > i; j-- {
				if id, ok := t.ids[string(word[i:j])]; ok {
					out = append(out, id)
					match = true
					i = j - 1
					break
				}
			}
			if !match {
				out = out[:before]
				break
			}
		}
		if len(out) == before && t.unk >= 0 { // llama.cpp would emit -1 without an UNK token
			out = append(out, t.unk)
		}
	}
	return out
}
