package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// pagedSeqs is two sequences scattered over a pool of 8-row pages in no particular order,
// with the pos layout the kernels read for a batch of tokens at the given positions.
type pagedSeqs struct {
	pageBits int
	tables   [][]int32 // page numbers of each sequence, in position order
	poolRows int
}

const testPageBits = 3

var testPaged = pagedSeqs{pageBits: testPageBits, tables: [][]int32{{7, 2, 9, 0, 5}, {3, 11, 1}}, poolRows: 12 << testPageBits}

// row is the pool row of position j of sequence s.
func (ps pagedSeqs) row(s, j int) int {
	return int(ps.tables[s][j>>ps.pageBits])<<ps.pageBits | j&(1<<ps.pageBits-1)
}

// pos lays out positions, then each token's page-table offset, then the tables.
func (ps pagedSeqs) pos(seq, positions []int32) []int32 {
	n := len(positions)
	out := append([]int32(nil), positions...)
	offs := make([]int32, len(ps.tables))
	at := int32(2 * n)
	for s, tb := range ps.tables {
		offs[s] = at
		at += int32(len(tb))
	}
	for _, s := range seq {
		out = append(out, offs[s])
	}
	for _, tb := range ps.tables {
		out = append(out, tb...)
	}
	return out
}

// TestPagedAttention checks attention reading each sequence's keys through its page table:
// tokens of two sequences in one batch see only their own rows, wherever the pages lie.
func TestPagedAttention(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(31, 32))
	const nHead, nKV, headDim = 4, 2, 16
	ps := testPaged
	lens := []int{37, 20}
	seq := []int32{0, 0, 1}
	positions := []int32{35, 36, 19}
	kvRow := nKV * headDim
	for _, f16 := range []bool{false, true} {
		kPool, vPool := randVec(rng, ps.poolRows*kvRow), randVec(rng, ps.poolRows*kvRow)
		if f16 {
			kPool, vPool = f16Round(kPool), f16Round(vPool)
		}
		qStride := nHead * headDim
		q := randVec(rng, len(positions)*qStride)
		var want []float32
		for i, s := range seq {
			var k, v []float32
			for j := 0; j < lens[s]; j++ {
				r := ps.row(int(s), j)
				k = append(k, kPool[r*kvRow:(r+1)*kvRow]...)
				v = append(v, vPool[r*kvRow:(r+1)*kvRow]...)
			}
			want = append(want, cpuref.AttentionOpts(q[i*qStride:(i+1)*qStride], k, v, positions[i:i+1], nHead, nKV, headDim, 0.25, 0, 0)...)
		}
		kb, vb := upload(t, d, kPool), upload(t, d, vPool)
		if f16 {
			kb, vb = uploadF16(t, d, kPool), uploadF16(t, d, vPool)
		}
		posBuf := uploadU32(t, d, ps.pos(seq, positions))
		ap := gpu.AttnParams{Scale: 0.25, PageBits: ps.pageBits}
		tol := tolF32
		if f16 {
			tol = 2e-3 // the barrier-free kernel rounds its running output to f16
		}
		for _, bf := range []bool{false, true} {
			d.BarrierFree = bf
			out := empty(t, d, len(q))
			got := run(t, d, out, len(q), func(r *gpu.Recorder) {
				r.Attention(upload(t, d, q), kb, vb, posBuf, out, f16, qStride, len(positions), nHead, nKV, headDim, ap)
			})
			check(t, fmt.Sprintf("paged attention f16=%v barrier-free=%v", f16, bf), got, want, tol)
		}
		part := empty(t, d, gpu.AttentionSplitSize(len(positions), nHead, headDim, lens[0]))
		out := empty(t, d, len(q))
		got := run(t, d, out, len(q), func(r *gpu.Recorder) {
			r.AttentionSplit(upload(t, d, q), kb, vb, posBuf, part, out, f16, qStride, len(positions), nHead, nKV, headDim, lens[0], ap)
		})
		check(t, fmt.Sprintf("paged split attention f16=%v", f16), got, want, tolF32)
	}
}

// TestPagedRoPEKV checks that keys and values land in the pool rows the page tables name.
func TestPagedRoPEKV(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(33, 34))
	const nHead, nKV, headDim = 2, 1, 8
	const row = (nHead + 2*nKV) * headDim
	ps := testPaged
	seq := []int32{0, 1, 0}
	positions := []int32{9, 23, 36}
	qkv := randVec(rng, len(positions)*row)
	kc, vc := empty(t, d, ps.poolRows*nKV*headDim), empty(t, d, ps.poolRows*nKV*headDim)
	buf := upload(t, d, qkv)
	run(t, d, buf, len(qkv), func(r *gpu.Recorder) {
		r.RoPEKV(buf, uploadU32(t, d, ps.pos(seq, positions)), kc, vc, nil, false, len(positions), nHead, nKV, headDim,
			gpu.Rope{NRot: headDim, FreqBase: 10000, PageBits: ps.pageBits})
	})
	kAll := cacheFloats(t, d, kc, ps.poolRows*nKV*headDim, false)
	vAll := cacheFloats(t, d, vc, ps.poolRows*nKV*headDim, false)
	for i, s := range seq {
		k := append([]float32(nil), qkv[i*row+nHead*headDim:i*row+(nHead+nKV)*headDim]...)
		cpuref.RoPE(k, positions[i:i+1], nKV, headDim, headDim, 10000)
		v := qkv[i*row+(nHead+nKV)*headDim : (i+1)*row]
		r := ps.row(int(s), int(positions[i]))
		check(t, fmt.Sprintf("paged k of token %d", i), kAll[r*nKV*headDim:(r+1)*nKV*headDim], k, tolF32)
		check(t, fmt.Sprintf("paged v of token %d", i), vAll[r*nKV*headDim:(r+1)*nKV*headDim], v, tolF32)
	}
}

