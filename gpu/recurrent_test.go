package gpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// tolRecurrent bounds ||gpu - ref|| / ||ref|| for the recurrent kernels: f32 arithmetic in the
// op's order, the references' dots summed in float64 (the largest error measured on lavapipe
// is 2.7e-7, the delta rule's outputs; ssm_conv's are exact without SiLU, 3e-8 with it).
const tolRecurrent = 1e-6

// recurrentVariants are the kernel shapes the recurrent operations take: CPU adapters'
// barrier-free kernels and GPUs' cooperative ones (with subgroups where the adapter has them).
func recurrentVariants(d *gpu.Device) []moeVariant {
	return slices.DeleteFunc(moeVariants(d), func(v moeVariant) bool { return v.f16m })
}

// layoutSeqs lays sequences of the given lengths out in a batch, the last sequence's rows
// first (so a sequence's first row is not its index's), each in the given slot.
func layoutSeqs(lengths, slots []int) []cpuref.Seq {
	seqs := make([]cpuref.Seq, len(lengths))
	row := 0
	for i := len(lengths) - 1; i >= 0; i-- {
		seqs[i] = cpuref.Seq{First: row, Tokens: lengths[i], Slot: slots[i]}
		row += lengths[i]
	}
	return seqs
}

// batchRows is the rows a layout's sequences take.
func batchRows(seqs []cpuref.Seq) int {
	n := 0
	for _, s := range seqs {
		n = max(n, s.First+s.Tokens)
	}
	return n
}

// recurrentBatch uploads a layout's sequences for the kernels.
func recurrentBatch(t testing.TB, d *gpu.Device, seqs []cpuref.Seq) gpu.RecurrentBatch {
	t.Helper()
	g := make([]gpu.RecurrentSeq, len(seqs))
	for i, s := range seqs {
		g[i] = gpu.RecurrentSeq{First: s.First, Tokens: s.Tokens, Slot: s.Slot}
	}
	buf, err := d.Upload("seqs", gpu.PackRecurrentSeqs(g))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Release)
	return gpu.RecurrentBatch{Buf: buf, Seqs: g}
}

// readFloats reads n floats of b.
func readFloats(t *testing.T, d *gpu.Device, b *gpu.Buffer, n int) []float32 {
	t.Helper()
	raw, err := d.Read(b, 0, uint64(n*4))
	if err != nil {
		t.Fatal(err)
	}
	return gpu.Float32s(raw)
}

// submit records fn into one pass and runs it.
func submit(t *testing.T, d *gpu.Device, fn func(r *gpu.Recorder)) {
	t.Helper()
	r, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	fn(r)
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
}

// checkRec compares with check's measure and logs the error found.
func checkRec(t *testing.T, name string, got, want []float32) {
	t.Helper()
	t.Logf("%s: relative error %.2g", name, cpuref.RelErr(got, want))
	check(t, name, got, want, tolRecurrent)
}

// sliceRows is rows of x (width floats each) picked by a layout's sequences: sequence s's
// tokens from..to-1 (of its whole run, rows laid out by full), placed as the layout part puts
// them.
func sliceRows(x []float32, width int, full, part []cpuref.Seq, from []int) []float32 {
	out := make([]float32, batchRows(part)*width)
	for i, s := range part {
		src := (full[i].First + from[i]) * width
		copy(out[s.First*width:(s.First+s.Tokens)*width], x[src:src+s.Tokens*width])
	}
	return out
}

