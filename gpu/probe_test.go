package gpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// probeCase is a batch of tokens of one or more sequences whose attention weights are probed:
// each token's position and sequence, the cache addressing and the attention options.
type probeCase struct {
	name                string
	nHead, nKV, headDim int
	positions, seq      []int32
	paged               bool
	softCap             float32
	window, allKeys     int
}

// TestAttentionProbe checks the probe against the reference for every head of the probed
// rows: grouped-query heads, heads of 4n + 2 dimensions, key counts that are no multiple of
// the workgroup, sequences in contiguous regions (after rows of no sequence) and in shuffled
// pages, a sliding window with soft-capping, all keys (non-causal), an f32 and an f16 cache.
// The output starts as noise, so the zeros before a window are the kernel's.
func TestAttentionProbe(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(41, 42))
	for _, c := range []probeCase{
		{name: "gqa", nHead: 6, nKV: 2, headDim: 10, positions: []int32{300, 301, 120}, seq: []int32{0, 0, 1}},
		{name: "paged", nHead: 4, nKV: 1, headDim: 64, positions: []int32{1000, 37}, seq: []int32{0, 1}, paged: true},
		{name: "window", nHead: 4, nKV: 2, headDim: 16, positions: []int32{700}, seq: []int32{0}, paged: true, softCap: 1.5, window: 100},
		{name: "all keys", nHead: 2, nKV: 2, headDim: 8, positions: []int32{3, 10}, seq: []int32{0, 0}, allKeys: 50},
		{name: "long", nHead: 8, nKV: 2, headDim: 128, positions: []int32{4999}, seq: []int32{0}, window: 4500},
	} {
		for _, f16 := range []bool{false, true} {
			checkProbe(t, d, rng, c, f16)
		}
	}
}

func checkProbe(t *testing.T, d *gpu.Device, rng *rand.Rand, c probeCase, f16 bool) {
	t.Helper()
	nt, kvRow := len(c.positions), c.nKV*c.headDim
	// Each sequence's length, and the pool row of its position j.
	var lens []int
	for i, s := range c.seq {
		for len(lens) <= int(s) {
			lens = append(lens, 0)
		}
		lens[s] = max(lens[s], int(c.positions[i])+1, c.allKeys)
	}
	var row func(s, j int) int
	var posWords []int32
	poolRows, pageBits := 0, 0
	if c.paged {
		pageBits = 4
		var pages []int
		for _, n := range lens {
			pages = append(pages, (n+15)>>4)
		}
		total := 3 // pages of no sequence
		for _, n := range pages {
			total += n
		}
		perm := rng.Perm(total)
		ps := shuffledPages(pageBits, perm, pages)
		row, posWords, poolRows = ps.row, ps.pos(c.seq, c.positions), total<<pageBits
	} else {
		bases := []int{3} // rows of no sequence first
		for _, n := range lens {
			bases = append(bases, bases[len(bases)-1]+n)
		}
		row = func(s, j int) int { return bases[s] + j }
		posWords = append([]int32(nil), c.positions...)
		for _, s := range c.seq {
			posWords = append(posWords, int32(bases[s]))
		}
		poolRows = bases[len(bases)-1]
	}
	pool := randVec(rng, poolRows*kvRow)
	kb := upload(t, d, pool)
	if f16 {
		pool = f16Round(pool)
		kb = uploadF16(t, d, pool)
	}
	qWidth := c.nHead * c.headDim
	qStride := qWidth + 5 // as the fused qkv rows carry k and v after q
	qRows := randVec(rng, nt*qStride)
	qb, posBuf := upload(t, d, qRows), uploadU32(t, d, posWords)
	maxKeys := 0
	for _, n := range lens {
		maxKeys = max(maxKeys, n)
	}
	ap := gpu.AttnParams{Scale: 0.3, SoftCap: c.softCap, Window: c.window, AllKeys: c.allKeys, PageBits: pageBits, MaxKeys: maxKeys}
	for i, s := range c.seq {
		var k []float32
		for j := 0; j < lens[s]; j++ {
			k = append(k, pool[row(int(s), j)*kvRow:(row(int(s), j)+1)*kvRow]...)
		}
		refPos := c.positions[i]
		if c.allKeys > 0 {
			refPos = int32(c.allKeys - 1)
		}
		keys := int(refPos) + 1
		for h := 0; h < c.nHead; h++ {
			name := fmt.Sprintf("probe %s f16=%v row %d head %d", c.name, f16, i, h)
			want := cpuref.AttentionWeights(qRows[i*qStride:i*qStride+qWidth], k, []int32{refPos}, 0, h, c.nHead, c.nKV, c.headDim, ap.Scale, c.softCap, c.window)
			out := upload(t, d, randVec(rng, keys))
			got := run(t, d, out, keys, func(r *gpu.Recorder) {
				r.AttentionProbe(qb, kb, posBuf, out, f16, qStride, nt, c.nHead, c.nKV, c.headDim, i, h, ap)
			})
			check(t, name, got, want, 1e-5)
			var sum float64
			for j, w := range got {
				sum += float64(w)
				if want[j] == 0 && w != 0 {
					t.Fatalf("%s: weight %g at %d, before the window", name, w, j)
				}
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Errorf("%s: weights sum to %.7f", name, sum)
			}
		}
	}
}

