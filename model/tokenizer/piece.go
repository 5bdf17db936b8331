package tokenizer

import "strings"

// renderPiece is llama.cpp's token_to_piece for SPM with special=true: special and user-defined
// tokens render as their text, normal tokens with "▁" turned back into spaces, byte tokens as
// their byte, and anything else (unused, undefined) as nothing.
func (t *Tokenizer) renderPiece(id int32) string {
	attr := t.attrs[id]
	text := t.tokens[id]
	switch {
	case attr&(attrUnknown|attrControl|attrUserDefined) != 0:
		return text
	case attr&attrNormal != 0:
		return strings.ReplaceAll(text, spaceMark, " ")
	case attr&attrByte != 0:
		return string([]byte{byteTokenValue(text)})
	}
	return ""
}

// byteTokenValue parses the hex digits of "<0xXX>" as llama.cpp does (strtol on text[3:5]),
// yielding 0 for malformed text instead of failing.
func byteTokenValue(text string) byte {
	if len(text) < 4 {
		return 0
	}
	var v byte
	for _, c := range []byte(text[3:min(5, len(text))]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return v
		}
	}
	return v
}

// piece returns the cached rendering of id, hiding control and unknown tokens unless special.
func (t *Tokenizer) piece(id int32, special bool) string {
	if !t.valid(id) {
		return ""
	}
	if !special && t.attrs[id]&(attrUnknown|attrControl) != 0 {
		return ""
	}
	return t.pieces[id]
}

// Piece is llama_token_to_piece (lstrip 0): the bytes id stands for in output. It may be part of
// a UTF-8 character (byte-fallback tokens); special renders control tokens such as "<s>" as text.
// An id outside the vocabulary yields nothing.
func (t *Tokenizer) Piece(id int32, special bool) []byte {
	return []byte(t.piece(id, special))
}

// Detokenize is llama_detokenize: the text of ids, dropping the space the tokenizer prefixed at
// the start. removeSpecial drops a leading BOS and trailing EOS when the vocabulary adds them;
// unparseSpecial renders control tokens as text. The result can hold invalid UTF-8 where ids
// split a character.
func (t *Tokenizer) Detokenize(ids []int32, removeSpecial, unparseSpecial bool) string {
	// llama.cpp strips the prefix space only when no BOS was removed in front of it.
	removeSpace := t.addSpacePrefix
	if removeSpecial && t.addBOS && len(ids) > 0 && ids[0] == t.bos {
		removeSpace = false
		ids = ids[1:]
	}
	if removeSpecial && t.addEOS && len(ids) > 0 && ids[len(ids)-1] == t.eos {
		ids = ids[:len(ids)-1]
	}
	var sb strings.Builder
	for _, id := range ids {
		p := t.piece(id, unparseSpecial)
		if removeSpace {
			p = strings.TrimPrefix(p, " ")
			removeSpace = false
		}
		sb.WriteString(p)
	}
	return sb.String()
}