// TestSSMConv checks ssm_conv against cpuref: sequences of 1, 3, 17, 2 and no tokens in one
// batch (rows not in sequence order, slots not either), channels fewer than a workgroup and
// more, inputs in a column range of wider rows, d_conv 4 (with and without SiLU), 2 and 9
// (the widest: its state rows fill a block), every output row and the whole state buffer
// (the unused slots and the empty sequence's left alone). Without SiLU the outputs are the
// reference's bit for bit: ggml sums rounded products (the shared CPU build's qwen35 layers
// agree), where fused multiply-adds gave a third of a prompt's conv outputs an ulp apart.
func TestSSMConv(t *testing.T) {
	d := gputest.Device(t)
	for _, v := range recurrentVariants(d) {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(71, 72))
			for _, c := range []struct {
				channels, dConv int
				silu            bool
			}{{37, 4, true}, {37, 4, false}, {100, 4, true}, {37, 2, true}, {70, 9, false}} {
				seqs := layoutSeqs([]int{1, 3, 17, 2, 0}, []int{4, 0, 2, 5, 1})
				const slots = 6
				rows, stride, col := batchRows(seqs), c.channels+5, 3
				x := randVec(rng, rows*stride)
				w := randVec(rng, c.channels*c.dConv)
				st := randVec(rng, slots*gpu.SSMConvStateSize(c.channels, c.dConv))
				stBuf, out := upload(t, d, st), empty(t, d, rows*c.channels)
				sh := gpu.SSMConvShape{Channels: c.channels, DConv: c.dConv, XStride: stride, XCol: col, SiLU: c.silu}
				b := recurrentBatch(t, d, seqs)
				submit(t, d, func(r *gpu.Recorder) { r.SSMConv(upload(t, d, x), upload(t, d, w), stBuf, out, sh, b) })
				wantSt := slices.Clone(st)
				want := cpuref.SSMConv(x, stride, col, w, wantSt, c.channels, c.dConv, seqs, c.silu)
				name := fmt.Sprintf("%s channels=%d d_conv=%d silu=%v", v.name, c.channels, c.dConv, c.silu)
				got := readFloats(t, d, out, len(want))
				checkRec(t, name+" out", got, want)
				checkRec(t, name+" state", readFloats(t, d, stBuf, len(wantSt)), wantSt)
				if !c.silu { // each product rounded, then summed in order: the reference's floats
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s: out[%d] = %g, ggml's order gives %g", name, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

// TestSSMConvCarry checks that states carry across calls: a prompt call (5, 17 and 1 tokens)
// then two decode calls of a token per sequence, recorded in one pass, give what one call over
// the whole sequences gives.
func TestSSMConvCarry(t *testing.T) {
	d := gputest.Device(t)
	for _, v := range recurrentVariants(d) {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(73, 74))
			const channels, dConv = 45, 4
			lengths, slots := []int{5, 17, 1}, []int{2, 0, 1}
			full := layoutSeqs([]int{7, 19, 3}, slots)
			x := randVec(rng, batchRows(full)*channels)
			w := randVec(rng, channels*dConv)
			st := randVec(rng, 3*gpu.SSMConvStateSize(channels, dConv))
			stBuf := upload(t, d, st)
			sh := gpu.SSMConvShape{Channels: channels, DConv: dConv, XStride: channels, SiLU: true}
			parts := [][]int{lengths, {1, 1, 1}, {1, 1, 1}}
			from := []int{0, 0, 0}
			var outs []*gpu.Buffer
			var layouts [][]cpuref.Seq
			submit(t, d, func(r *gpu.Recorder) {
				for _, lens := range parts {
					part := layoutSeqs(lens, slots)
					out := empty(t, d, batchRows(part)*channels)
					r.SSMConv(upload(t, d, sliceRows(x, channels, full, part, from)), upload(t, d, w), stBuf, out, sh, recurrentBatch(t, d, part))
					outs, layouts = append(outs, out), append(layouts, part)
					for i := range from {
						from[i] += lens[i]
					}
				}
			})
			wantSt := slices.Clone(st)
			want := cpuref.SSMConv(x, channels, 0, w, wantSt, channels, dConv, full, true)
			var got []float32
			gotFull := make([]float32, len(want))
			from = []int{0, 0, 0}
			for p, part := range layouts {
				got = readFloats(t, d, outs[p], batchRows(part)*channels)
				for i, s := range part {
					dst := (full[i].First + from[i]) * channels
					copy(gotFull[dst:dst+s.Tokens*channels], got[s.First*channels:(s.First+s.Tokens)*channels])
					from[i] += s.Tokens
				}
			}
			checkRec(t, v.name+" out", gotFull, want)
			checkRec(t, v.name+" state", readFloats(t, d, stBuf, len(wantSt)), wantSt)
		})
	}
}

// deltaInputs is a batch's random inputs to the delta rule as qwen35 makes them: q and k
// L2-normalised, beta = sigmoid(·), g = -softplus(·)·exp(a) (a decay per token in (0, 1)).
type deltaInputs struct {
	qkv, g, beta []float32
	sh           gpu.DeltaNetShape
}

