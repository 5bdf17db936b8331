package gpu_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// moeTypes are the weight types the MoE products are checked with: every type the dense
// kernels read (Q4_1 and Q5_1 with their Q8_1 block sums).
var moeTypes = []gpu.WeightType{gpu.F32, gpu.F16, gpu.BF16, gpu.Q8_0, gpu.Q4_0, gpu.Q4_1, gpu.Q5_0, gpu.Q5_1,
	gpu.Q2_K, gpu.Q3_K, gpu.Q4_K, gpu.Q5_K, gpu.Q6_K}

// moeVariant is a shape of the device's kernels: CPU adapters' barrier-free kernels (on a CPU
// adapter also with llama.cpp's arithmetic, CPUMath), or GPUs' (with subgroups, with
// half-precision tiles where the adapter has them).
type moeVariant struct {
	name                 string
	bf, sub, f16m, exact bool
}

func moeVariants(d *gpu.Device) []moeVariant {
	v := []moeVariant{{"cpu", true, false, false, false}, {"gpu", false, false, false, false}}
	if d.Info.Type == "cpu" {
		v = append(v, moeVariant{"cpu-exact", true, false, false, true})
	}
	if d.Features.Subgroups {
		v = append(v, moeVariant{"gpu-subgroups", false, true, false, false})
	}
	if d.Features.ShaderF16 {
		v = append(v, moeVariant{"gpu-f16", false, false, true, false})
	}
	return v
}

// useVariant sets the device's kernel shape, restored when the test ends.
func useVariant(t *testing.T, d *gpu.Device, v moeVariant) {
	bf, sub, f16m, rows, exact := d.BarrierFree, d.SubgroupMath, d.F16Math, d.RowsPerInvocation, d.CPUMath
	t.Cleanup(func() {
		d.BarrierFree, d.SubgroupMath, d.F16Math, d.RowsPerInvocation, d.CPUMath = bf, sub, f16m, rows, exact
	})
	d.BarrierFree, d.SubgroupMath, d.F16Math, d.RowsPerInvocation = v.bf, v.sub, v.f16m, 0
	d.SetCPUMath(v.exact)
}

// expertWeight quantizes experts random rows x cols matrices to typ, uploads them as one
// expert weight, and returns it with the values the reference dequantizer decodes and the
// GGUF bytes.
func expertWeight(t *testing.T, d *gpu.Device, rng *rand.Rand, typ gpu.WeightType, experts, rows, cols int) (gpu.Weight, []float32, []byte) {
	t.Helper()
	gt, ok := gguf.ParseGGMLType(typ.String())
	if !ok {
		t.Fatalf("no ggml type %s", typ)
	}
	w := randVec(rng, experts*rows*cols)
	var data []byte
	if gt.CanQuantize() {
		var err error
		if data, err = gguf.Quantize(gt, w); err != nil {
			t.Fatal(err)
		}
	} else { // the grid types: random blocks
		data = cpuref.RandomSuperBlocks(rng, gt, experts*rows*cols/int(gt.BlockSize()))
	}
	if err := gguf.Dequantize(gt, data, w); err != nil {
		t.Fatal(err)
	}
	gw, err := d.UploadExperts("experts", typ, experts, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Release)
	if gw.Experts != experts || gw.Rows != experts*rows {
		t.Fatalf("uploaded %d experts of %d rows, want %d of %d", gw.Experts, gw.Rows, experts, experts*rows)
	}
	return gw, w, data
}

// randomRoutes picks k distinct experts of n for each token.
func randomRoutes(rng *rand.Rand, tokens, k, n int) []int32 {
	var ids []int32
	for range tokens {
		for _, e := range rng.Perm(n)[:k] {
			ids = append(ids, int32(e))
		}
	}
	return ids
}

// idInputs draws a mul_mat_id test's routes (k distinct experts of experts for each of tokens
// tokens) and activations, cols wide: xRows rows, one a token, or one an assignment for the
// down product (down), so xPer assignments read each row.
func idInputs(rng *rand.Rand, tokens, k, experts, cols int, down bool) (ids []int32, x []float32, xRows, xPer int) {
	ids = randomRoutes(rng, tokens, k, experts)
	xRows, xPer = tokens, k
	if down {
		xRows, xPer = tokens*k, 1
	}
	return ids, randVec(rng, xRows*cols), xRows, xPer
}

// actRef rounds activations as QuantizeActivations does for weights of type typ.
func actRef(typ gpu.WeightType, x []float32) []float32 {
	switch gpu.ActFor(typ) {
	case gpu.ActQ8_0, gpu.ActQ8_1:
		return cpuref.ActQ8_0(x)
	case gpu.ActQ8_K:
		return cpuref.ActQ8_K(x)
	case gpu.ActF16:
		return cpuref.ActF16(x)
	case gpu.ActBF16:
		return cpuref.ActBF16(x)
	}
	return x
}

