package tokenizer

// SentencePiece BPE as llama.cpp's llm_tokenizer_spm runs it: the text is split into UTF-8
// characters, then the adjacent pair whose concatenation is the highest-scoring vocabulary token
// is merged, leftmost first on ties, until no pair forms a token. Pieces that never became a token
// fall back to one <0xXX> token per byte.

// spmSymbol is a run of text in the doubly linked list of current pieces; n == 0 marks a symbol
// merged into its left neighbour.
type spmSymbol struct {
	prev, next int32
	start, n   int32
	id         int32 // token of a merged symbol, -1 while not known
}

// spmBigram is a candidate merge of symbols left and right; size is their combined length when
// queued, so a candidate outdated by another merge is recognised and dropped.
type spmBigram struct {
	left, right int32
	score       float32
	size        int32
	id          int32 // the token the merge forms
}

// spmSession holds scratch space reused across the fragments of one Encode call.
type spmSession struct {
	symbols []spmSymbol
	queue   []spmBigram // binary max-heap ordered by before
}

// utf8Len is llama.cpp's unicode_len_utf8: the length a lead byte announces, 1 for stray
// continuation bytes. Continuation bytes are not checked, exactly as llama.cpp does not.
func utf8Len(b byte) int32 {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// charKey packs the (at most 4) bytes of a character into a number. Distinct characters may
// share a key; that only makes the cutting in tokenize more cautious.
func charKey(c []byte) uint64 {
	var k uint64
	for _, b := range c {
		k = k<<8 | uint64(b)
	}
	return k
}

// smallChar numbers the characters that fill most text (ASCII and the escaped space) so their
// pairs can be looked up in a bit table; -1 for any other character.
func smallChar(c []byte) int {
	if len(c) == 1 && c[0] < 0x80 {
		return int(c[0])
	}
	if string(c) == spaceMark {
		return 0x80
	}
	return -1
}

const nSmallChars = 0x81

// tokenPairs records every pair of adjacent characters inside a multi-character token. Two
// characters that are never adjacent in any token can never end up in one merged piece, so the
// text can be cut between them and the pieces tokenized separately with the same result.
type tokenPairs struct {
	small [nSmallChars*nSmallChars/64 + 1]uint64 // bit a*nSmallChars+b for smallChar pairs
	other map[uint64]struct{}                    // charKey(a)<<32 | charKey(b) for the rest
}

func (p *tokenPairs) add(a, b []byte) {
	if i, j := smallChar(a), smallChar(b); i >= 0 && j >= 0 {
		bit := i*nSmallChars + j
		p.small[bit/64] |= 1 << (bit % 64)
		return
	}
	p.other[charKey(a)<<32|charKey(b)] = struct{}{}
}

// has reports whether a and b may be adjacent inside one token.
func (p *tokenPairs) has(a, b []byte) bool {
	if i, j := smallChar(a), smallChar(b); i >= 0 && j >= 0 {
		bit := i*nSmallChars + j
		return p.small[bit/64]&(1<<(bit%64)) != 0
	}
	_, ok := p.other[charKey(a)<<32|charKey(b)]
	return ok
}

func newTokenPairs(tokens []string) *tokenPairs {
	p := &tokenPairs{other: make(map[uint64]struct{})}
	for _, tok := range tokens {
		var prev []byte
		for off := 0; off < len(tok); {
			n := min(int(utf8Len(tok[off])), len(tok)-off)
			c := []byte(tok[off : off+n])
			if prev != nil {
				p.add(prev, c)
			}
			prev = c
			off += n
		}
	}
	return p
}

// tokenize appends the ids for the already escaped text to out. The text is cut where no token
// can span (see tokenPairs) so that the merge queue stays small; merges never cross a cut, so
// this changes nothing in the result, only the cost.
func (s *spmSession) tokenize(t *Tokenizer, text []byte, out []int32) []int32 {
	start := 0
	var prev []byte
	for off := 0; off < len(text); {
		n := min(int(utf8Len(text[off])), len(text)-off)
		c := text[off : off+n]
		if prev != nil && !t.pairs.has(prev, c) {
			out = s.tokenizeSegment(t, text[start:off], out)
			start = off
		}
		prev = c
		off += n
	}
	return s.tokenizeSegment(t, text[start:], out)
}

// tokenizeSegment runs the merge loop over one piece of text.
func (s *spmSession) tokenizeSegment(t *Tokenizer, text []byte, out []int32) []int32 {
	if len(text) == 0 {
		return out
	}
	s.symbols = s.symbols[:0]
	s.queue = s.queue[:0]
	for off, idx := int32(0), int32(0); int(off) < len(text); idx++ {
		n := min(utf8Len(text[off]), int32(len(text))-off)
		next := idx + 1
		if int(off+n) == len(text) {
			next = -1
		}
		s.symbols = append(s.symbols, spmSymbol{prev: idx - 1, next: next, start: off, n: n, id: -1})
		off += n
	}
	for i := 1; i < len(s.symbols); i++ {
		s.tryAdd(t, text, int32(i-1), int32(i))
	}
	for len(s.queue) > 0 {
		b := s.pop()
		left, right := &s.symbols[b.left], &s.symbols[b.right]
		if left.n == 0 || right.n == 0 || left.n+right.n != b.size {
			continue
		}
		left.n += right.n
		left.id = b.id
		right.n = 0
		left.next = right.next
		if right.next >= 0 {
			s.symbols[right.next].prev = b.left
		}
		s.tryAdd(t, text, left.prev, b.left)
		s.tryAdd(t, text, b.left, left.next)
	}
	for i := int32(0); i != -1; i = s.symbols[i].next {
		sym := s.symbols[i]
		if sym.id >= 0 {
			out = append(out, sym.id)
			continue
		}
		piece := text[sym.start : sym.start+sym.n]
		if c := smallChar(piece); c >= 0 {
			if id := t.charIDs[c]; id >= 0 {
				out = append(out, id)
				continue
			}
		} else if id, ok := t.ids[string(piece)]; ok {
			out = append(out, id)
			continue
		}
		for _, c := range piece {
			switch {
			case t.byteIDs[c] >= 0:
				out = append(out, t.byteIDs[c])
			case t.unk >= 0:
				// llama.cpp aborts on a vocabulary without byte tokens; UNK is the graceful choice.
				out = append(out, t.unk)
			}
		}
	}
	return out
}

// tryAdd queues the merge of symbols left and right when their concatenation is a token.
func (s *spmSession) tryAdd(t *Tokenizer, text []byte, left, right int32) {
	if left < 0 || right < 0 {
		return
	}
	l, r := s.symbols[left], s.symbols[right]
	id, ok := t.ids[string(text[l.start:l.start+l.n+r.n])]
	if !ok {
		return
	}
	s.push(spmBigram{left: left, right: right, score: t.scores[id], size: l.n + r.n, id: id})
}

// before orders the queue: higher score first, then the leftmost pair.
func before(a, b *spmBigram) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

func (s *spmSession) push(b spmBigram) {
	q := append(s.queue, b)
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !before(&q[i], &q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
	s.queue = q
}

func (s *spmSession) pop() spmBigram {
	q := s.queue
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		c := l
		if r := l + 1; r < len(q) && before(&q[r], &q[l]) {
			c = r
		}
		if !before(&q[c], &q[i]) {
			break
		}
		q[i], q[c] = q[c], q[i]
		i = c
	}
	s.queue = q
	return top
}
