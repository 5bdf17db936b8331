package tokenizer

// Hand-written splitters for the GPT-2 and Llama 3 pre-tokenizer regexes, following llama.cpp's
// unicode_regex_split_custom_gpt2 and unicode_regex_split_custom_llama3 step by step (they are
// what llama.cpp runs for these patterns, including their deviations from the regexes).

// outOfRange is what a position outside the current piece reads as.
const outOfRange rune = -1

// pieceCursor reads the code points of one piece and records the cuts made in it.
type pieceCursor struct {
	cpts     []rune
	ini, end int
	prevEnd  int
	out      []int
}

func (p *pieceCursor) cpt(i int) rune {
	if i >= p.ini && i < p.end {
		return p.cpts[i]
	}
	return outOfRange
}

// flags returns 0 outside the piece, so "any flag set" means "inside the piece".
func (p *pieceCursor) flags(i int) cptFlags {
	if i >= p.ini && i < p.end {
		return flagsOf(p.cpts[i])
	}
	return 0
}

// cut ends the current word at end and returns its length.
func (p *pieceCursor) cut(end int) int {
	n := end - p.prevEnd
	if n > 0 {
		p.out = append(p.out, n)
	}
	p.prevEnd = end
	return n
}

// contraction returns the length (2 or 3) of 's 't 're 've 'm 'll 'd at pos, or 0.
func (p *pieceCursor) contraction(pos int, fold bool) int {
	if p.cpt(pos) != '\'' || pos+1 >= p.end {
		return 0
	}
	lower := func(c rune) rune {
		if fold && c >= 0 {
			return toLower(c)
		}
		return c
	}
	next := lower(p.cpt(pos + 1))
	if next == 's' || next == 't' || next == 'm' || next == 'd' {
		return 2
	}
	if pos+2 < p.end {
		nn := lower(p.cpt(pos + 2))
		if (next == 'r' && nn == 'e') || (next == 'v' && nn == 'e') || (next == 'l' && nn == 'l') {
			return 3
		}
	}
	return 0
}

// whitespace handles the trailing \s+(?!\S) and \s+ alternatives shared by both splitters and
// reports whether anything matched.
func (p *pieceCursor) whitespace(pos *int, n int) bool {
	if n > 1 && p.cpt(*pos+n) != outOfRange {
		*pos += n - 1
		p.cut(*pos)
		return true
	}
	if n > 0 {
		*pos += n
		p.cut(*pos)
		return true
	}
	return false
}

const notWordFlags = flagWhitespace | flagLetter | flagNumber

// splitGPT2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(cpts []rune, offsets []int) []int {
	p := &pieceCursor{cpts: cpts, out: make([]int, 0, len(offsets))}
	start := 0
	for _, n := range offsets {
		p.ini, p.end, p.prevEnd = start, start+n, start
		start += n
		for pos := p.ini; pos < p.end; {
			c := p.cpt(pos)
			f := p.flags(pos)
			if k := p.contraction(pos, false); k > 0 {
				pos += p.cut(pos + k)
				continue
			}
			f2 := f
			if c == ' ' {
				f2 = p.flags(pos + 1)
			}
			skip := 0
			if c == ' ' {
				skip = 1
			}
			switch {
			case f2&flagLetter != 0:
				pos += skip
				for f2&flagLetter != 0 {
					pos++
					f2 = p.flags(pos)
				}
				p.cut(pos)
				continue
			case f2&flagNumber != 0:
				pos += skip
				for f2&flagNumber != 0 {
					pos++
					f2 = p.flags(pos)
				}
				p.cut(pos)
				continue
			case f2&notWordFlags == 0 && f2 != 0:
				pos += skip
				for f2&notWordFlags == 0 && f2 != 0 {
					pos++
					f2 = p.flags(pos)
				}
				p.cut(pos)
				continue
			}
			ws := 0
			for p.flags(pos+ws)&flagWhitespace != 0 {
				ws++
			}
			if p.whitespace(&pos, ws) {
				continue
			}
			pos++
			p.cut(pos)
		}
	}
	return p.out
}

// splitLlama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitLlama3(cpts []rune, offsets []int) []int {
	p := &pieceCursor{cpts: cpts, out: make([]int, 0, len(offsets))}
	start := 0
	for _, n := range offsets {
		p.ini, p.end, p.prevEnd = start, start+n, start
		start += n
		for pos := p.ini; pos < p.end; {
			c := p.cpt(pos)
			f := p.flags(pos)
			if k := p.contraction(pos, true); k > 0 {
				pos += p.cut(pos + k)
				continue
			}
			if !(c == '\r' || c == '\n' || f&flagNumber != 0) {
				if f&flagLetter != 0 || p.flags(pos+1)&flagLetter != 0 {
					pos++
					for p.flags(pos)&flagLetter != 0 {
						pos++
					}
					p.cut(pos)
					continue
				}
			}
			if f&flagNumber != 0 {
				ini := pos
				for p.flags(pos)&flagNumber != 0 {
					pos++
					if pos-ini >= 3 {
						p.cut(pos)
						ini = pos
					}
				}
				p.cut(pos)
				continue
			}
			f2 := f
			if c == ' ' {
				f2 = p.flags(pos + 1)
			}
			// llama.cpp tests the flags of pos itself (not f2) for being inside the piece here.
			if f2&notWordFlags == 0 && f != 0 {
				if c == ' ' {
					pos++
				}
				for f2&notWordFlags == 0 && f2 != 0 {
					pos++
					f2 = p.flags(pos)
				}
				for c2 := p.cpt(pos); c2 == '\r' || c2 == '\n'; c2 = p.cpt(pos) {
					pos++
				}
				p.cut(pos)
				continue
			}
			ws, lastRN := 0, 0
			for p.flags(pos+ws)&flagWhitespace != 0 {
				if c2 := p.cpt(pos + ws); c2 == '\r' || c2 == '\n' {
					lastRN = pos + ws + 1
				}
				ws++
			}
			if lastRN > 0 {
				pos = lastRN
				p.cut(pos)
				continue
			}
			if p.whitespace(&pos, ws) {
				continue
			}
			pos++
			p.cut(pos)
		}
	}
	return p.out
}