func newDeltaInputs(rng *rand.Rand, rows, dim, kHeads, vHeads int, kda bool) deltaInputs {
	key := kHeads * dim
	sh := gpu.DeltaNetShape{HeadDim: dim, KHeads: kHeads, VHeads: vHeads, Stride: 2*key + vHeads*dim + 3, QCol: 0, KCol: key, VCol: 2 * key, KDA: kda}
	in := deltaInputs{qkv: randVec(rng, rows*sh.Stride), sh: sh}
	cpuref.L2Norm(in.qkv, sh.Stride, 0, 2*kHeads, dim, 1e-6)
	gPer := vHeads
	if kda {
		gPer *= dim
	}
	in.g = randVec(rng, rows*gPer)
	for i, x := range in.g {
		in.g[i] = -float32(math.Log1p(math.Exp(float64(x)))) * 0.3
	}
	in.beta = randVec(rng, rows*vHeads)
	for i, x := range in.beta {
		in.beta[i] = float32(1 / (1 + math.Exp(-float64(x))))
	}
	return in
}

// rows picks rows of the inputs as sliceRows does.
func (in deltaInputs) rows(full, part []cpuref.Seq, from []int) deltaInputs {
	gPer := in.sh.VHeads
	if in.sh.KDA {
		gPer *= in.sh.HeadDim
	}
	return deltaInputs{sliceRows(in.qkv, in.sh.Stride, full, part, from), sliceRows(in.g, gPer, full, part, from),
		sliceRows(in.beta, in.sh.VHeads, full, part, from), in.sh}
}

// record records DeltaNet over the inputs for a layout, returning its output buffer.
func (in deltaInputs) record(t *testing.T, d *gpu.Device, r *gpu.Recorder, state *gpu.Buffer, seqs []cpuref.Seq) *gpu.Buffer {
	out := empty(t, d, batchRows(seqs)*in.sh.VHeads*in.sh.HeadDim)
	r.DeltaNet(upload(t, d, in.qkv), upload(t, d, in.g), upload(t, d, in.beta), state, out, in.sh, recurrentBatch(t, d, seqs))
	return out
}

// TestDeltaNet checks the gated delta rule against cpuref: sequences of 1, 3, 17 and no
// tokens in one batch (rows and slots out of sequence order), heads of 13 (not a multiple of
// 4, nor of a GPU workgroup's 16 columns), 32 with KDA's gate per dimension, and qwen35's
// 128 with value heads over key heads (tiled); and 300 tokens at 128, which CPU adapters
// split over two dispatches. The outputs and the whole state buffer are compared.
func TestDeltaNet(t *testing.T) {
	d := gputest.Device(t)
	for _, v := range recurrentVariants(d) {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(75, 76))
			for _, c := range []struct {
				dim, kHeads, vHeads int
				kda                 bool
				lengths             []int
			}{
				{13, 2, 4, false, []int{1, 3, 17, 0}},
				{32, 1, 2, true, []int{1, 3, 17, 0}},
				{128, 2, 4, false, []int{1, 3, 17, 0}},
				{128, 1, 1, false, []int{300, 1}},
			} {
				seqs := layoutSeqs(c.lengths, []int{3, 0, 2, 1}[:len(c.lengths)])
				slots := 4
				in := newDeltaInputs(rng, batchRows(seqs), c.dim, c.kHeads, c.vHeads, c.kda)
				st := randVec(rng, slots*gpu.DeltaNetStateSize(c.dim, c.vHeads))
				for i := range st {
					st[i] *= 0.1
				}
				stBuf := upload(t, d, st)
				var out *gpu.Buffer
				dispatches := 0
				submit(t, d, func(r *gpu.Recorder) { out, dispatches = in.record(t, d, r, stBuf, seqs), r.Dispatches() })
				wantSt := slices.Clone(st)
				want := cpuref.DeltaNet(in.qkv, in.sh.Stride, in.sh.QCol, in.sh.KCol, in.sh.VCol, in.g, in.beta, wantSt, c.dim, c.kHeads, c.vHeads, c.kda, seqs)
				name := fmt.Sprintf("%s dim=%d heads=%d/%d kda=%v tokens=%v", v.name, c.dim, c.kHeads, c.vHeads, c.kda, c.lengths)
				if wantD := 1; dispatches != wantD+boolInt(v.bf && c.lengths[0] > 232) { // 232 tokens a dispatch at 128
					t.Errorf("%s: %d dispatches", name, dispatches)
				}
				checkRec(t, name+" out", readFloats(t, d, out, len(want)), want)
				checkRec(t, name+" state", readFloats(t, d, stBuf, len(wantSt)), wantSt)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDeltaNetCarry checks that states carry across calls: a prompt call (5, 17 and 1 tokens)
// then two decode calls of a token per sequence, recorded in one pass, give what one call over
// the whole sequences gives.
func TestDeltaNetCarry(t *testing.T) {
	d := gputest.Device(t)
	for _, v := range recurrentVariants(d) {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(77, 78))
			const dim, kHeads, vHeads = 30, 1, 2
			slots := []int{2, 0, 1}
			full := layoutSeqs([]int{7, 19, 3}, slots)
			in := newDeltaInputs(rng, batchRows(full), dim, kHeads, vHeads, false)
			st := randVec(rng, 3*gpu.DeltaNetStateSize(dim, vHeads))
			stBuf := upload(t, d, st)
			parts := [][]int{{5, 17, 1}, {1, 1, 1}, {1, 1, 1}}
			from := []int{0, 0, 0}
			var outs []*gpu.Buffer
			var layouts [][]cpuref.Seq
			submit(t, d, func(r *gpu.Recorder) {
				for _, lens := range parts {
					part := layoutSeqs(lens, slots)
					outs = append(outs, in.rows(full, part, from).record(t, d, r, stBuf, part))
					layouts = append(layouts, part)
					for i := range from {
						from[i] += lens[i]
					}
				}
			})
			wantSt := slices.Clone(st)
			want := cpuref.DeltaNet(in.qkv, in.sh.Stride, in.sh.QCol, in.sh.KCol, in.sh.VCol, in.g, in.beta, wantSt, dim, kHeads, vHeads, false, full)
			width := vHeads * dim
			gotFull := make([]float32, len(want))
			from = []int{0, 0, 0}
			for p, part := range layouts {
				got := readFloats(t, d, outs[p], batchRows(part)*width)
				for i, s := range part {
					dst := (full[i].First + from[i]) * width
					copy(gotFull[dst:dst+s.Tokens*width], got[s.First*width:(s.First+s.Tokens)*width])
					from[i] += s.Tokens
				}
			}
			checkRec(t, v.name+" out", gotFull, want)
			checkRec(t, v.name+" state", readFloats(t, d, stBuf, len(wantSt)), wantSt)
		})
	}
}