// blockMins are the minimums (the second f16 of each block) of Q4_1 or Q5_1 data.
func blockMins(typ gpu.WeightType, data []byte) []float32 {
	bb := 20
	if typ == gpu.Q5_1 {
		bb = 24
	}
	m := make([]float32, len(data)/bb)
	for b := range m {
		m[b] = gguf.F16ToF32(uint16(data[b*bb+2]) | uint16(data[b*bb+3])<<8)
	}
	return m
}

// matMulIDSums is cpuref.MatMulID for Q4_1 and Q5_1 weights multiplied with Q8_1 activations
// as the block-sum kernels do (ggml_vec_dot_q4_1_q8_1): each block minimum times the block's
// rounded sum, the rest with the rounded activations xq.
func matMulIDSums(w, mins []float32, rows, cols int, xq, sums []float32, xPer int, ids []int32) []float32 {
	nb := cols / 32
	y := make([]float32, len(ids)*rows)
	for a, e := range ids {
		xr := a / xPer
		for r := 0; r < rows; r++ {
			wr := (int(e)*rows + r) * cols
			var s float64
			for b := 0; b < nb; b++ {
				mb := mins[wr/32+b]
				for i := 0; i < 32; i++ {
					s += float64(w[wr+32*b+i]-mb) * float64(xq[xr*cols+32*b+i])
				}
				s += float64(mb) * float64(sums[xr*nb+b])
			}
			y[a*rows+r] = float32(s)
		}
	}
	return y
}

// TestMatMulID checks mul_mat_id against dequantize + cpuref for every kernel shape: decode
// (1 and 3 tokens: matvec per assignment on both families; 5 tokens on GPUs) and batches
// (5 tokens on CPU adapters, 9 and 70 everywhere: matmul_rows or the tiled kernel over the
// grouping plan), for the gate/up product (a token's row feeds its k experts) and the down
// product (a row per assignment, accumulated into a column range of wider rows), experts not
// a multiple of anything, rows and columns not multiples of the tiles, activations rounded as
// the dense path rounds them (packed on CPU adapters).
func TestMatMulID(t *testing.T) {
	d := gputest.Device(t)
	for _, v := range moeVariants(d) {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(61, 62))
			for _, typ := range moeTypes {
				cols := 96
				switch {
				case typ.BlockSize() == 256:
					cols = 512
				case typ.BlockSize() == 4:
					cols = 100 // a multiple of 4, not of the 16- or 32-wide steps
				}
				const rows = 70
				for _, c := range []struct{ experts, k int }{{7, 1}, {7, 2}, {33, 8}} {
					w, wv, raw := expertWeight(t, d, rng, typ, c.experts, rows, cols)
					for _, tokens := range []int{1, 3, 5, 9, 70} {
						for _, down := range []bool{false, true} {
							checkMatMulID(t, d, rng, v, typ, w, wv, raw, rows, cols, c.experts, c.k, tokens, down)
						}
					}
				}
			}
		})
	}
}

