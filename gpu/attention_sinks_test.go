package gpu_test

// Tests of attention sinks (gpt-oss: AttnParams.Sinks) in every attention kernel: the GPUs'
// cooperative and flash kernels, CPU adapters' token-lane and head-major barrier-free kernels
// (chunked past the loop budget), split-K decode's merge and the probe.

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

// attnKernels are the device settings that pick each family of attention kernels on lavapipe.
var attnKernels = []struct {
	name      string
	bf, lanes bool
}{{"gpu", false, false}, {"cpu-lanes", true, true}, {"cpu-rows", true, false}}

// sinkCase is one attention shape: tokens at the end of a cache of nCtx rows (their sequence's
// rows start after two rows of another sequence), attending causally, in a window when > 0.
type sinkCase struct {
	nHead, nKV, headDim, nCtx, tokens, window int
	f16                                       bool
}

// sinkInputs is a case's random data, uploaded, and its reference layout.
type sinkInputs struct {
	c                  sinkCase
	qRows, q, k, v     []float32 // q: qRows without the extra floats of each row
	qStride            int
	pos                []int32
	qb, kb, vb, posBuf *gpu.Buffer
}

func newSinkInputs(t *testing.T, d *gpu.Device, rng *rand.Rand, c sinkCase) *sinkInputs {
	t.Helper()
	in := &sinkInputs{c: c}
	for i := c.tokens; i > 0; i-- {
		in.pos = append(in.pos, int32(c.nCtx-i))
	}
	qWidth := c.nHead * c.headDim
	in.qStride = qWidth + 5 // as the fused qkv rows carry k and v after q
	in.qRows = randVec(rng, c.tokens*in.qStride)
	for i := range in.pos {
		in.q = append(in.q, in.qRows[i*in.qStride:i*in.qStride+qWidth]...)
	}
	in.k, in.v = randVec(rng, c.nCtx*c.nKV*c.headDim), randVec(rng, c.nCtx*c.nKV*c.headDim)
	if c.f16 {
		in.k, in.v = f16Round(in.k), f16Round(in.v)
	}
	const base = 2
	other := randVec(rng, base*c.nKV*c.headDim)
	kAll, vAll := append(slices.Clone(other), in.k...), append(slices.Clone(other), in.v...)
	if c.f16 {
		in.kb, in.vb = uploadF16(t, d, kAll), uploadF16(t, d, vAll)
	} else {
		in.kb, in.vb = upload(t, d, kAll), upload(t, d, vAll)
	}
	in.qb, in.posBuf = upload(t, d, in.qRows), uploadU32(t, d, withBase(in.pos, base))
	return in
}

// params are the AttnParams of the case (a scale of 1/sqrt(head_dim), as models use).
func (in *sinkInputs) params(t *testing.T, d *gpu.Device, sinks *gpu.Buffer) gpu.AttnParams {
	c := in.c
	return gpu.AttnParams{Scale: float32(1 / math.Sqrt(float64(c.headDim))), Window: c.window, MaxKeys: c.nCtx, Sequences: 1,
		State: empty(t, d, gpu.AttentionStateSize(c.tokens, c.nHead, c.headDim)), Sinks: sinks}
}

// attention runs Attention (or, with split, AttentionSplit) over the inputs.
func (in *sinkInputs) attention(t *testing.T, d *gpu.Device, ap gpu.AttnParams, split bool) []float32 {
	t.Helper()
	c := in.c
	out := empty(t, d, len(in.q))
	return run(t, d, out, len(in.q), func(r *gpu.Recorder) {
		if split {
			part := empty(t, d, gpu.AttentionSplitSize(c.tokens, c.nHead, c.headDim, c.nCtx))
			r.AttentionSplit(in.qb, in.kb, in.vb, in.posBuf, part, out, c.f16, in.qStride, c.tokens, c.nHead, c.nKV, c.headDim, c.nCtx, ap)
			return
		}
		r.Attention(in.qb, in.kb, in.vb, in.posBuf, out, c.f16, in.qStride, c.tokens, c.nHead, c.nKV, c.headDim, ap)
	})
}

