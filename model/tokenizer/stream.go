package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// StreamDecoder turns generated ids into text for streaming. Byte-fallback tokens can split a
// UTF-8 character across tokens, so it holds an incomplete character back until the rest
// arrives rather than emitting half of it. It is not safe for concurrent use.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte // the start of a character whose remaining bytes have not arrived yet
}

// NewStreamDecoder starts decoding a fresh generation.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder { return &StreamDecoder{t: t} }

// Add appends id's piece (control tokens hidden) and returns the text that became complete.
// Malformed bytes that can no longer form a character come out as U+FFFD.
func (d *StreamDecoder) Add(id int32) string {
	p := d.t.piece(id, false)
	if p == "" {
		return ""
	}
	d.pending = append(d.pending, p...)
	cut := incompleteTail(d.pending)
	if cut == 0 {
		return ""
	}
	out := strings.ToValidUTF8(string(d.pending[:cut]), "\uFFFD")
	d.pending = append(d.pending[:0], d.pending[cut:]...)
	return out
}

// Flush returns whatever is held, with invalid bytes replaced by U+FFFD, at the end of a
// generation; the decoder is then empty.
func (d *StreamDecoder) Flush() string {
	if len(d.pending) == 0 {
		return ""
	}
	out := strings.ToValidUTF8(string(d.pending), "\uFFFD")
	d.pending = d.pending[:0]
	return out
}

// incompleteTail returns where a trailing, still completable UTF-8 sequence starts in b, or
// len(b) when b does not end in one.
func incompleteTail(b []byte) int {
	for i := max(0, len(b)-utf8.UTFMax+1); i < len(b); i++ {
		if !utf8.FullRune(b[i:]) {
			return i
		}
	}
	return len(b)
}