func checkMatMulID(t *testing.T, d *gpu.Device, rng *rand.Rand, v moeVariant, typ gpu.WeightType, w gpu.Weight, wv []float32, raw []byte,
	rows, cols, experts, k, tokens int, down bool) {
	t.Helper()
	n := tokens * k
	ids, x, xRows, xPer := idInputs(rng, tokens, k, experts, cols, down)
	// The down product accumulates into columns 3.. of rows of rows + 5 (a wider fused row).
	stride, col := rows, 0
	if down {
		stride, col = rows+5, 3
	}
	y0 := randVec(rng, n*stride)
	out := upload(t, d, y0)
	b := gpu.MoEBatch{IDs: uploadU32(t, d, ids), Plan: empty(t, d, gpu.MoEPlanSize(n, experts)), Tokens: tokens, K: k, Experts: experts}
	a := gpu.ActFor(typ)
	scale := float32(1)
	if down && tokens == 5 { // an adapter's term: scale times the products, added
		scale = 0.3
	}
	got := run(t, d, out, len(y0), func(r *gpu.Recorder) {
		r.MoEGroup(b)
		acts := gpu.Acts{X: upload(t, d, x)}
		if a != gpu.ActNone {
			acts = r.QuantizeActivations(a, acts.X, 0, xRows, cols, empty(t, d, xRows*cols), empty(t, d, xRows*cols/32))
		}
		if scale != 1 {
			r.MatMulIDScaledAdd(w, acts, b, down, out, stride, col, scale)
			return
		}
		r.MatMulID(w, acts, b, down, out, stride, col, down)
	})
	xq := actRef(typ, x)
	var ref []float32
	if a == gpu.ActQ8_1 && (v.bf || !d.MoEGrouped(tokens, k, experts)) { // GPUs' tiled kernel takes no block sums
		ref = matMulIDSums(wv, blockMins(typ, raw), rows, cols, xq, cpuref.ActQ8_1Sums(x), xPer, ids)
	} else {
		ref = cpuref.MatMulID(wv, rows, cols, xq, xPer, ids)
	}
	want := slices.Clone(y0)
	for i := 0; i < n; i++ {
		for r := 0; r < rows; r++ {
			o := i*stride + col + r
			if down {
				want[o] += float32(scale * ref[i*rows+r])
			} else {
				want[o] = ref[i*rows+r]
			}
		}
	}
	name := fmt.Sprintf("%s %s E=%d k=%d tokens=%d down=%v", v.name, typ, experts, k, tokens, down)
	laneRefs := map[gpu.WeightType]struct {
		bytes int
		ref   func([]byte, int, int, []float32, int) []float32
	}{gpu.Q8_0: {34, cpuref.MatMulQ8_0Lanes}, gpu.Q5_0: {22, cpuref.MatMulQ5_0Lanes},
		gpu.Q4_1: {20, cpuref.MatMulQ4_1Lanes}, gpu.Q5_1: {24, cpuref.MatMulQ5_1Lanes}, gpu.F32: {}}
	if lr, ok := laneRefs[typ]; ok && v.exact {
		// CPU adapters' products of these types are llama.cpp's own, bit for bit
		// (matvec_lanes.wgsl; mul_mat_id takes ggml_vec_dot_f32 for every token).
		exact := slices.Clone(y0)
		per, ref := rows*cols/32*lr.bytes, lr.ref
		for i := 0; i < n; i++ {
			e := int(ids[i])
			xr := x[i/xPer*cols : (i/xPer+1)*cols]
			var yr []float32
			if typ != gpu.F32 {
				yr = ref(raw[e*per:(e+1)*per], rows, cols, xr, 1)
			} else {
				yr = make([]float32, rows)
				for r := range yr {
					yr[r] = cpuref.DotF32VecDot(wv[(e*rows+r)*cols:(e*rows+r+1)*cols], xr)
				}
			}
			for r := 0; r < rows; r++ {
				if o := i*stride + col + r; down {
					exact[o] += float32(scale * yr[r])
				} else {
					exact[o] = yr[r]
				}
			}
		}
		checkBits(t, name+" (llama.cpp's order)", got, exact)
	}
	tol := tolFor(typ)
	if v.f16m && d.MoEGrouped(tokens, k, experts) {
		tol = tolF16
	}
	check(t, name, got, want, tol)
}

// TestMatMulIDPerExpert checks that mul_mat_id over the assignments gives what MatMulAt gives
// with each expert's own matrix over the rows routed to it.
func TestMatMulIDPerExpert(t *testing.T) {
	d := gputest.Device(t)
	for _, v := range moeVariants(d)[:2] {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(63, 64))
			const experts, k, rows = 7, 2, 45
			for _, typ := range []gpu.WeightType{gpu.F16, gpu.Q8_0, gpu.Q4_1, gpu.Q4_K} {
				cols := 96
				if typ.BlockSize() == 256 {
					cols = 256
				}
				w, _, raw := expertWeight(t, d, rng, typ, experts, rows, cols)
				expertBytes := len(raw) / experts
				for _, tokens := range []int{3, 9} {
					n := tokens * k
					ids := randomRoutes(rng, tokens, k, experts)
					xq := actRef(typ, randVec(rng, tokens*cols))
					var sums []float32
					var sumsBuf *gpu.Buffer
					if gpu.ActFor(typ) == gpu.ActQ8_1 {
						sums = cpuref.ActQ8_1Sums(xq) // the rounded values' sums are those of the rounding
						sumsBuf = upload(t, d, sums)
					}
					out := empty(t, d, n*rows)
					b := gpu.MoEBatch{IDs: uploadU32(t, d, ids), Plan: empty(t, d, gpu.MoEPlanSize(n, experts)), Tokens: tokens, K: k, Experts: experts}
					got := run(t, d, out, n*rows, func(r *gpu.Recorder) {
						r.MoEGroup(b)
						r.MatMulID(w, gpu.Acts{X: upload(t, d, xq), Sums: sumsBuf}, b, false, out, rows, 0, false)
					})
					want := make([]float32, n*rows)
					for e := 0; e < experts; e++ {
						var assigned []int
						var xe, se []float32
						for a, id := range ids {
							if int(id) == e {
								assigned = append(assigned, a)
								xe = append(xe, xq[a/k*cols:(a/k+1)*cols]...)
								if sums != nil {
									se = append(se, sums[a/k*cols/32:(a/k+1)*cols/32]...)
								}
							}
						}
						if len(assigned) == 0 {
							continue
						}
						we, err := d.UploadWeight("expert", typ, rows, cols, raw[e*expertBytes:(e+1)*expertBytes])
						if err != nil {
							t.Fatal(err)
						}
						acts := gpu.Acts{X: upload(t, d, xe)}
						if se != nil && (v.bf || !d.MoEGrouped(tokens, k, experts)) { // GPUs' tiled kernel takes no block sums
							acts.Sums = upload(t, d, se)
						}
						ye := empty(t, d, len(assigned)*rows)
						res := run(t, d, ye, len(assigned)*rows, func(r *gpu.Recorder) { r.MatMulAt(we, acts, len(assigned), ye, rows, 0, false) })
						we.Release()
						for i, a := range assigned {
							copy(want[a*rows:(a+1)*rows], res[i*rows:(i+1)*rows])
						}
					}
					check(t, fmt.Sprintf("%s %s tokens=%d", v.name, typ, tokens), got, want, 1e-6)
				}
			}
		})
	}
}

