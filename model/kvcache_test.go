package model_test

import (
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// forwardAlone runs tokens from position 0 in a cache of their own (at least 64 rows) and
// returns the last token's logits.
func forwardAlone(t *testing.T, m *model.Model, tokens []int32) []float32 {
	t.Helper()
	kv, err := m.NewKVCache(max(64, len(tokens)))
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	logits, err := m.Forward(kv, tokens, 0)
	if err != nil {
		t.Fatal(err)
	}
	return logits
}

// TestPagedBatchSharesPages runs three sequences through a pool of 4-row pages: the second
// shares the first's first page (its prompt prefix), the third copies three rows of that page
// into a page of its own in the batch that then extends it (copy-on-write), and every
// sequence's logits equal those of the sequence run alone.
func TestPagedBatchSharesPages(t *testing.T) {
	m := loadOpts(t, model.Options{MaxBatch: 64, MaxOutputs: 4}, "models", "stories260K.gguf")
	seqs := [][]int32{
		{1, 403, 407, 261, 378, 432},
		{1, 403, 407, 261, 300, 301, 302, 303, 304},
		{1, 403, 407, 305, 306},
	}
	const bits = 2
	tables := [][]int32{{5, 2}, {5, 7, 0}, {3, 6}}
	var pages []int32
	var offs []int32
	for _, tb := range tables {
		offs = append(offs, int32(len(pages)))
		pages = append(pages, tb...)
	}
	kv, err := m.NewKVCache(8 << bits)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	add := func(b *model.Batch, s, from, to int, logits bool) {
		for p := from; p < to; p++ {
			b.Tokens = append(b.Tokens, seqs[s][p])
			b.Pos = append(b.Pos, int32(p))
			b.Base = append(b.Base, offs[s])
		}
		if logits {
			b.Logits = append(b.Logits, len(b.Tokens)-1)
		}
	}
	b1 := model.Batch{PageBits: bits, Pages: pages}
	add(&b1, 0, 0, 5, false)
	add(&b1, 1, 4, 8, false) // positions 0-3 are the shared page, written by sequence 0
	if _, err := m.ForwardBatch(kv, b1); err != nil {
		t.Fatal(err)
	}
	b2 := model.Batch{PageBits: bits, Pages: pages, Copies: []model.RowCopy{{Src: 5 << bits, Dst: 3 << bits, N: 3}}}
	add(&b2, 0, 5, 6, true)
	add(&b2, 1, 8, 9, true)
	add(&b2, 2, 3, 5, true)
	got, err := m.ForwardBatch(kv, b2)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		want := forwardAlone(t, m, s)
		if e := cpuref.RelErr(got[i], want); e > pathTol(m, 1e-4) {
			t.Errorf("sequence %d: paged vs alone logits: relative error %.3g", i, e)
		}
	}
	bad := model.Batch{Tokens: []int32{1}, Pos: []int32{8}, Base: []int32{0}, PageBits: bits, Pages: []int32{1, 2}}
	if _, err := m.ForwardBatch(kv, bad); err == nil {
		t.Error("a position past the end of its page table was accepted")
	}
	bad = model.Batch{Tokens: []int32{1}, Pos: []int32{0}, Base: []int32{0}, PageBits: bits, Pages: []int32{8}}
	if _, err := m.ForwardBatch(kv, bad); err == nil {
		t.Error("a page outside the cache was accepted")
	}
}