// TestShiftKV checks the cache move behind context shifts: after moving positions 12..31 of a
// sequence to 5..24, each moved key equals its unrotated key turned at the new position and
// each value is copied, with overlapping source and destination (three chunks), through both
// cache addressings, both pairings and both cache formats.
func TestShiftKV(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(35, 36))
	const nKV, headDim, n, src0, dst0, seqLen = 2, 16, 20, 12, 5, 37
	kvRow := nKV * headDim
	ps := testPaged
	for _, paged := range []bool{false, true} {
		for _, neox := range []bool{false, true} {
			for _, f16 := range []bool{false, true} {
				name := fmt.Sprintf("paged=%v neox=%v f16=%v", paged, neox, f16)
				rope := cpuref.RoPE
				if neox {
					rope = cpuref.RoPENeoX
				}
				raw := randVec(rng, seqLen*kvRow)
				rotated := append([]float32(nil), raw...)
				for j := 0; j < seqLen; j++ {
					rope(rotated[j*kvRow:(j+1)*kvRow], []int32{int32(j)}, nKV, headDim, headDim, 10000)
				}
				vals := randVec(rng, seqLen*kvRow)
				poolRows, row := seqLen+3, func(j int) int { return j + 3 } // contiguous: base 3
				posU32 := []int32{0, 3}
				if paged {
					poolRows, row = ps.poolRows, func(j int) int { return ps.row(0, j) }
					posU32 = append([]int32{0, 2}, ps.tables[0]...)
				}
				kPool, vPool := randVec(rng, poolRows*kvRow), randVec(rng, poolRows*kvRow)
				for j := 0; j < seqLen; j++ {
					copy(kPool[row(j)*kvRow:], rotated[j*kvRow:(j+1)*kvRow])
					copy(vPool[row(j)*kvRow:], vals[j*kvRow:(j+1)*kvRow])
				}
				up := func(v []float32) *gpu.Buffer {
					if f16 {
						return uploadF16(t, d, v)
					}
					return upload(t, d, v)
				}
				kb, vb := up(kPool), up(vPool)
				pageBits := 0
				if paged {
					pageBits = ps.pageBits
				}
				run(t, d, kb, 1, func(r *gpu.Recorder) {
					r.ShiftKV(uploadU32(t, d, posU32), kb, vb, f16, nKV, headDim, gpu.Rope{NRot: headDim, FreqBase: 10000, NeoX: neox, PageBits: pageBits}, src0, dst0, n)
				})
				kGot := cacheFloats(t, d, kb, poolRows*kvRow, f16)
				vGot := cacheFloats(t, d, vb, poolRows*kvRow, f16)
				tol := tolF32
				if f16 {
					tol = 2e-3
				}
				var gotK, wantK, gotV, wantV []float32
				for j := 0; j < seqLen; j++ {
					r := row(j)
					gotK = append(gotK, kGot[r*kvRow:(r+1)*kvRow]...)
					gotV = append(gotV, vGot[r*kvRow:(r+1)*kvRow]...)
					switch {
					case j >= dst0 && j < dst0+n: // moved here from j - dst0 + src0, turned
						k := append([]float32(nil), raw[(j-dst0+src0)*kvRow:(j-dst0+src0+1)*kvRow]...)
						rope(k, []int32{int32(j)}, nKV, headDim, headDim, 10000)
						wantK = append(wantK, k...)
						wantV = append(wantV, vals[(j-dst0+src0)*kvRow:(j-dst0+src0+1)*kvRow]...)
					default: // untouched
						wantK = append(wantK, rotated[j*kvRow:(j+1)*kvRow]...)
						wantV = append(wantV, vals[j*kvRow:(j+1)*kvRow]...)
					}
				}
				check(t, "shifted keys "+name, gotK, wantK, tol)
				check(t, "shifted values "+name, gotV, wantV, tol)
			}
		}
	}
}

// TestCopyWithin checks a copy inside one buffer between dispatches: the dispatch after it
// sees the copied words, and overlapping ranges are refused.
func TestCopyWithin(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(37, 38))
	a, b := randVec(rng, 200), randVec(rng, 200)
	buf, other := upload(t, d, a), upload(t, d, b)
	got := run(t, d, buf, 200, func(r *gpu.Recorder) {
		r.CopyWithin(buf, 100, 10, 70)
		r.Add(buf, other, 200) // after the copy
	})
	want := append([]float32(nil), a...)
	copy(want[10:80], a[100:170])
	for i := range want {
		want[i] += b[i]
	}
	check(t, "copy then add", got, want, tolF32)
	r, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	r.CopyWithin(buf, 10, 40, 50)
	if err := r.Submit(); err == nil {
		t.Error("an overlapping copy was accepted")
	}
}
