package engine

import "strings"

// findStop returns the index in text of the earliest occurrence of any stop string that ends
// at or after from (so earlier text, already searched, is not searched again), and the string.
func findStop(text string, stops []string, from int) (int, string) {
	best, word := -1, ""
	for _, s := range stops {
		if s == "" {
			continue
		}
		start := max(0, from-len(s)+1)
		if i := strings.Index(text[start:], s); i >= 0 && (best < 0 || start+i < best) {
			best, word = start+i, s
		}
	}
	return best, word
}

// heldBack is how many bytes at the end of text could be the start of a stop string and so
// must not be streamed yet.
func heldBack(text string, stops []string) int {
	held := 0
	for _, s := range stops {
		for k := min(len(s)-1, len(text)); k > held; k-- {
			if strings.HasSuffix(text, s[:k]) {
				held = k
				break
			}
		}
	}
	return held
}