// TestMoEGroupPlan reads the grouping plan back: every assignment listed once under its
// expert, in ascending order, tiles of the device's width covering each expert's run.
func TestMoEGroupPlan(t *testing.T) {
	d := gputest.Device(t)
	for _, v := range moeVariants(d)[:2] {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(65, 66))
			for _, c := range []struct{ experts, k, tokens int }{{7, 2, 70}, {33, 8, 70}, {5, 1, 9}, {3, 2, 200},
				{128, 8, gpu.MoEMaxAssignments / 8}} { // the most one call takes: its loops within llvmpipe's budget
				n := c.tokens * c.k
				ids := randomRoutes(rng, c.tokens, c.k, c.experts)
				plan := empty(t, d, gpu.MoEPlanSize(n, c.experts))
				b := gpu.MoEBatch{IDs: uploadU32(t, d, ids), Plan: plan, Tokens: c.tokens, K: c.k, Experts: c.experts}
				r, err := d.Begin()
				if err != nil {
					t.Fatal(err)
				}
				r.MoEGroup(b)
				raw, err := r.SubmitAndRead(plan, 0, plan.Size())
				if err != nil {
					t.Fatal(err)
				}
				words := make([]uint32, len(raw)/4)
				for i := range words {
					words[i] = uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24
				}
				name := fmt.Sprintf("%s E=%d k=%d tokens=%d", v.name, c.experts, c.k, c.tokens)
				checkPlan(t, name, words, ids, c.experts)
			}
		})
	}
}

func checkPlan(t *testing.T, name string, plan []uint32, ids []int32, experts int) {
	t.Helper()
	n := len(ids)
	tiles, width := int(plan[0]), int(plan[1])
	if int(plan[2]) != n || int(plan[3]) != experts {
		t.Fatalf("%s: header %v", name, plan[:4])
	}
	tilesOff := 4 + experts
	listOff := len(plan) - n
	maxTiles := (listOff - tilesOff) / 4
	slotsOff := tilesOff + 3*maxTiles
	if tiles > maxTiles {
		t.Fatalf("%s: %d tiles overflow the table", name, tiles)
	}
	// Every tile in one slot of the grid's (the most tiles of this width), the rest empty.
	slots := (n+width-1)/width + min(experts, n)
	seen := make([]bool, tiles)
	for s := 0; s < slots; s++ {
		switch i := plan[slotsOff+s]; {
		case i == 0xFFFFFFFF:
		case int(i) >= tiles || seen[i]:
			t.Fatalf("%s: slot %d holds tile %d of %d (again?)", name, s, i, tiles)
		default:
			seen[i] = true
		}
	}
	if slices.Contains(seen, false) {
		t.Errorf("%s: tiles without a slot: %v", name, seen)
	}
	var want []uint32 // the assignments grouped by expert, ascending within each
	for e := 0; e < experts; e++ {
		c := 0
		for a, id := range ids {
			if int(id) == e {
				want = append(want, uint32(a))
				c++
			}
		}
		if int(plan[4+e]) != c {
			t.Errorf("%s: expert %d counted %d, want %d", name, e, plan[4+e], c)
		}
	}
	if !slices.Equal(plan[listOff:], want) {
		t.Errorf("%s: list %v, want %v", name, plan[listOff:], want)
	}
	covered := 0
	for i := 0; i < tiles; i++ {
		e, first, cnt := int(plan[tilesOff+3*i]), int(plan[tilesOff+3*i+1]), int(plan[tilesOff+3*i+2])
		if first != covered || cnt < 1 || cnt > width {
			t.Fatalf("%s: tile %d = (%d, %d, %d) after %d listed", name, i, e, first, cnt, covered)
		}
		for j := first; j < first+cnt; j++ {
			if int(ids[want[j]]) != e {
				t.Fatalf("%s: tile %d of expert %d holds assignment %d of expert %d", name, i, e, want[j], ids[want[j]])
			}
		}
		covered += cnt
	}
	if covered != n {
		t.Errorf("%s: tiles cover %d of %d assignments", name, covered, n)
	}
}

