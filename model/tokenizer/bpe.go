package tokenizer

import (
	"fmt"
	"strings"
)

// Byte-level BPE as llama.cpp's llm_tokenizer_bpe_session runs it: the pre-tokenizer cuts the
// text into words, each word's UTF-8 bytes are spelled with GPT-2's byte-to-unicode table, and
// within a word the adjacent pair with the lowest merge rank is merged (leftmost first on ties)
// until no pair has a rank. A final symbol that is no token falls back to the tokens of its
// single bytes, where those exist.

// bpeModel holds the merges, keyed by the ids of the two sides among the strings that occur in
// merges.
type bpeModel struct {
	pre      preType
	split    *splitter
	sideIDs  map[string]int32 // every string that is a side or the result of a merge
	pairRank map[uint64]int32 // left side id << 32 | right side id -> rank
}

func newBPEModel(pre string, merges []string) (*bpeModel, error) {
	pt, err := preTypeFor(pre)
	if err != nil {
		return nil, err
	}
	sp, err := newSplitter(pt.regexes)
	if err != nil {
		return nil, err
	}
	m := &bpeModel{
		pre:      pt,
		split:    sp,
		sideIDs:  make(map[string]int32, 2*len(merges)),
		pairRank: make(map[uint64]int32, len(merges)),
	}
	id := func(s string) int32 {
		if i, ok := m.sideIDs[s]; ok {
			return i
		}
		i := int32(len(m.sideIDs))
		m.sideIDs[s] = i
		return i
	}
	for rank, merge := range merges {
		// As llama.cpp: split at the first space after the first byte; a merge without one
		// pairs two empty strings.
		var left, right string
		if i := strings.IndexByte(merge[min(1, len(merge)):], ' '); i >= 0 {
			i += min(1, len(merge))
			left, right = merge[:i], merge[i+1:]
		}
		key := uint64(id(left))<<32 | uint64(id(right))
		if _, dup := m.pairRank[key]; !dup { // emplace keeps the first rank
			m.pairRank[key] = int32(rank)
		}
		id(left + right)
	}
	if len(m.sideIDs) > 1<<31-1 {
		return nil, fmt.Errorf("tokenizer: too many merges (%d)", len(merges))
	}
	return m, nil
}

// bpeSymbol is a run of the word in the linked list of current symbols; n == 0 marks a symbol
// merged into its left neighbour.
type bpeSymbol struct {
	prev, next int32
	start, n   int32
	side       int32 // id of the text among merge sides, -1 if it is none
}

// bpeBigram is a candidate merge; ln and rn are the sides' lengths when queued, so a candidate
// outdated by another merge is recognised.
type bpeBigram struct {
	left, right int32
	rank        int32
	ln, rn      int32
}

// bpeSession holds scratch space reused across the words of one Encode call.
type bpeSession struct {
	cpts    []rune
	word    []byte
	symbols []bpeSymbol
	queue   []bpeBigram // binary min-heap by (rank, left)
	cache   map[string][]int32
}

// tokenize appends the tokens of text (one fragment between special tokens).
func (s *bpeSession) tokenize(t *Tokenizer, text string, out []int32) []int32 {
	m := t.bpe
	s.cpts = decodeCpts(s.cpts[:0], text)
	if s.cache == nil {
		s.cache = make(map[string][]int32)
	}
	start := 0
	for _, n := range m.split.split(s.cpts) {
		// The word is re-encoded from code points (malformed input became U+FFFD), then each
		// byte is spelled with its byte-to-unicode rune.
		s.word = s.word[:0]
		var raw [4]byte
		for _, c := range s.cpts[start : start+n] {
			for _, b := range appendCpt(raw[:0], c) {
				s.word = appendCpt(s.word, byteRunes[b])
			}
		}
		start += n
		if ids, ok := s.cache[string(s.word)]; ok {
			out = append(out, ids...)
			continue
		}
		before := len(out)
		out = s.tokenizeWord(t, out)
		if len(s.cache) < 1<<16 {
			s.cache[string(s.word)] = append([]int32(nil), out[before:]...)
		}
	}
	return out
}