// TestL2Norm checks l2_norm over the q and k heads of wider rows, one head small enough that
// eps bounds its scale.
func TestL2Norm(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(79, 80))
	const rows, heads, dim, stride, col = 5, 4, 13, 4*13 + 9, 2
	const eps = 1e-6
	x := randVec(rng, rows*stride)
	for i := 0; i < dim; i++ {
		x[2*stride+col+dim+i] *= 1e-8 // row 2, head 1: a norm below eps
	}
	buf := upload(t, d, x)
	got := run(t, d, buf, len(x), func(r *gpu.Recorder) { r.L2Norm(buf, rows, stride, col, heads, dim, eps) })
	want := slices.Clone(x)
	cpuref.L2Norm(want, stride, col, heads, dim, eps)
	checkRec(t, "l2_norm", got, want)
	ggml := slices.Clone(x) // llama.cpp's roundings: the squares' double sum rounded to f32, sqrtf
	for r := range rows {
		for h := range heads {
			v := ggml[r*stride+col+h*dim : r*stride+col+(h+1)*dim]
			var sum float64
			for _, e := range v {
				sum += float64(e * e)
			}
			scale := 1 / max(float32(math.Sqrt(float64(float32(sum)))), eps)
			for i := range v {
				v[i] *= scale
			}
		}
	}
	checkGGMLRounding(t, d, "l2_norm", got, ggml)
	small := 2*stride + col + dim
	check(t, "l2_norm below eps", got[small:small+dim], want[small:small+dim], tolRecurrent)
}