// randSinks draws one sink per head, shuffled over the heads: one far above any score (the
// head's output shrinks by about e^-20), negative ones, and ones among the scores.
func randSinks(rng *rand.Rand, nHead int) []float32 {
	s := make([]float32, nHead)
	for h := range s {
		switch h % 4 {
		case 0:
			s[h] = 25
		case 1:
			s[h] = -1 - 3*rng.Float32()
		default:
			s[h] = float32(rng.NormFloat64() * 1.5)
		}
	}
	rng.Shuffle(nHead, func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

// checkHeads compares got with want head by head (over the tokens), so a head whose output a
// large sink scales down is held to the same relative bound as the others.
func checkHeads(t *testing.T, name string, got, want []float32, nHead, headDim int, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", name, len(got), len(want))
	}
	for h := range nHead {
		var g, w []float32
		for o := h * headDim; o < len(want); o += nHead * headDim {
			g, w = append(g, got[o:o+headDim]...), append(w, want[o:o+headDim]...)
		}
		if e := cpuref.RelErr(g, w); e > tol {
			t.Errorf("%s head %d: relative error %.3g > %.0g", name, h, e, tol)
		}
	}
}

// TestAttentionSinks checks Attention with sinks against the reference in every kernel family
// (asserted through a profile of the families that ran): grouped-query heads of 32, 64 and 18
// (4n + 2) dimensions, 1, 3, 9 and 40 tokens (prompts take flash or token lanes), a sliding
// window of 8 with sinks as gpt-oss uses them, an f32 and an f16 cache, and a long cache that
// CPU adapters' head-major kernel runs in chunks (the sink only in the last). CPU adapters'
// kernels are held to llama.cpp's f16 rounding with an f16 cache (cpuref.AttentionF16With).
func TestAttentionSinks(t *testing.T) {
	d := gputest.Device(t)
	defer func(v, l bool) { d.BarrierFree, d.TokenLanes = v, l }(d.BarrierFree, d.TokenLanes)
	defer func(p *gpu.Profile) { d.Profile = p }(d.Profile)
	rng := rand.New(rand.NewPCG(51, 52))
	var cases []sinkCase
	for _, hd := range []int{32, 64, 18} {
		for _, tokens := range []int{1, 3, 9, 40} {
			for _, window := range []int{0, 8} {
				for _, f16 := range []bool{false, true} {
					cases = append(cases, sinkCase{nHead: 4, nKV: 2, headDim: hd, nCtx: tokens + 23, tokens: tokens, window: window, f16: f16})
				}
			}
		}
	}
	// Past the loop budget (1818 keys at head_dim 64): chunked on CPU adapters without lanes.
	for _, window := range []int{0, 8} {
		cases = append(cases, sinkCase{nHead: 4, nKV: 2, headDim: 64, nCtx: 1900, tokens: 3, window: window, f16: true},
			sinkCase{nHead: 4, nKV: 2, headDim: 64, nCtx: 1900, tokens: 3, window: window})
	}
	type prepared struct {
		in    *sinkInputs
		sinks []float32
		sb    *gpu.Buffer
	}
	var ps []prepared
	for _, c := range cases {
		sinks := randSinks(rng, c.nHead)
		ps = append(ps, prepared{newSinkInputs(t, d, rng, c), sinks, upload(t, d, sinks)})
	}
	want := map[string][]string{"gpu": {"attention", "attention_flash"}, "cpu-lanes": {"attention", "attention_lanes"}, "cpu-rows": {"attention"}}
	for _, k := range attnKernels {
		d.BarrierFree, d.TokenLanes = k.bf, k.lanes
		d.Profile = gpu.NewProfile()
		chunked := false
		for _, p := range ps {
			c, in := p.in.c, p.in
			o := cpuref.AttnOpts{Scale: in.params(t, d, nil).Scale, Window: c.window, Sinks: p.sinks}
			ref := cpuref.AttentionWith(in.q, in.k, in.v, in.pos, c.nHead, c.nKV, c.headDim, o)
			if c.f16 && k.bf {
				// The barrier-free kernels round as llama.cpp's CPU flash attention does.
				ref16 := cpuref.AttentionF16With(in.q, in.k, in.v, in.pos, c.nHead, c.nKV, c.headDim, o)
				checkHeads(t, fmt.Sprintf("f16 reference %+v", c), ref16, ref, c.nHead, c.headDim, 1e-2)
				ref = ref16
			}
			got := in.attention(t, d, in.params(t, d, p.sb), false)
			checkHeads(t, fmt.Sprintf("%s %+v sinks %v", k.name, c, p.sinks), got, ref, c.nHead, c.headDim, tolF32)
			chunked = chunked || d.AttentionChunked(c.nCtx, c.headDim)
		}
		var ran []string
		for fam := range d.Profile.Kernels {
			ran = append(ran, fam)
		}
		slices.Sort(ran)
		if !slices.Equal(ran, want[k.name]) {
			t.Errorf("%s: kernels %v ran, want %v", k.name, ran, want[k.name])
		}
		if chunked != (k.name != "gpu") {
			t.Errorf("%s: chunked %v", k.name, chunked)
		}
	}
}

// TestAttentionSplitSinks checks split-K decode with sinks (applied in its merge) against the
// reference: 520 and 1000 keys (3 and 4 splits), 1 and 3 tokens, a window of 8 (all splits
// but the last without keys), heads of 32, 64 and 18, f32 and f16 caches.
func TestAttentionSplitSinks(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(53, 54))
	for _, hd := range []int{32, 64, 18} {
		for _, nCtx := range []int{520, 1000} {
			for _, tokens := range []int{1, 3} {
				for _, window := range []int{0, 8} {
					for _, f16 := range []bool{false, true} {
						c := sinkCase{nHead: 4, nKV: 2, headDim: hd, nCtx: nCtx, tokens: tokens, window: window, f16: f16}
						in := newSinkInputs(t, d, rng, c)
						sinks := randSinks(rng, c.nHead)
						ap := in.params(t, d, upload(t, d, sinks))
						want := cpuref.AttentionWith(in.q, in.k, in.v, in.pos, c.nHead, c.nKV, c.headDim, cpuref.AttnOpts{Scale: ap.Scale, Window: window, Sinks: sinks})
						checkHeads(t, fmt.Sprintf("split %+v sinks %v", c, sinks), in.attention(t, d, ap, true), want, c.nHead, c.headDim, tolF32)
					}
				}
			}
		}
	}
}