// TestMatMulIDSplit lowers the binding limit so the experts split over several chunks (whole
// experts each), and checks the products on both kernel families, decode and batch.
func TestMatMulIDSplit(t *testing.T) {
	d := gputest.Device(t)
	defer func(v uint64) { d.MaxBinding = v }(d.MaxBinding)
	const experts, rows, cols, k = 7, 20, 64, 2
	for _, v := range moeVariants(d)[:2] {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(67, 68))
			for _, typ := range []gpu.WeightType{gpu.F32, gpu.Q8_0} {
				d.MaxBinding = 3 * rows * cols * 4 // three f32 experts a chunk
				w, wv, raw := expertWeight(t, d, rng, typ, experts, rows, cols)
				d.MaxBinding = 1 << 30
				if typ == gpu.F32 && len(w.Chunks) != 3 {
					t.Fatalf("%d chunks, want 3", len(w.Chunks))
				}
				for _, c := range w.Chunks {
					if c.Row0%rows != 0 || c.Rows%rows != 0 {
						t.Fatalf("a chunk of rows %d..%d splits an expert", c.Row0, c.Row0+c.Rows)
					}
				}
				for _, tokens := range []int{2, 20} {
					checkMatMulID(t, d, rng, v, typ, w, wv, raw, rows, cols, experts, k, tokens, true)
				}
			}
			if _, err := d.UploadExperts("big", gpu.F32, 2, rows, cols, make([]byte, 2*rows*cols*4)); err != nil {
				t.Fatal(err)
			}
			d.MaxBinding = rows * cols * 2
			if _, err := d.UploadExperts("big", gpu.F32, 2, rows, cols, make([]byte, 2*rows*cols*4)); err == nil {
				t.Error("an expert larger than a binding: expected an error")
			}
			d.MaxBinding = 1 << 30
		})
	}
}

// TestUploadExpertsFused checks the fused gate|up layout: one product over the fused experts
// writes each assignment's gate row then its up row, as two products over gate and up do.
func TestUploadExpertsFused(t *testing.T) {
	d := gputest.Device(t)
	const experts, nff, cols, k, tokens = 5, 24, 64, 2, 6
	for _, v := range moeVariants(d)[:2] {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(69, 70))
			gate, _, graw := expertWeight(t, d, rng, gpu.Q8_0, experts, nff, cols)
			up, _, uraw := expertWeight(t, d, rng, gpu.Q8_0, experts, nff, cols)
			fused, err := d.UploadExpertsFused("gate_up", gpu.Q8_0, experts, []int{nff, nff}, cols, [][]byte{graw, uraw})
			if err != nil {
				t.Fatal(err)
			}
			defer fused.Release()
			if fused.Rows != experts*2*nff || fused.Experts != experts {
				t.Fatalf("fused: %d rows of %d experts", fused.Rows, fused.Experts)
			}
			n := tokens * k
			ids := randomRoutes(rng, tokens, k, experts)
			x := upload(t, d, cpuref.ActQ8_0(randVec(rng, tokens*cols)))
			b := gpu.MoEBatch{IDs: uploadU32(t, d, ids), Plan: empty(t, d, gpu.MoEPlanSize(n, experts)), Tokens: tokens, K: k, Experts: experts}
			var res [2][]float32
			for i, split := range []bool{false, true} {
				out := empty(t, d, n*2*nff)
				res[i] = run(t, d, out, n*2*nff, func(r *gpu.Recorder) {
					r.MoEGroup(b)
					if split {
						r.MatMulID(gate, gpu.Acts{X: x}, b, false, out, 2*nff, 0, false)
						r.MatMulID(up, gpu.Acts{X: x}, b, false, out, 2*nff, nff, false)
					} else {
						r.MatMulID(fused, gpu.Acts{X: x}, b, false, out, 2*nff, 0, false)
					}
				})
			}
			check(t, v.name+" fused gate|up", res[0], res[1], 1e-6)
		})
	}
}

