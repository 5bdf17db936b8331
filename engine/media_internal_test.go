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
	embd := func(v float32) []mediaPart { return []mediaPart{{embd: []float32{v, v, v + 1, v + 1}, gw: 2, gh: 1}} } // 2 rows of 2
	add := func(i int, v float32) MediaImage {
		img, err := st.add(hash(i), embd(v), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	a, b := add(1, 10), add(2, 20)
	if a.Chunks[0].Base != model.MediaToken || b.Chunks[0].Base != a.Chunks[0].Base+2 {
		t.Fatalf("placeholders %v %v", a, b)
	}
	if row, toEnd, ok := st.row(b.Chunks[0].Base + 1); !ok || fmt.Sprint(row) != "[21 21]" || toEnd != 0 {
		t.Errorf("row %v %d %v", row, toEnd, ok)
	}
	if _, toEnd, _ := st.row(a.Chunks[0].Base); toEnd != 1 {
		t.Errorf("first row of a: %d to its end", toEnd)
	}
	if c, ok := st.byHash(hash(1)); !ok || fmt.Sprint(c) != fmt.Sprint(a) {
		t.Errorf("by hash %v %v", c, ok)
	}
	for i := 3; i <= mediaKeep+1; i++ { // a was used last: b goes first
		add(i, float32(i))
	}
	if _, ok := st.byHash(hash(2)); ok {
		t.Error("b kept past the bound")
	}
	if _, _, ok := st.row(b.Chunks[0].Base); ok {
		t.Error("b's rows kept past the bound")
	}
	if _, ok := st.byHash(hash(1)); !ok || len(st.entries) != mediaKeep {
		t.Errorf("a dropped, or %d entries", len(st.entries))
	}
	again := add(2, 20)
	if again.Chunks[0].Base == b.Chunks[0].Base {
		t.Error("placeholders given twice")
	}
}

// A tiled image keeps its inputs and grid together: found whole, its parts' rows apart, and
// dropped whole (a part alone would be of no use).
func TestMediaStoreTiled(t *testing.T) {
	var st mediaStore
	// the overview, then two tiles of 2 and 1 rows
	tiles := []mediaPart{{embd: []float32{1, 1}, gw: 1, gh: 1}, {embd: []float32{2, 2, 3, 3}, gw: 1, gh: 2}, {embd: []float32{4, 4}, gw: 1, gh: 1}}
	img, err := st.add([32]byte{7}, tiles, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if img.Cols != 2 || img.Rows != 1 || len(img.Chunks) != 3 || img.Chunks[1].N != 2 || img.Chunks[2].Base != img.Chunks[1].Base+2 {
		t.Fatalf("image %+v", img)
	}
	if row, toEnd, ok := st.row(img.Chunks[1].Base); !ok || fmt.Sprint(row) != "[2 2]" || toEnd != 1 {
		t.Errorf("tile 1's first row %v, %d to its end, %v", row, toEnd, ok)
	}
	if got, ok := st.byHash([32]byte{7}); !ok || fmt.Sprint(got) != fmt.Sprint(img) {
		t.Errorf("by hash %+v %v", got, ok)
	}
	// encoding it again replaces it
	again, _ := st.add([32]byte{7}, tiles, 2, 1)
	if len(st.entries) != 3 || again.Chunks[0].Base == img.Chunks[0].Base {
		t.Errorf("%d entries after encoding again, %+v", len(st.entries), again)
	}
	for i := range mediaKeep {
		if _, err := st.add([32]byte{8, byte(i), byte(i >> 8)}, []mediaPart{{embd: []float32{0}, gw: 1, gh: 1}}, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range st.entries {
		if e.hash == [32]byte{7} {
			t.Fatalf("part %d of the tiled image kept after it was dropped", e.part)
		}
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