// TestAttentionSinksOff checks that sinks far below every score change nothing, to the bit,
// in every kernel (split-K and chunked included): the sink code, given a sink that takes no
// share, leaves the running softmax exactly as the kernels without sinks (Sinks nil, whose
// source is the kernels' as before) leave it; and that a sink buffer too small is refused.
func TestAttentionSinksOff(t *testing.T) {
	d := gputest.Device(t)
	defer func(v, l bool) { d.BarrierFree, d.TokenLanes = v, l }(d.BarrierFree, d.TokenLanes)
	rng := rand.New(rand.NewPCG(55, 56))
	var ins []*sinkInputs
	for _, c := range []sinkCase{{4, 2, 18, 30, 3, 0, true}, {4, 2, 64, 60, 40, 8, false}, {4, 2, 32, 50, 9, 0, true},
		{4, 2, 64, 1900, 3, 0, true}, {4, 2, 64, 600, 1, 8, false}, {4, 2, 32, 600, 1, 0, true}} {
		ins = append(ins, newSinkInputs(t, d, rng, c))
	}
	off := upload(t, d, []float32{-1e30, -1e30, -1e30, -1e30})
	for _, k := range attnKernels {
		d.BarrierFree, d.TokenLanes = k.bf, k.lanes
		for _, in := range ins {
			for _, split := range []bool{false, true} {
				if split && in.c.nCtx < 512 {
					continue
				}
				plain := in.attention(t, d, in.params(t, d, nil), split)
				sunk := in.attention(t, d, in.params(t, d, off), split)
				for i := range plain {
					if math.Float32bits(plain[i]) != math.Float32bits(sunk[i]) {
						t.Errorf("%s %+v split=%v: value %d is %g without sinks, %g with sinks of -1e30", k.name, in.c, split, i, plain[i], sunk[i])
						break
					}
				}
			}
		}
	}
	in := ins[0]
	r, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	r.Attention(in.qb, in.kb, in.vb, in.posBuf, empty(t, d, len(in.q)), in.c.f16, in.qStride, in.c.tokens, in.c.nHead, in.c.nKV, in.c.headDim,
		in.params(t, d, upload(t, d, []float32{1, 2, 3})))
	if err := r.Submit(); err == nil {
		t.Error("3 sinks for 4 heads: no error")
	}
}

// TestAttentionProbeSinks checks the probe with sinks: each head's weights against the
// reference's, the sink taking its share (the weights sum to 1 less the sink's), with a
// sliding window, f32 and f16 caches; and with sinks of -1e30 the same bits as without.
func TestAttentionProbeSinks(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(57, 58))
	for _, c := range []sinkCase{{4, 2, 18, 300, 2, 0, false}, {4, 2, 64, 700, 1, 8, true}, {6, 2, 32, 40, 3, 0, true}} {
		in := newSinkInputs(t, d, rng, c)
		sinks := randSinks(rng, c.nHead)
		plainAP := in.params(t, d, nil)
		sunkAP, offAP := plainAP, plainAP
		sunkAP.Sinks, offAP.Sinks = upload(t, d, sinks), upload(t, d, slices.Repeat([]float32{-1e30}, c.nHead))
		for row := range c.tokens {
			keys := int(in.pos[row]) + 1
			q := in.q[row*c.nHead*c.headDim : (row+1)*c.nHead*c.headDim]
			for h := range c.nHead {
				name := fmt.Sprintf("probe %+v row %d head %d sink %g", c, row, h, sinks[h])
				probe := func(ap gpu.AttnParams) []float32 {
					out := upload(t, d, randVec(rng, keys))
					return run(t, d, out, keys, func(r *gpu.Recorder) {
						r.AttentionProbe(in.qb, in.kb, in.posBuf, out, c.f16, in.qStride, c.tokens, c.nHead, c.nKV, c.headDim, row, h, ap)
					})
				}
				want := cpuref.AttentionWeightsWith(q, in.k, in.pos[row:row+1], 0, h, c.nHead, c.nKV, c.headDim,
					cpuref.AttnOpts{Scale: plainAP.Scale, Window: c.window, Sinks: sinks})
				got := probe(sunkAP)
				check(t, name, got, want, 1e-5)
				var sum, wantSum float64
				for j := range got {
					sum, wantSum = sum+float64(got[j]), wantSum+float64(want[j])
				}
				if math.Abs(sum-wantSum) > 1e-5 {
					t.Errorf("%s: weights sum to %.7f, want %.7f", name, sum, wantSum)
				}
				if plain, off := probe(plainAP), probe(offAP); !slices.Equal(off, plain) {
					t.Errorf("%s: sinks of -1e30 change the weights", name)
				}
			}
		}
	}
}
