package tokenizer

import "strings"

// fragment is a piece of the input after special-token partitioning: either a token found
// verbatim (tok >= 0) or raw text[off:end] still to be tokenized.
type fragment struct {
	tok      int32
	off, end int
}

// partition splits text around special tokens as llama.cpp's tokenizer_st_partition does:
// user-defined tokens are always matched, control and unknown tokens only with parseSpecial.
// Longer tokens are matched first, each over the text left by the ones before.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	frags := []fragment{{tok: -1, off: 0, end: len(text)}}
	var next []fragment
	for _, id := range t.special {
		attr := t.attrs[id]
		if !parseSpecial && attr&(attrControl|attrUnknown) != 0 {
			continue
		}
		tok := t.tokens[id]
		next = next[:0]
		for _, f := range frags {
			if f.tok >= 0 {
				next = append(next, f)
				continue
			}
			off, end := f.off, f.end
			for {
				i := strings.Index(text[off:end], tok)
				if i < 0 {
					if off < end {
						next = append(next, fragment{tok: -1, off: off, end: end})
					}
					break
				}
				match := off + i
				left := match
				if attr&attrLStrip != 0 {
					for left > off && isSpace(text[left-1]) {
						left--
					}
				}
				if left > off {
					next = append(next, fragment{tok: -1, off: off, end: left})
				}
				next = append(next, fragment{tok: id, off: match, end: match + len(tok)})
				off = match + len(tok)
				if attr&attrRStrip != 0 {
					for off < end && isSpace(text[off]) {
						off++
					}
				}
			}
		}
		frags, next = next, frags
	}
	return frags
}

// isSpace is C's isspace in the "C" locale, which llama.cpp uses for lstrip/rstrip.
func isSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// Encode tokenizes text as llama_tokenize does. addSpecial adds the special tokens the model
// asks for (BOS/EOS as the vocabulary says; WordPiece always wraps the text in BOS and SEP);
// parseSpecial lets control tokens written in the text (e.g. "<s>") become those tokens instead
// of being spelled out.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	var frags []fragment
	if text != "" {
		frags = t.partition(text, parseSpecial)
	}
	out := make([]int32, 0, len(text)/3+3)
	switch t.kind {
	case kindBPE:
		var session bpeSession
		if addSpecial && t.addBOS {
			out = append(out, t.bos)
		}
		for _, f := range frags {
			if f.tok >= 0 {
				out = append(out, f.tok)
				continue
			}
			out = session.tokenize(t, text[f.off:f.end], out)
		}
		if addSpecial && t.addEOS {
			out = append(out, t.eos)
		}
		return out
	case kindWPM:
		var session wpmSession
		if addSpecial && t.bos >= 0 {
			out = append(out, t.bos)
		}
		for _, f := range frags {
			if f.tok >= 0 {
				out = append(out, f.tok)
				continue
			}
			out = session.tokenize(t, text[f.off:f.end], out)
		}
		if addSpecial && t.sep >= 0 {
			out = append(out, t.sep)
		}
		return out
	}
	if addSpecial && t.addBOS {
		out = append(out, t.bos)
	}
	var (
		session spmSession
		buf     []byte
	)
	// llama.cpp prefixes a space to the first text and to text following any special token.
	prevSpecial := true
	for _, f := range frags {
		if f.tok >= 0 {
			out = append(out, f.tok)
			prevSpecial = true
			continue
		}
		buf = buf[:0]
		if t.addSpacePrefix && prevSpecial {
			buf = append(buf, spaceMark...)
		}
		buf = escapeSpaces(buf, text[f.off:f.end])
		out = session.tokenize(t, buf, out)
		prevSpecial = false
	}
	if addSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out
}

// spaceMark is U+2581, SentencePiece's stand-in for a space inside tokens.
const spaceMark = "\u2581"

func escapeSpaces(dst []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, spaceMark...)
		s = s[i+1:]
	}
}