// routeCase is one routing check: logits of tokens rows, the gating and options.
type routeCase struct {
	name    string
	experts int
	k       int
	gating  int
	bias    bool
	// logitBias adds a router bias to the logits first (gpu.MoERouting.LogitBias)
	logitBias bool
	norm      bool
	scale     float32
	logits    func(rng *rand.Rand, n int) []float32 // nil: random normal
}

// TestMoERoute checks each gating function, the selection bias, normalisation (and its clamp)
// and scaling against cpuref: the chosen experts exactly, in order, and their weights.
func TestMoERoute(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(71, 72))
	var cases []routeCase
	for _, g := range []int{cpuref.GateSoftmax, cpuref.GateSigmoid, cpuref.GateSoftmaxWeight, cpuref.GateSqrtSoftplus} {
		for _, c := range []struct{ experts, k int }{{7, 1}, {7, 2}, {33, 8}, {128, 8}, {512, 32}} {
			cases = append(cases, routeCase{name: "plain", experts: c.experts, k: c.k, gating: g, scale: 1})
		}
		cases = append(cases,
			routeCase{name: "norm", experts: 33, k: 8, gating: g, norm: true, scale: 1},
			routeCase{name: "bias", experts: 33, k: 4, gating: g, bias: true, scale: 1},
			routeCase{name: "bias-norm-scale", experts: 60, k: 6, gating: g, bias: true, norm: true, scale: 2.5},
			routeCase{name: "logit-bias", experts: 33, k: 4, gating: g, logitBias: true, scale: 1},
			routeCase{name: "both-biases", experts: 60, k: 6, gating: g, bias: true, logitBias: true, norm: true, scale: 2.5})
	}
	// Ties go to the lower expert: whole rows of one value, and repeated values among the best.
	ties := func(rng *rand.Rand, n int) []float32 {
		x := make([]float32, 0, n)
		for len(x) < n {
			switch len(x) / 16 % 3 {
			case 0:
				x = append(x, 0.5)
			default:
				x = append(x, float32(rng.IntN(4))-1.5)
			}
		}
		return x
	}
	for _, g := range []int{cpuref.GateSoftmax, cpuref.GateSigmoid, cpuref.GateSoftmaxWeight} {
		cases = append(cases, routeCase{name: "ties", experts: 16, k: 5, gating: g, scale: 1, logits: ties},
			routeCase{name: "ties-bias", experts: 16, k: 3, gating: g, bias: true, norm: true, scale: 1, logits: ties})
	}
	// The clamp: sigmoid probabilities of very negative logits sum below 2^-14.
	cases = append(cases, routeCase{name: "clamp", experts: 9, k: 3, gating: cpuref.GateSigmoid, norm: true, scale: 1,
		logits: func(rng *rand.Rand, n int) []float32 {
			x := randVec(rng, n)
			for i := range x {
				x[i] = x[i]*0.5 - 14
			}
			return x
		}})
	const tokens = 6
	for _, c := range cases {
		var logits []float32
		if c.logits != nil {
			logits = c.logits(rng, tokens*c.experts)
		} else {
			logits = randVec(rng, tokens*c.experts)
		}
		var bias []float32
		var biasBuf *gpu.Buffer
		if c.bias {
			bias = randVec(rng, c.experts)
			if c.logits != nil { // ties in the biased values too
				for i := range bias {
					bias[i] = float32(i%2) * 0.25
				}
			}
			biasBuf = upload(t, d, bias)
		}
		n := tokens * c.k
		opts := gpu.MoERouting{Gating: gpu.MoEGating(c.gating), Bias: biasBuf, Norm: c.norm, Scale: c.scale}
		biased := logits // what the routing sees
		if c.logitBias {
			lbias := randVec(rng, c.experts)
			opts.LogitBias = upload(t, d, lbias)
			biased = slices.Clone(logits)
			for i := range biased {
				biased[i] += lbias[i%c.experts]
			}
		}
		route := func(logits []float32, opts gpu.MoERouting) ([]float32, []byte) {
			idsBuf, wBuf := empty(t, d, n), empty(t, d, n)
			w := run(t, d, wBuf, n, func(r *gpu.Recorder) { r.MoERoute(upload(t, d, logits), tokens, c.experts, c.k, opts, idsBuf, wBuf) })
			raw, err := d.Read(idsBuf, 0, uint64(n*4))
			if err != nil {
				t.Fatal(err)
			}
			return w, raw
		}
		gotW, raw := route(logits, opts)
		wantIDs, wantW := cpuref.MoERoute(biased, c.experts, c.k, c.gating, bias, c.norm, c.scale)
		name := fmt.Sprintf("%s gating=%d E=%d k=%d", c.name, c.gating, c.experts, c.k)
		if c.logitBias { // bit for bit the routing of the logits biased beforehand (BiasAct's sums)
			plain := opts
			plain.LogitBias = nil
			if w, ids := route(biased, plain); !slices.Equal(w, gotW) || !bytes.Equal(ids, raw) {
				t.Errorf("%s: the router's bias added in the routing gives other weights or experts than added before it", name)
			}
		}
		for i := 0; i < n; i++ {
			got := int32(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
			if got != wantIDs[i] {
				t.Errorf("%s: slot %d of token %d: expert %d, want %d (want %v)", name, i%c.k, i/c.k, got, wantIDs[i], wantIDs[i/c.k*c.k:(i/c.k+1)*c.k])
				break
			}
		}
		check(t, name+" weights", gotW, wantW, 1e-5)
		if c.name == "clamp" {
			var sum float32
			for _, v := range wantW[:c.k] {
				sum += v
			}
			if sum > 0.5 {
				t.Errorf("clamp case: weights sum to %g; the clamp did not apply", sum)
			}
		}
	}
}

