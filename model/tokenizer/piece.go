package tokenizer

import "strings"

// renderPiece is llama.cpp's token_to_piece with special=true: special and user-defined tokens
// render as their text, normal tokens with "▁" turned back into spaces (SentencePiece,
// WordPiece) or with their byte-level spelling decoded (BPE), byte tokens as their byte, and
// anything else (unused, undefined) as nothing.
func (t *Tokenizer) renderPiece(id int32) string {
	attr := t.attrs[id]
	text := t.tokens[id]
	switch {
	case attr&(attrUnknown|attrControl|attrUserDefined) != 0:
		return text
	case attr&attrNormal != 0:
		if t.kind == kindBPE {
			return decodeBPEText(text)
		}
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
// unparseSpecial renders control tokens as text. For BPE pre-tokenizers with llama.cpp's
// clean_spaces and for WordPiece, spaces before punctuation and some contractions are removed
// as llama.cpp does. The result can hold invalid UTF-8 where ids split a character.
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
	if t.cleanSpaces {
		return cleanSpaces(sb.String())
	}
	return sb.String()
}

// cleanSpaces is the clean_spaces step of llama_detokenize, three passes over the bytes: drop a
// space before ? ! . or ,; drop the spaces around a lone apostrophe; drop the space before 's
// 'm 're and 've.
func cleanSpaces(s string) string {
	if len(s) < 2 {
		return s
	}
	text := []byte(s)
	// Pass 1.
	out := []byte{text[0]}
	for i := 1; i < len(text); i++ {
		x := text[i]
		if text[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			out = out[:len(out)-1]
		}
		out = append(out, x)
	}
	// Pass 2: the space after the apostrophe is zeroed in place, as llama.cpp does.
	text, out = out, append([]byte(nil), out[0])
	for i := 1; i < len(text); i++ {
		x := text[i]
		if x == '\'' && i+1 < len(text) && text[i-1] == ' ' && text[i+1] == ' ' {
			out = out[:len(out)-1]
			i++
			text[i] = 0
		}
		out = append(out, x)
	}
	// Pass 3.
	text, out = out, append([]byte(nil), out[0])
	for i := 1; i < len(text); i++ {
		x := text[i]
		if text[i-1] == ' ' && x == '\'' && i+1 < len(text) {
			x1 := text[i+1]
			switch {
			case x1 == 's' || x1 == 'm':
				out = out[:len(out)-1]
			case i+2 < len(text) && ((x1 == 'r' && text[i+2] == 'e') || (x1 == 'v' && text[i+2] == 'e')):
				out = out[:len(out)-1]
			}
		}
		out = append(out, x)
	}
	return string(out)
}
