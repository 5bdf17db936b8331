package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/model"
)

func poolEngine(nPages, nSlots int) *Engine {
	e := &Engine{pool: newPagePool(nPages)}
	for i := 0; i < nSlots; i++ {
		e.slots = append(e.slots, &slot{id: i})
	}
	return e
}

func fill(s *slot, n int) {
	for len(s.cached) < n {
		s.cached = append(s.cached, int32(len(s.cached)))
	}
}

// TestPageSharingAndCopyOnWrite follows the page counts through a shared prefix: adopting
// shares whole pages, the first write past a shared partial page copies it, and truncating
// frees what no one uses.
func TestPageSharingAndCopyOnWrite(t *testing.T) {
	e := poolEngine(8, 2)
	s0, s1 := e.slots[0], e.slots[1]
	var copies []model.RowCopy
	if got := e.reserve(s0, 40, &copies); got != 40 || len(s0.pages) != 3 || len(copies) != 0 {
		t.Fatalf("reserve 40: got %d, pages %v, copies %v", got, s0.pages, copies)
	}
	fill(s0, 40)
	e.adopt(s1, s0, 37)
	if !slices.Equal(s1.pages, s0.pages) || e.pool.used() != 3 {
		t.Fatalf("adopt: pages %v vs %v, used %d", s1.pages, s0.pages, e.pool.used())
	}
	shared := s0.pages[2]
	if got := e.reserve(s1, 38, &copies); got != 1 || s1.pages[2] == shared || e.pool.refs[shared] != 1 {
		t.Fatalf("copy-on-write: got %d, pages %v (shared page %d has %d users)", got, s1.pages, shared, e.pool.refs[shared])
	}
	want := []model.RowCopy{{Src: int(shared) << pageBits, Dst: int(s1.pages[2]) << pageBits, N: 37 - 32}}
	if !slices.Equal(copies, want) {
		t.Errorf("copies %v, want %v", copies, want)
	}
	if e.pool.refs[s0.pages[0]] != 2 || e.pool.used() != 4 {
		t.Errorf("after the copy: first page users %d, pages used %d", e.pool.refs[s0.pages[0]], e.pool.used())
	}
	e.truncate(s0, 0)
	e.truncate(s1, 0)
	if e.pool.used() != 0 || len(e.pool.free) != 8 {
		t.Errorf("after truncating both: %d pages used", e.pool.used())
	}
}

// TestPageEviction: when the pool is dry, the least recently used idle slot's cache goes,
// and a reservation that cannot be met returns how far it got.
func TestPageEviction(t *testing.T) {
	e := poolEngine(4, 3)
	a, b, c := e.slots[0], e.slots[1], e.slots[2]
	var copies []model.RowCopy
	e.reserve(a, 16, &copies)
	fill(a, 16)
	e.reserve(b, 32, &copies)
	fill(b, 32)
	a.lastUsed, b.lastUsed = time.Unix(2, 0), time.Unix(1, 0)
	c.gen = &generation{} // c is busy: a and b are idle
	if got := e.reserve(c, 32, &copies); got != 32 || len(b.pages) != 0 || len(a.pages) != 1 {
		t.Fatalf("reserve with eviction: got %d, idle pages a %v b %v", got, a.pages, b.pages)
	}
	fill(c, 32)
	if got := e.reserve(c, 80, &copies); got != 32 || len(a.pages) != 0 {
		t.Errorf("over-long reservation: got %d positions (want 32 more), a's pages %v", got, a.pages)
	}
}
