package synth

import (
	"fmt"
	"strings"
)

// Token types, as llama.cpp numbers them (enum llama_token_type).
const (
	tokenNormal  = 1
	tokenUnknown = 2
	tokenControl = 3
	tokenByte    = 6
)

// MinVocab is the smallest vocabulary: <unk>, <s>, </s>, the 256 byte tokens and "▁".
const MinVocab = 3 + 256 + 1

// spaceMark is SentencePiece's visible space, which starts every word piece.
const spaceMark = "▁"

// words are common English words, the opening of a tiny story first (so that even a 512-token
// vocabulary encodes "Once upon a time" as words), each given as a "▁"-prefixed piece with all
// its prefixes so that SentencePiece merges can reach it.
const words = `Once upon time there was little girl named Lily the and a to was he she it of in said her his they you that with day one
time upon once there little girl boy named Lily Tom Ben Sue Max mom dad play played
big happy saw see went go friend friends sun park tree ball dog cat bird fish toy toys
wanted want liked like loved love help helped very so but not had have is are were all
be can do did for from on at up out then when what who how this my your we me him them
good new old red blue green small run ran jump jumped look looked make made come came
home house garden water food eat ate sleep bed night morning smile smiled sad scared
find found give gave take took put know knew think thought tell told ask asked feel felt
car truck box book hat shoe door window sky rain snow flower flowers grass sand sea
`

// subwords are common word endings and stems, added without "▁" (with their prefixes).
const subwords = `ing ed er est ly s es ion tion ness ful able ment ous ish en al ar or
an on at it in un re th st ch sh ll ee oo ay ow ou ight ter ther other`

// Vocab builds a SentencePiece ("llama") vocabulary of exactly n tokens, n >= MinVocab:
// <unk> 0, <s> 1, </s> 2, the byte tokens <0x00>..<0xFF>, then "▁", the printable ASCII
// characters each alone and after "▁", the words and subwords above, and letter combinations
// of growing length until n is reached. Normal tokens score minus their rank, so shorter
// pieces merge first and every longer piece is reachable through its prefixes.
func Vocab(n int) (tokens []string, scores []float32, types []int32, err error) {
	if n < MinVocab {
		return nil, nil, nil, fmt.Errorf("synth: vocab %d is below the minimum %d", n, MinVocab)
	}
	tokens = make([]string, 0, n)
	scores = make([]float32, 0, n)
	types = make([]int32, 0, n)
	seen := make(map[string]bool, n)
	add := func(piece string, typ int32, score float32) {
		if len(tokens) < n && !seen[piece] {
			seen[piece] = true
			tokens, scores, types = append(tokens, piece), append(scores, score), append(types, typ)
		}
	}
	add("<unk>", tokenUnknown, 0)
	add("<s>", tokenControl, 0)
	add("</s>", tokenControl, 0)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), tokenByte, 0)
	}
	rank := 0
	normal := func(piece string) {
		if !seen[piece] {
			add(piece, tokenNormal, -float32(rank))
			rank++
		}
	}
	normal(spaceMark)
	for c := byte('!'); c <= '~'; c++ {
		normal(string(c))
		normal(spaceMark + string(c))
	}
	chain := func(piece string) { // the piece and its prefixes, shortest first
		for i := 1; i <= len(piece); i++ {
			if i == len(piece) || piece[i]&0xC0 != 0x80 {
				normal(piece[:i])
			}
		}
	}
	for _, w := range strings.Fields(words) {
		chain(spaceMark + w)
	}
	for _, w := range strings.Fields(subwords) {
		chain(w)
	}
	for length := 2; len(tokens) < n; length++ {
		combos(length, func(s string) bool {
			normal(s)
			normal(spaceMark + s)
			return len(tokens) < n
		})
	}
	return tokens, scores, types, nil
}

// combos calls f with every string of length lower-case letters, in lexicographic order,
// until f returns false.
func combos(length int, f func(string) bool) {
	b := []byte(strings.Repeat("a", length))
	for {
		if !f(string(b)) {
			return
		}
		i := length - 1
		for i >= 0 && b[i] == 'z' {
			b[i] = 'a'
			i--
		}
		if i < 0 {
			return
		}
		b[i]++
	}
}
