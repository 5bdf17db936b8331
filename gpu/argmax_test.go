package gpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// TestArgmax checks the greedy pick and its probability against the reference on random
// logits, for the cooperative and barrier-free kernels, rows shorter and longer than a
// workgroup, a tie (the first maximum wins) and results written at an offset.
func TestArgmax(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	for _, bf := range []bool{false, true} {
		d.BarrierFree = bf
		t.Run(fmt.Sprintf("barrier-free=%v", bf), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			for _, shape := range [][2]int{{512, 3}, {37, 2}, {32000, 4}, {40000, 2}} {
				n, rows := shape[0], shape[1]
				x := randVec(rng, n*rows)
				for i := range x {
					x[i] *= 3 // peakier rows, so probabilities are not all tiny
				}
				// Row 1 repeats its maximum later in the row: the earlier index must win.
				_, first := maxOf(x[n : 2*n])
				x[n+n-1] = x[n+first]
				const out0 = 5
				out := empty(t, d, 2*(out0+rows))
				pout := out0 + rows
				r, err := d.Begin()
				if err != nil {
					t.Fatal(err)
				}
				r.Argmax(upload(t, d, x), out, n, rows, out0, pout, nil)
				raw, err := r.SubmitAndRead(out, 0, uint64(2*(out0+rows)*4))
				if err != nil {
					t.Fatal(err)
				}
				words := gpu.Float32s(raw)
				wantIDs, wantP := cpuref.Argmax(x, n)
				for row := range rows {
					id := int32(math.Float32bits(words[out0+row]))
					prob := words[pout+out0+row]
					if id != wantIDs[row] {
						t.Errorf("%dx%d row %d: id %d, want %d", rows, n, row, id, wantIDs[row])
					}
					if math.Abs(float64(prob-wantP[row])) > 1e-5*max(1, float64(wantP[row])) {
						t.Errorf("%dx%d row %d: probability %g, want %g", rows, n, row, prob, wantP[row])
					}
				}
				if wantIDs[1] != int32(first) {
					t.Fatalf("reference picked %d on the tie, want %d", wantIDs[1], first)
				}
			}
		})
	}
}

// TestArgmaxFeed checks that a FEED argmax writes each row's pick as the next pass's token
// and the planned positions and bases, and with MPos an M-RoPE model's text positions.
func TestArgmaxFeed(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	for _, bf := range []bool{false, true} {
		d.BarrierFree = bf
		rng := rand.New(rand.NewPCG(9, 10))
		const n, rows, step = 300, 3, 4
		x := randVec(rng, n*rows)
		ids, pos, mpos := empty(t, d, rows), empty(t, d, 2*rows), upload(t, d, randVec(rng, 4*rows))
		plan := uploadU32(t, d, []int32{10, 20, 30, 0, 512, 1024})
		out := empty(t, d, 2*rows)
		r, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		r.Argmax(upload(t, d, x), out, n, rows, 0, rows, &gpu.ArgmaxFeed{IDs: ids, Pos: pos, Plan: plan, Step: step, MPos: mpos})
		if err := r.Submit(); err != nil {
			t.Fatal(err)
		}
		gotIDs, gotPos := readU32(t, d, ids, rows), readU32(t, d, pos, 2*rows)
		wantIDs, _ := cpuref.Argmax(x, n)
		for row := range rows {
			if gotIDs[row] != wantIDs[row] {
				t.Errorf("barrier-free=%v row %d: fed id %d, want %d", bf, row, gotIDs[row], wantIDs[row])
			}
		}
		if want := []int32{14, 24, 34, 0, 512, 1024}; fmt.Sprint(gotPos) != fmt.Sprint(want) {
			t.Errorf("barrier-free=%v: positions %v, want %v", bf, gotPos, want)
		}
		if got, want := readU32(t, d, mpos, 4*rows), []int32{14, 14, 14, 0, 24, 24, 24, 0, 34, 34, 34, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("barrier-free=%v: M-RoPE positions %v, want %v", bf, got, want)
		}
	}
}

func maxOf(v []float32) (float32, int) {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return v[best], best
}

func readU32(t *testing.T, d *gpu.Device, b *gpu.Buffer, n int) []int32 {
	t.Helper()
	raw, err := d.Read(b, 0, uint64(n*4))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int32, n)
	for i, f := range gpu.Float32s(raw) {
		out[i] = int32(math.Float32bits(f))
	}
	return out
}
