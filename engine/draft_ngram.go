package engine

// ngramDraft is prompt-lookup drafting without a model (llama.cpp's ngram-simple): it finds
// the most recent earlier occurrence of the last n tokens of hist (prompt and generated
// tokens, the token to evaluate next last) and proposes the m tokens that followed it. When
// that continuation runs into the present (the text repeats with a period shorter than m),
// it goes on repeating, as an LZ77 copy does: the period-p loop a small model falls into is
// then drafted m tokens ahead rather than p. It returns nil when hist is not longer than n or
// the n-gram did not occur before.
//
// llama.cpp's version stops at the end of the history and also wants a history longer than
// n+m+1 and a continuation of at least n tokens; here any earlier occurrence drafts, and
// --draft-max and --draft-min bound the length.
func ngramDraft(hist []int32, n, m int) []int32 {
	if n < 1 || m < 1 || len(hist) <= n {
		return nil
	}
	pattern := hist[len(hist)-n:]
	for j := len(hist) - n - 1; j >= 0; j-- {
		if !equalTokens(hist[j:j+n], pattern) {
			continue
		}
		draft := make([]int32, 0, m)
		for i := range m {
			if src := j + n + i; src < len(hist) {
				draft = append(draft, hist[src])
			} else {
				draft = append(draft, draft[src-len(hist)])
			}
		}
		return draft
	}
	return nil
}

func equalTokens(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}
