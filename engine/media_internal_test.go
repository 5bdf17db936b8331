package engine

import (
	"fmt"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// The store gives each image placeholders of its own, finds rows by placeholder, and drops the
// least recently used images beyond its bound; placeholders are never given twice.
func TestMediaStore(t *testing.T) {
	var st mediaStore
	hash := func(i int) [32]byte { return [32]byte{byte(i), byte(i >> 8)} }
	embd := func(v float32) []float32 { return []float32{v, v, v + 1, v + 1} } // 2 rows of 2
	a, _ := st.add(hash(1), embd(10), 2)
	b, _ := st.add(hash(2), embd(20), 2)
	if a.Base != model.MediaToken || b.Base != a.Base+2 {
		t.Fatalf("placeholders %v %v", a, b)
	}
	if row, toEnd, ok := st.row(b.Base + 1); !ok || fmt.Sprint(row) != "[21 21]" || toEnd != 0 {
		t.Errorf("row %v %d %v", row, toEnd, ok)
	}
	if _, toEnd, _ := st.row(a.Base); toEnd != 1 {
		t.Errorf("first row of a: %d to its end", toEnd)
	}
	if c, ok := st.byHash(hash(1)); !ok || c != a {
		t.Errorf("by hash %v %v", c, ok)
	}
	for i := 3; i <= mediaKeep+1; i++ { // a was used last: b goes first
		st.add(hash(i), embd(float32(i)), 2)
	}
	if _, ok := st.byHash(hash(2)); ok {
		t.Error("b kept past the bound")
	}
	if _, _, ok := st.row(b.Base); ok {
		t.Error("b's rows kept past the bound")
	}
	if _, ok := st.byHash(hash(1)); !ok || len(st.entries) != mediaKeep {
		t.Errorf("a dropped, or %d entries", len(st.entries))
	}
	again, _ := st.add(hash(2), embd(20), 2)
	if again.Base == b.Base {
		t.Error("placeholders given twice")
	}
}

func TestCutMedia(t *testing.T) {
	m := int32(model.MediaToken)
	rest := []int32{5, 6, m, m + 1, m + 2, 7, 8}
	for n, want := range map[int]int{7: 7, 5: 5, 4: 2, 3: 2, 2: 2, 1: 1} {
		if got := len(cutMedia(rest, rest[:n])); got != want {
			t.Errorf("chunk of %d cut to %d, want %d", n, got, want)
		}
	}
	if got := len(cutMedia(rest[2:], rest[2:4])); got != 0 {
		t.Errorf("a chunk inside an image that starts the rest: %d", got)
	}
}