// TestRecurrentRefused checks that shapes and batches the kernels cannot take are refused.
func TestRecurrentRefused(t *testing.T) {
	d := gputest.Device(t)
	buf := empty(t, d, 4096)
	seqs := func(s ...gpu.RecurrentSeq) gpu.RecurrentBatch {
		return gpu.RecurrentBatch{Buf: buf, Seqs: s}
	}
	one := seqs(gpu.RecurrentSeq{Tokens: 2})
	conv := gpu.SSMConvShape{Channels: 8, DConv: 4, XStride: 8}
	delta := gpu.DeltaNetShape{HeadDim: 8, KHeads: 1, VHeads: 2, Stride: 32, KCol: 8, VCol: 16}
	for name, fn := range map[string]func(r *gpu.Recorder){
		"d_conv 10":    func(r *gpu.Recorder) { c := conv; c.DConv = 10; r.SSMConv(buf, buf, buf, buf, c, one) },
		"conv stride":  func(r *gpu.Recorder) { c := conv; c.XCol = 1; r.SSMConv(buf, buf, buf, buf, c, one) },
		"no sequences": func(r *gpu.Recorder) { r.SSMConv(buf, buf, buf, buf, conv, seqs()) },
		"shared slot":  func(r *gpu.Recorder) { r.SSMConv(buf, buf, buf, buf, conv, seqs(one.Seqs[0], one.Seqs[0])) },
		"conv state short": func(r *gpu.Recorder) {
			r.SSMConv(buf, buf, buf, buf, conv, seqs(gpu.RecurrentSeq{Tokens: 1, Slot: 200}))
		},
		"head 257": func(r *gpu.Recorder) { s := delta; s.HeadDim = 257; r.DeltaNet(buf, buf, buf, buf, buf, s, one) },
		"heads 3 over 2": func(r *gpu.Recorder) {
			s := delta
			s.KHeads = 2
			s.VHeads = 3
			r.DeltaNet(buf, buf, buf, buf, buf, s, one)
		},
		"v past the row": func(r *gpu.Recorder) { s := delta; s.VCol = 17; r.DeltaNet(buf, buf, buf, buf, buf, s, one) },
		"delta state short": func(r *gpu.Recorder) {
			r.DeltaNet(buf, buf, buf, buf, buf, delta, seqs(gpu.RecurrentSeq{Tokens: 1, Slot: 40}))
		},
		"seqs buffer short": func(r *gpu.Recorder) {
			r.DeltaNet(buf, buf, buf, buf, buf, delta, gpu.RecurrentBatch{Buf: empty(t, d, 2), Seqs: one.Seqs})
		},
	} {
		r, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		fn(r)
		if err := r.Submit(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// BenchmarkDeltaNet times the recurrent kernels at Qwen3.5-0.8B's shapes (16 key and 16 value
// heads of 128, the conv over their 6144 channels): one sequence decoding a token, and a
// 512-token prompt, on every kernel shape the adapter runs.
func BenchmarkDeltaNet(b *testing.B) {
	d := gputest.Device(b)
	defer func(v, s bool) { d.BarrierFree, d.SubgroupMath = v, s }(d.BarrierFree, d.SubgroupMath)
	rng := rand.New(rand.NewPCG(81, 82))
	const dim, heads, channels, dConv = 128, 16, 6144, 4
	for _, v := range recurrentVariants(d) {
		for _, tokens := range []int{1, 512} {
			in := newDeltaInputs(rng, tokens, dim, heads, heads, false)
			qkv, g, beta := upload(b, d, in.qkv), upload(b, d, in.g), upload(b, d, in.beta)
			state, out := upload(b, d, make([]float32, gpu.DeltaNetStateSize(dim, heads))), empty(b, d, tokens*heads*dim)
			x, w, convOut := upload(b, d, randVec(rng, tokens*channels)), upload(b, d, randVec(rng, channels*dConv)), empty(b, d, tokens*channels)
			convState := upload(b, d, randVec(rng, gpu.SSMConvStateSize(channels, dConv)))
			batch := recurrentBatch(b, d, []cpuref.Seq{{Tokens: tokens}})
			conv := gpu.SSMConvShape{Channels: channels, DConv: dConv, XStride: channels, SiLU: true}
			for _, op := range []string{"conv", "delta"} {
				b.Run(fmt.Sprintf("%s/%s/tokens=%d", op, v.name, tokens), func(b *testing.B) {
					d.BarrierFree, d.SubgroupMath = v.bf, v.sub
					for i := 0; i < b.N; i++ {
						r, err := d.Begin()
						if err != nil {
							b.Fatal(err)
						}
						if op == "conv" {
							r.SSMConv(x, w, convState, convOut, conv, batch)
						} else {
							r.DeltaNet(qkv, g, beta, state, out, in.sh, batch)
						}
						if _, err := r.SubmitAndRead(out, 0, 4); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