// TestGLUOAI checks swiglu_oai over fused gate|up rows, values within and beyond the clamps.
func TestGLUOAI(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(73, 74))
	const n, rows = 70, 9
	gu := randVec(rng, rows*2*n)
	for i := range gu {
		gu[i] *= 6 // many past +-7
	}
	out := empty(t, d, rows*n)
	got := run(t, d, out, rows*n, func(r *gpu.Recorder) { r.GLUOAI(upload(t, d, gu), out, n, rows, 1.702, 7) })
	var want []float32
	for r := 0; r < rows; r++ {
		want = append(want, cpuref.SwiGLUOAI(gu[r*2*n:r*2*n+n], gu[r*2*n+n:(r+1)*2*n], 1.702, 7)...)
	}
	check(t, "swiglu_oai", got, want, 1e-5)
}

// TestAddID checks the per-expert bias added into a column range of the assignments' rows.
func TestAddID(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(75, 76))
	const experts, n, width, stride, col = 33, 23, 70, 75, 4
	ids := randomRoutes(rng, n, 1, experts)
	bias, y := randVec(rng, experts*width), randVec(rng, n*stride)
	buf := upload(t, d, y)
	got := run(t, d, buf, len(y), func(r *gpu.Recorder) { r.AddID(buf, upload(t, d, bias), uploadU32(t, d, ids), n, width, stride, col) })
	cpuref.AddID(y, stride, col, bias, width, ids)
	check(t, "add_id", got, y, 1e-7)
}

// TestMoECombine checks the weighted sum of each token's expert outputs, set and added to the
// residual, in llama.cpp's f32 order.
func TestMoECombine(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(77, 78))
	for _, k := range []int{1, 2, 8} {
		const tokens, width = 5, 70
		y, w := randVec(rng, tokens*k*width), randVec(rng, tokens*k)
		for _, acc := range []bool{false, true} {
			res := randVec(rng, tokens*width)
			out := upload(t, d, res)
			got := run(t, d, out, len(res), func(r *gpu.Recorder) { r.MoECombine(upload(t, d, y), upload(t, d, w), tokens, k, width, out, acc) })
			want := cpuref.MoECombine(y, w, tokens, k, width)
			if acc {
				want = cpuref.Add(want, res)
			}
			check(t, fmt.Sprintf("combine k=%d accumulate=%v", k, acc), got, want, 1e-6)
		}
	}
}

// TestMoEErrors checks that misuse fails at submit rather than computing garbage.
func TestMoEErrors(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(79, 80))
	dense, _ := weight(t, d, rng, gpu.F32, 8, 16)
	buf := empty(t, d, 1024)
	for name, fn := range map[string]func(r *gpu.Recorder){
		"dense weight": func(r *gpu.Recorder) {
			r.MatMulID(dense, gpu.Acts{X: buf}, gpu.MoEBatch{IDs: buf, Plan: buf, Tokens: 1, K: 1, Experts: 2}, false, buf, 8, 0, false)
		},
		"too many experts": func(r *gpu.Recorder) { r.MoERoute(buf, 1, 600, 2, gpu.MoERouting{}, buf, buf) },
		"k over experts":   func(r *gpu.Recorder) { r.MoERoute(buf, 1, 4, 5, gpu.MoERouting{}, buf, buf) },
		"gating":           func(r *gpu.Recorder) { r.MoERoute(buf, 1, 8, 2, gpu.MoERouting{Gating: 9}, buf, buf) },
		"small plan": func(r *gpu.Recorder) {
			r.MoEGroup(gpu.MoEBatch{IDs: buf, Plan: empty(t, d, 4), Tokens: 100, K: 2, Experts: 8})
		},
	} {
		r, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		fn(r)
		if err := r.Submit(); err == nil {
			t.Errorf("%s: expected an error", name)
		}
	}
}

