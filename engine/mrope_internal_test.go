package engine

import (
	"fmt"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// Text turns by its position; an image of 3 x 2 rows after two tokens turns its rows by
// their place in its grid from position 2, and the text after it goes on from 2 + 3, two
// positions short of its row; asking from any row gives the same positions.
func TestMRoPEPositions(t *testing.T) {
	m := int32(model.MediaToken)
	grid := func(id int32) (int32, int, int, bool) {
		if id >= m && id < m+6 {
			return m, 3, 2, true
		}
		return 0, 0, 0, false
	}
	seq := []int32{1, 5, m, m + 1, m + 2, m + 3, m + 4, m + 5, 7, 8}
	want := []int32{
		0, 0, 0, 0, 1, 1, 1, 0,
		2, 2, 2, 0, 2, 2, 3, 0, 2, 2, 4, 0, // row 0 of the image: x 0..2
		2, 3, 2, 0, 2, 3, 3, 0, 2, 3, 4, 0, // row 1
		5, 5, 5, 0, 6, 6, 6, 0,
	}
	for from := range seq {
		got := mropePositions(seq[:from], seq[from:], grid)
		if fmt.Sprint(got) != fmt.Sprint(want[4*from:]) {
			t.Errorf("from %d: %v\nwant %v", from, got, want[4*from:])
		}
	}
}
