package engine

import (
	"fmt"
	"testing"
)

func TestNgramDraft(t *testing.T) {
	for _, tc := range []struct {
		hist []int32
		n, m int
		want []int32
	}{
		// "1 2 3" occurred at the start: propose what followed it, then, past the present,
		// the same period again.
		{[]int32{1, 2, 3, 4, 5, 6, 1, 2, 3}, 3, 6, []int32{4, 5, 6, 1, 2, 3}},
		{[]int32{1, 2, 3, 4, 5, 6, 1, 2, 3}, 3, 8, []int32{4, 5, 6, 1, 2, 3, 4, 5}},
		// At most m tokens.
		{[]int32{1, 2, 3, 4, 5, 6, 1, 2, 3}, 3, 2, []int32{4, 5}},
		// The most recent occurrence wins: "7 8" was followed by 1 first, by 2 later.
		{[]int32{7, 8, 1, 7, 8, 2, 9, 7, 8}, 2, 1, []int32{2}},
		// An occurrence overlapping the pattern itself: a run of one token continues.
		{[]int32{5, 5, 5, 5}, 2, 4, []int32{5, 5, 5, 5}},
		// A loop of period 2 (x y x y x): drafted m ahead.
		{[]int32{3, 8, 9, 8, 9, 8}, 1, 5, []int32{9, 8, 9, 8, 9}},
		// No earlier occurrence.
		{[]int32{1, 2, 3, 4}, 2, 4, nil},
		// History not longer than n.
		{[]int32{1, 2}, 2, 4, nil},
		{[]int32{1, 2, 1}, 0, 4, nil},
	} {
		got := ngramDraft(tc.hist, tc.n, tc.m)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("ngramDraft(%v, n=%d, m=%d) = %v, want %v", tc.hist, tc.n, tc.m, got, tc.want)
		}
	}
}