func (s *bpeSession) tokenizeWord(t *Tokenizer, out []int32) []int32 {
	m := t.bpe
	word := s.word
	if m.pre.ignoreMerges {
		if id, ok := t.ids[string(word)]; ok {
			return append(out, id)
		}
	}
	s.symbols = s.symbols[:0]
	s.queue = s.queue[:0]
	for off := int32(0); off < int32(len(word)); {
		n := min(utf8Len(word[off]), int32(len(word))-off)
		idx := int32(len(s.symbols))
		next := idx + 1
		if off+n == int32(len(word)) {
			next = -1
		}
		side, ok := m.sideIDs[string(word[off:off+n])]
		if !ok {
			side = -1
		}
		s.symbols = append(s.symbols, bpeSymbol{prev: idx - 1, next: next, start: off, n: n, side: side})
		off += n
	}
	for i := int32(1); i < int32(len(s.symbols)); i++ {
		s.tryAdd(m, i-1, i)
	}
	for len(s.queue) > 0 {
		b := s.pop()
		l, r := &s.symbols[b.left], &s.symbols[b.right]
		if l.n == 0 || r.n == 0 || l.n != b.ln || r.n != b.rn {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			s.symbols[r.next].prev = b.left
		}
		merged, ok := m.sideIDs[string(word[l.start:l.start+l.n])]
		if !ok {
			merged = -1
		}
		l.side = merged
		s.tryAdd(m, l.prev, b.left)
		s.tryAdd(m, b.left, l.next)
	}
	for i := int32(0); i >= 0 && len(s.symbols) > 0; i = s.symbols[i].next {
		sym := s.symbols[i]
		text := word[sym.start : sym.start+sym.n]
		if id, ok := t.ids[string(text)]; ok {
			out = append(out, id)
			continue
		}
		for _, b := range text {
			if id, ok := t.ids[string([]byte{b})]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

func (s *bpeSession) tryAdd(m *bpeModel, left, right int32) {
	if left < 0 || right < 0 {
		return
	}
	l, r := s.symbols[left], s.symbols[right]
	if l.side < 0 || r.side < 0 {
		return
	}
	rank, ok := m.pairRank[uint64(l.side)<<32|uint64(r.side)]
	if !ok {
		return
	}
	s.push(bpeBigram{left: left, right: right, rank: rank, ln: l.n, rn: r.n})
}

func bigramBefore(a, b *bpeBigram) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.left < b.left)
}

func (s *bpeSession) push(b bpeBigram) {
	s.queue = append(s.queue, b)
	q := s.queue
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !bigramBefore(&q[i], &q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (s *bpeSession) pop() bpeBigram {
	q := s.queue
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q) && bigramBefore(&q[l], &q[m]) {
			m = l
		}
		if r < len(q) && bigramBefore(&q[r], &q[m]) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	s.queue = q
	return top
}

// decodeBPEText is llama.cpp's llama_decode_text: each rune of a BPE token stands for one byte;
// a rune that stands for none is written as "[UNK_BYTE_0x<its UTF-8 in hex><text>]".
func decodeBPEText(text string) string {
	cpts := decodeCpts(nil, text)
	out := make([]byte, 0, len(cpts))
	for _, c := range cpts {
		if c >= 0 && int(c) < len(runeBytes) && runeBytes[c] >= 0 {
			out = append(out, byte(runeBytes[c]))
			continue
		}
		out = append(out, "[UNK_BYTE_0x"...)
		for _, b := range appendCpt(nil, c) {
			out = fmt.Appendf(out, "%02x", b)
		}
		out = append(out, text...)
		out = append(out, ']')
	}
	return string(out)
}
