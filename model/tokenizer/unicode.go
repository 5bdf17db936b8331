package tokenizer

import (
	"sort"
	"sync"
	"unicode"
)

// Code point classification as llama.cpp's unicode.cpp does it. llama.cpp ships its own tables
// generated from Python's unicodedata; here the categories come from Go's unicode package
// (Unicode 15.0). The two agree except for code points assigned in one Unicode version and not
// the other, which llama.cpp's tables may classify differently.

// cptFlags mirrors llama.cpp's unicode_cpt_flags: one category bit plus the whitespace bit.
type cptFlags uint16

const (
	flagUndefined  cptFlags = 1 << 0 // Cn and anything outside the code space
	flagNumber     cptFlags = 1 << 1 // \p{N}
	flagLetter     cptFlags = 1 << 2 // \p{L}
	flagSeparator  cptFlags = 1 << 3 // \p{Z}
	flagMark       cptFlags = 1 << 4 // \p{M}
	flagPunct      cptFlags = 1 << 5 // \p{P}
	flagSymbol     cptFlags = 1 << 6 // \p{S}
	flagControl    cptFlags = 1 << 7 // \p{C} without Cn
	flagWhitespace cptFlags = 1 << 8 // the White_Space property
)

// categoryMask selects the category bit of cptFlags.
const categoryMask cptFlags = 0xFF

var (
	bmpFlagsOnce sync.Once
	bmpFlags     []cptFlags // flags of every code point below 0x10000
)

func computeFlags(c rune) cptFlags {
	var f cptFlags
	switch {
	case unicode.IsLetter(c):
		f = flagLetter
	case unicode.IsNumber(c):
		f = flagNumber
	case unicode.IsMark(c):
		f = flagMark
	case unicode.IsPunct(c):
		f = flagPunct
	case unicode.IsSymbol(c):
		f = flagSymbol
	case unicode.Is(unicode.Z, c):
		f = flagSeparator
	case unicode.Is(unicode.C, c):
		f = flagControl
	default:
		f = flagUndefined
	}
	if unicode.Is(unicode.White_Space, c) {
		f |= flagWhitespace
	}
	return f
}

// flagsOf returns the flags of code point c; code points beyond U+10FFFF are undefined.
func flagsOf(c rune) cptFlags {
	if c < 0x10000 && c >= 0 {
		bmpFlagsOnce.Do(func() {
			bmpFlags = make([]cptFlags, 0x10000)
			for i := range bmpFlags {
				bmpFlags[i] = computeFlags(rune(i))
			}
		})
		return bmpFlags[c]
	}
	if c > unicode.MaxRune || c < 0 {
		return flagUndefined
	}
	return computeFlags(c)
}

// replacementChar is what llama.cpp decodes each byte of malformed UTF-8 to.
const replacementChar = 0xFFFD

// decodeCpts is llama.cpp's unicode_cpts_from_utf8: lead and continuation bits are checked but
// overlong forms and surrogates are accepted as they come; every byte that does not start a
// well-formed sequence becomes one U+FFFD.
func decodeCpts(dst []rune, s string) []rune {
	for i := 0; i < len(s); {
		b := s[i]
		cont := func(k int) bool { return i+k < len(s) && s[i+k]&0xC0 == 0x80 }
		switch {
		case b < 0x80:
			dst = append(dst, rune(b))
			i++
			continue
		case b&0x40 == 0:
		case b&0x20 == 0:
			if cont(1) {
				dst = append(dst, rune(b&0x1F)<<6|rune(s[i+1]&0x3F))
				i += 2
				continue
			}
		case b&0x10 == 0:
			if cont(1) && cont(2) {
				dst = append(dst, rune(b&0x0F)<<12|rune(s[i+1]&0x3F)<<6|rune(s[i+2]&0x3F))
				i += 3
				continue
			}
		case b&0x08 == 0:
			if cont(1) && cont(2) && cont(3) {
				dst = append(dst, rune(b&0x07)<<18|rune(s[i+1]&0x3F)<<12|rune(s[i+2]&0x3F)<<6|rune(s[i+3]&0x3F))
				i += 4
				continue
			}
		}
		dst = append(dst, replacementChar)
		i++
	}
	return dst
}

// appendCpt is llama.cpp's unicode_cpt_to_utf8, which (unlike utf8.AppendRune) writes
// surrogates as they are. llama.cpp throws for code points beyond U+10FFFF, which only 4-byte
// sequences with lead bytes F5-F7 produce; they are written as U+FFFD here.
func appendCpt(dst []byte, c rune) []byte {
	switch {
	case c < 0:
		c = replacementChar
	case c <= 0x7F:
		return append(dst, byte(c))
	case c <= 0x7FF:
		return append(dst, 0xC0|byte(c>>6), 0x80|byte(c&0x3F))
	case c > unicode.MaxRune:
		c = replacementChar
	}
	if c <= 0xFFFF {
		return append(dst, 0xE0|byte(c>>12), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
	}
	return append(dst, 0xF0|byte(c>>18), 0x80|byte(c>>12&0x3F), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
}

// byteRunes is GPT-2's bytes_to_unicode table (llama.cpp's unicode_byte_to_utf8): printable
// Latin-1 bytes stand for themselves, the others for U+0100 onwards in byte order.
var byteRunes = func() (m [256]rune) {
	n := rune(0)
	for b := range 256 {
		if (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = 256 + n
			n++
		}
	}
	return m
}()

// runeBytes inverts byteRunes for the decoding of BPE pieces; -1 marks runes that stand for no
// byte.
var runeBytes = func() (m [324]int16) {
	for i := range m {
		m[i] = -1
	}
	for b, r := range byteRunes {
		m[r] = int16(b)
	}
	return m
}()

// toLower is llama.cpp's unicode_tolower (single code point lowercase mapping).
func toLower(c rune) rune {
	if c < 0x80 {
		if c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	return unicode.ToLower(c)
}

// nfdFirstOf is llama.cpp's unicode_cpts_normalize_nfd for one code point: the first code point
// of its canonical decomposition.
func nfdFirstOf(c rune) rune {
	if c < 0xC0 {
		return c
	}
	if c >= 0xAC00 && c <= 0xD7A3 { // Hangul syllable: its leading consonant
		return 0x1100 + (c-0xAC00)/588
	}
	n := len(nfdFirst) / 2
	i := sort.Search(n, func(i int) bool { return rune(nfdFirst[2*i]) >= c })
	if i < n && rune(nfdFirst[2*i]) == c {
		return rune(nfdFirst[2*i+1])
	}
	return c
}