// TestMoEFFN runs a whole expert block as a model records it, the plan serving both products:
// route, group, the fused gate|up product, the gated activation (SiLU, or swiglu_oai with
// per-expert biases), the rounded activations' down product and the weighted sum added to the
// residual, against cpuref step by step.
func TestMoEFFN(t *testing.T) {
	d := gputest.Device(t)
	const experts, k, nEmbd, nff = 9, 3, 96, 256
	for _, v := range moeVariants(d)[:2] {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(81, 82))
			gu, guv, _ := expertWeight(t, d, rng, gpu.Q8_0, experts, 2*nff, nEmbd)
			down, downv, _ := expertWeight(t, d, rng, gpu.Q4_K, experts, nEmbd, nff)
			bias := randVec(rng, experts*2*nff)
			for _, oai := range []bool{false, true} {
				for _, tokens := range []int{2, 9} {
					n := tokens * k
					x, logits, res := randVec(rng, tokens*nEmbd), randVec(rng, tokens*experts), randVec(rng, tokens*nEmbd)
					for i := range x {
						x[i] *= 0.15 // gate and up of about 1.5, the outputs of about the residual's 10
					}
					for i := range res {
						res[i] *= 10
					}
					gating := cpuref.GateSoftmax
					if oai {
						gating = cpuref.GateSoftmaxWeight
					}
					ids, w := empty(t, d, n), empty(t, d, n)
					b := gpu.MoEBatch{IDs: ids, Plan: empty(t, d, gpu.MoEPlanSize(n, experts)), Tokens: tokens, K: k, Experts: experts}
					out := upload(t, d, res)
					got := run(t, d, out, len(res), func(r *gpu.Recorder) {
						r.MoERoute(upload(t, d, logits), tokens, experts, k, gpu.MoERouting{Gating: gpu.MoEGating(gating), Norm: !oai}, ids, w)
						r.MoEGroup(b)
						xq := r.QuantizeActivations(gpu.ActQ8_0, upload(t, d, x), 0, tokens, nEmbd, empty(t, d, tokens*nEmbd), nil)
						g := empty(t, d, n*2*nff)
						r.MatMulID(gu, xq, b, false, g, 2*nff, 0, false)
						act := empty(t, d, n*nff)
						if oai {
							r.AddID(g, upload(t, d, bias), ids, n, 2*nff, 2*nff, 0)
							r.GLUOAI(g, act, nff, n, 1.702, 7)
						} else {
							r.GLU(g, act, nff, n, false)
						}
						aq := r.QuantizeActivations(gpu.ActQ8_K, act, 0, n, nff, empty(t, d, n*nff), nil)
						y := empty(t, d, n*nEmbd)
						r.MatMulID(down, aq, b, true, y, nEmbd, 0, false)
						r.MoECombine(y, w, tokens, k, nEmbd, out, true)
					})
					wantIDs, wantW := cpuref.MoERoute(logits, experts, k, gating, nil, !oai, 1)
					g := cpuref.MatMulID(guv, 2*nff, nEmbd, cpuref.ActQ8_0(x), k, wantIDs)
					if oai {
						cpuref.AddID(g, 2*nff, 0, bias, 2*nff, wantIDs)
					}
					var act []float32
					for a := 0; a < n; a++ {
						gate, up := g[a*2*nff:a*2*nff+nff], g[a*2*nff+nff:(a+1)*2*nff]
						if oai {
							act = append(act, cpuref.SwiGLUOAI(gate, up, 1.702, 7)...)
						} else {
							act = append(act, cpuref.SiLUMul(gate, up)...)
						}
					}
					y := cpuref.MatMulID(downv, nEmbd, nff, cpuref.ActQ8_K(act), 1, wantIDs)
					want := cpuref.Add(cpuref.MoECombine(y, wantW, tokens, k, nEmbd), res)
					// A rounding of the activations may land on the other side of a step.
					check(t, fmt.Sprintf("%s oai=%v tokens=%d", v.name, oai, tokens), got, want, 1e-4)
				}
			}
		})
	}
}