// shuffledPages lays out sequences with pages[s] pages each, taken in turn from perm (a shuffled
// pool of pages, some left to no sequence).
func shuffledPages(pageBits int, perm []int, pages []int) pagedSeqs {
	ps := pagedSeqs{pageBits: pageBits}
	at := 0
	for _, n := range pages {
		var tb []int32
		for _, p := range perm[at : at+n] {
			tb = append(tb, int32(p))
		}
		ps.tables, at = append(ps.tables, tb), at+n
	}
	ps.poolRows = len(perm) << pageBits
	return ps
}

// TestAttentionProbeErrors checks that a probe outside the batch and one whose loops would pass
// llvmpipe's limit on a CPU adapter are refused, not run.
func TestAttentionProbeErrors(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	buf := empty(t, d, 64)
	try := func(bf bool, row, head, maxKeys int, want string) {
		t.Helper()
		d.BarrierFree = bf
		r, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		r.AttentionProbe(buf, buf, buf, buf, false, 16, 2, 4, 2, 8, row, head, gpu.AttnParams{Scale: 1, MaxKeys: maxKeys})
		if err := r.Submit(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("row %d head %d over %d keys (barrier-free %v): error %v, want one saying %q", row, head, maxKeys, bf, err, want)
		}
	}
	try(false, 2, 0, 10, "row 2")
	try(false, 0, 4, 10, "head 4")
	try(true, 0, 0, 1<<22, "loop limit")
}

// TestReadAlso checks regions read back beside SubmitAndRead's in the same submit: each gets
// its own bytes (regions of one size, an odd size, one inside a buffer read twice), as does a
// lone region of a plain Submit.
func TestReadAlso(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(43, 44))
	a, b, c := randVec(rng, 100), randVec(rng, 37), randVec(rng, 100)
	ab, bb := upload(t, d, a), upload(t, d, b)
	r, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	r.Add(ab, upload(t, d, c), 100) // reads come after the dispatches
	for i := range a {
		a[i] += c[i]
	}
	same := r.ReadAlso(ab, 40*4, 10*4)
	odd := r.ReadAlso(bb, 4, 36*4)
	raw, err := r.SubmitAndRead(ab, 0, 10*4)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range gpu.Float32s(raw) {
		if v != a[i] {
			t.Fatalf("main read [%d] = %g, want %g", i, v, a[i])
		}
	}
	for i, v := range gpu.Float32s(same.Bytes()) {
		if v != a[40+i] {
			t.Fatalf("region of the main read's size [%d] = %g, want %g", i, v, a[40+i])
		}
	}
	if got := gpu.Float32s(odd.Bytes()); len(got) != 36 || got[0] != b[1] || got[35] != b[36] {
		t.Fatalf("odd region: %d values, ends %v", len(got), got[:min(len(got), 1)])
	}
	if r, err = d.Begin(); err != nil {
		t.Fatal(err)
	}
	lone := r.ReadAlso(bb, 0, 37*4)
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	check(t, "lone region", gpu.Float32s(lone.Bytes()), b, 0)
}
