package reference

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
)

func randn(rng *rand.Rand, n int, std float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * std)
	}
	return x
}

// TestTopK checks the order (largest first, ties to the lower index) against sorting.
func TestTopK(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		x := randn(rng, 16, 1)
		x[5], x[9] = x[12], x[12] // a three-way tie
		k := 1 + rng.IntN(16)
		got := TopK(x, k)
		if len(got) != k {
			t.Fatalf("%d of %d", len(got), k)
		}
		for i := 1; i < k; i++ {
			a, b := got[i-1], got[i]
			if x[a] < x[b] || (x[a] == x[b] && a > b) {
				t.Fatalf("TopK(%v, %d) = %v: out of order at %d", x, k, got, i)
			}
		}
		for j := range x { // no value left out beats the last chosen
			if !slices.Contains(got, j) && (x[j] > x[got[k-1]] || (x[j] == x[got[k-1]] && j < got[k-1])) {
				t.Fatalf("TopK(%v, %d) = %v left %d out", x, k, got, j)
			}
		}
	}
	if got := TopK([]float32{1, 2}, 5); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("k beyond the length: %v", got)
	}
}

// TestRoute checks each gating function's choice and weights against their definitions.
func TestRoute(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n, k = 8, 3
	sigmoid := func(v float32) float64 { return 1 / (1 + math.Exp(-float64(v))) }
	for range 20 {
		logits := randn(rng, n, 2)
		order := TopK(logits, n) // every gating here is monotonic: the top k logits are chosen
		var z float64
		for _, v := range logits {
			z += math.Exp(float64(v))
		}
		near := func(what string, got []float32, want []float64) {
			t.Helper()
			for i := range want {
				if math.Abs(float64(got[i])-want[i]) > 1e-6*math.Max(1, math.Abs(want[i])) {
					t.Fatalf("%s: weights %v, want %v", what, got, want)
				}
			}
		}
		for _, c := range []struct {
			name string
			r    Routing
			want func(e int) float64 // the weight before normalisation
		}{
			{"softmax", Routing{NUsed: k, Gating: GatingSoftmax}, func(e int) float64 { return math.Exp(float64(logits[e])) / z }},
			{"sigmoid", Routing{NUsed: k, Gating: GatingSigmoid}, func(e int) float64 { return sigmoid(logits[e]) }},
			{"sqrt-softplus", Routing{NUsed: k, Gating: GatingSqrtSoftplus}, func(e int) float64 { return math.Sqrt(math.Log1p(math.Exp(float64(logits[e])))) }},
		} {
			for _, norm := range []bool{false, true} {
				c.r.Normalize = norm
				ids, w := c.r.Route(logits)
				if !slices.Equal(ids, order[:k]) {
					t.Fatalf("%s: chose %v, want %v", c.name, ids, order[:k])
				}
				want := make([]float64, k)
				var sum float64
				for i, e := range ids {
					want[i] = c.want(e)
					sum += want[i]
				}
				if norm {
					for i := range want {
						want[i] /= sum
					}
				}
				near(c.name, w, want)
			}
		}
		// SOFTMAX_WEIGHT: the softmax over the k chosen logits, which is softmax's weights
		// normalised; a scale multiplies them.
		ids, w := Routing{NUsed: k, Gating: GatingSoftmaxWeight}.Route(logits)
		_, wn := Routing{NUsed: k, Gating: GatingSoftmax, Normalize: true, Scale: 2.5}.Route(logits)
		var zk float64
		for _, e := range ids {
			zk += math.Exp(float64(logits[e]))
		}
		want := make([]float64, k)
		for i, e := range ids {
			want[i] = math.Exp(float64(logits[e])) / zk
			if math.Abs(float64(wn[i])-2.5*want[i]) > 1e-6 {
				t.Fatalf("softmax normalised and scaled by 2.5: %v, want 2.5 x %v", wn, want)
			}
		}
		near("softmax-weight", w, want)
	}
	// The selection bias chooses, the unbiased probabilities weigh.
	logits := []float32{3, 2, 1, 0}
	ids, w := Routing{NUsed: 2, Gating: GatingSigmoid, SelectionBias: []float32{0, 0, 5, 0}}.Route(logits)
	if !slices.Equal(ids, []int{2, 0}) || math.Abs(float64(w[0])-sigmoid(1)) > 1e-7 || math.Abs(float64(w[1])-sigmoid(3)) > 1e-7 {
		t.Errorf("selection bias: experts %v weights %v, want [2 0] weights sigmoid(1), sigmoid(3)", ids, w)
	}
}

// TestNormalizeWeights checks the division by the sum and its floor at float16's smallest
// normal value.
func TestNormalizeWeights(t *testing.T) {
	if got := NormalizeWeights([]float32{1, 3}); !slices.Equal(got, []float32{0.25, 0.75}) {
		t.Errorf("[1 3] normalised to %v", got)
	}
	tiny := []float32{1e-6, 3e-6} // sum 4e-6, below the floor: divided by 2^-14 instead
	got := NormalizeWeights(tiny)
	for i, v := range tiny {
		if want := v / WeightSumMin; math.Abs(float64(got[i]-want)) > 1e-9 {
			t.Errorf("%g normalised to %g, want %g (the sum floored at %g)", v, got[i], want, WeightSumMin)
		}
	}
	// Sigmoid gating of very negative logits reaches the floor in Route too.
	_, w := Routing{NUsed: 2, Gating: GatingSigmoid, Normalize: true}.Route([]float32{-20, -21, -30})
	if s := w[0] + w[1]; s > 0.1 {
		t.Errorf("sigmoid weights of logits -20 and -21 normalised to sum %g, want the floor's tiny quotient", s)
	}
}

// TestSwiGLUOAI checks gpt-oss's activation on worked values, within and beyond the clamps.
func TestSwiGLUOAI(t *testing.T) {
	glu := func(g, u float64) float64 { return g / (1 + math.Exp(-OAIAlpha*g)) * (u + 1) }
	for _, c := range []struct{ gate, up, want float64 }{
		{0.5, 0.25, glu(0.5, 0.25)},
		{-3, 2, glu(-3, 2)},
		{10, 1, glu(7, 1)},        // the gate is capped at the limit from above
		{-10, 1, glu(-10, 1)},     // but not from below
		{1, 9, glu(1, 7)},         // up is clamped to [-limit, limit]
		{1, -12, glu(1, -7)},      // both ways
		{8, -8, glu(7, -7)},       // both at once
		{0, 100, 0},               // a zero gate gates everything
		{7, 7, glu(7, 7)},         // the limits themselves
		{-0.5, -1, glu(-0.5, -1)}, // up = -1 zeroes the output
	} {
		got := SwiGLUOAI([]float32{float32(c.gate)}, []float32{float32(c.up)}, OAIAlpha, OAILimit)[0]
		if math.Abs(float64(got)-c.want) > 1e-6*math.Max(1, math.Abs(c.want)) {
			t.Errorf("swiglu_oai(%g, %g) = %g, want %g", c.gate, c.up, got, c.want)
		}
	}
}

// TestAttentionSinks checks the sink's place in the softmax against a direct computation, and
// that without sinks (or with sinks far below the scores) it is plain attention.
func TestAttentionSinks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const nHead, nKV, hd, n = 4, 2, 8, 6
	q, k, v := randn(rng, n*nHead*hd, 1), randn(rng, n*nKV*hd, 1), randn(rng, n*nKV*hd, 1)
	pos := []int32{0, 1, 2, 3, 4, 5}
	const scale = 0.3
	for _, window := range []int{0, 3} {
		plain := cpuref.AttentionOpts(q, k, v, pos, nHead, nKV, hd, scale, 0, window)
		if e := cpuref.RelErr(AttentionSinks(q, k, v, pos, nHead, nKV, hd, scale, 0, window, nil), plain); e > 1e-7 {
			t.Errorf("window %d, no sinks: relative error %.2g from plain attention", window, e)
		}
		if e := cpuref.RelErr(AttentionSinks(q, k, v, pos, nHead, nKV, hd, scale, 0, window, []float32{-100, -100, -100, -100}), plain); e > 1e-7 {
			t.Errorf("window %d, sinks at -100: relative error %.2g from plain attention", window, e)
		}
		sinks := []float32{-1, 0.5, 2, 30}
		got := AttentionSinks(q, k, v, pos, nHead, nKV, hd, scale, 0, window, sinks)
		for tk := range n {
			for h := range nHead {
				first := 0
				if window > 0 {
					first = max(0, tk+1-window)
				}
				kh := h / (nHead / nKV)
				den := math.Exp(float64(sinks[h])) // the sink's logit, unscaled
				out := make([]float64, hd)
				for j := first; j <= tk; j++ {
					var s float64
					for d := range hd {
						s += float64(q[(tk*nHead+h)*hd+d]) * float64(k[(j*nKV+kh)*hd+d])
					}
					p := math.Exp(s * scale)
					den += p
					for d := range hd {
						out[d] += p * float64(v[(j*nKV+kh)*hd+d])
					}
				}
				for d := range hd {
					want := out[d] / den
					if g := got[(tk*nHead+h)*hd+d]; math.Abs(float64(g)-want) > 1e-6 {
						t.Fatalf("window %d, token %d head %d dim %d: %g, want %g", window, tk, h, d, g, want)
					}
				}
			}
		}
		// A sink of 30 takes nearly all of head 3's attention.
		for tk := range n {
			for d := range hd {
				if g := got[(tk*nHead+3)*hd+d]; math.Abs(float64(g)) > 1e-9 {
					t.Fatalf("head 3's output %g under a sink of 30", g)
				}
			}
		}
		// llama.cpp's float16 flash attention folds the sink in after the keys: the same, to
		// float16's precision.
		k16, v16 := cpuref.ActF16(k), cpuref.ActF16(v)
		flash := attentionFlashF16(q, k16, v16, pos, nHead, nKV, hd, scale, 0, window, sinks)
		if e := cpuref.RelErr(flash, AttentionSinks(q, k16, v16, pos, nHead, nKV, hd, scale, 0, window, sinks)); e > 2e-3 {
			t.Errorf("window %d: flash attention with sinks: relative error %.2g", window, e)
		}
	}
}

// TestMoEForward checks MoE.Forward on random weights against a direct computation of one
// token's mixture, with gpt-oss's biases and activation and with a shared expert, and the
// fused gate_up split and the gate-less experts.
func TestMoEForward(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const d, ff, ne, used, nTok = 16, 8, 5, 2, 3
	base := func() *MoE {
		return &MoE{NEmbd: d, NFF: ff, NExpert: ne, Routing: Routing{NUsed: used, Gating: GatingSoftmax, Normalize: true},
			Router: randn(rng, ne*d, 0.5), Gate: randn(rng, ne*ff*d, 0.3), Up: randn(rng, ne*ff*d, 0.3), Down: randn(rng, ne*d*ff, 0.3)}
	}
	x := randn(rng, nTok*d, 1)
	dot := func(w []float32, row, cols int, in []float32) float64 {
		var s float64
		for j := range cols {
			s += float64(w[row*cols+j]) * float64(in[j])
		}
		return s
	}
	bias := func(b []float32, i int) float64 {
		if b == nil {
			return 0
		}
		return float64(b[i])
	}
	// direct is one token's output, the expert FFNs written out.
	direct := func(m *MoE, xt []float32) []float64 {
		logits := make([]float32, ne)
		for e := range ne {
			logits[e] = float32(dot(m.Router, e, d, xt) + bias(m.RouterBias, e))
		}
		ids, w := m.Route(logits)
		out := make([]float64, d)
		for i, e := range ids {
			act := make([]float32, ff)
			for r := range ff {
				u := dot(m.Up, e*ff+r, d, xt) + bias(m.UpBias, e*ff+r)
				switch {
				case m.Act == ActSwiGLUOAI:
					g := dot(m.Gate, e*ff+r, d, xt) + bias(m.GateBias, e*ff+r)
					act[r] = SwiGLUOAI([]float32{float32(g)}, []float32{float32(u)}, OAIAlpha, OAILimit)[0]
				case m.Gate == nil:
					act[r] = float32(u / (1 + math.Exp(-u)))
				default:
					g := dot(m.Gate, e*ff+r, d, xt)
					act[r] = float32(g / (1 + math.Exp(-g)) * u)
				}
			}
			for r := range d {
				out[r] += float64(w[i]) * (dot(m.Down, e*d+r, ff, act) + bias(m.DownBias, e*d+r))
			}
		}
		if s := m.Shared; s != nil {
			act := make([]float32, s.NFF)
			for r := range s.NFF {
				g, u := dot(s.Gate, r, d, xt), dot(s.Up, r, d, xt)
				act[r] = float32(g / (1 + math.Exp(-g)) * u)
			}
			scale := 1 / (1 + math.Exp(-dot(s.GateInp, 0, d, xt)))
			for r := range d {
				out[r] += scale * dot(s.Down, r, s.NFF, act)
			}
		}
		return out
	}
	check := func(name string, m *MoE) {
		t.Helper()
		got := m.Forward(x, nTok)
		for tk := range nTok {
			want := direct(m, x[tk*d:(tk+1)*d])
			for r := range d {
				if math.Abs(float64(got[tk*d+r])-want[r]) > 1e-5*math.Max(1, math.Abs(want[r])) {
					t.Fatalf("%s: token %d output %d = %g, want %g", name, tk, r, got[tk*d+r], want[r])
				}
			}
		}
	}
	check("softmax, normalised", base())

	oss := base()
	oss.Routing = Routing{NUsed: used, Gating: GatingSoftmaxWeight}
	oss.Act = ActSwiGLUOAI
	oss.RouterBias, oss.GateBias, oss.UpBias, oss.DownBias = randn(rng, ne, 0.5), randn(rng, ne*ff, 3), randn(rng, ne*ff, 3), randn(rng, ne*d, 0.5)
	for i := range oss.Gate { // gates and ups large enough to reach the clamps
		oss.Gate[i] *= 10
		oss.Up[i] *= 10
	}
	check("gpt-oss", oss)

	shared := base()
	shared.Routing.Normalize = false
	shared.Shared = &SharedExpert{NFF: 6, Gate: randn(rng, 6*d, 0.3), Up: randn(rng, 6*d, 0.3), Down: randn(rng, d*6, 0.3), GateInp: randn(rng, d, 0.3)}
	check("qwen2moe's shared expert", shared)

	noGate := base()
	noGate.Gate = nil
	check("no gate", noGate)

	// The fused gate_up tensor holds each expert's gate rows, then its up rows.
	m := base()
	fused := make([]float32, 0, 2*ne*ff*d)
	for e := range ne {
		fused = append(fused, m.Gate[e*ff*d:(e+1)*ff*d]...)
		fused = append(fused, m.Up[e*ff*d:(e+1)*ff*d]...)
	}
	gate, up := SplitGateUp(fused, d, ff, ne)
	if !slices.Equal(gate, m.Gate) || !slices.Equal(up, m.Up) {
		t.Error("SplitGateUp does not undo the fusing")
	}
}

func sameRouting(a, b Routing) bool {
	return a.NUsed == b.NUsed && a.Gating == b.Gating && a.Normalize == b.Normalize && a.Scale == b.Scale &&
		slices.Equal(a.SelectionBias, b.SelectionBias)
}

// TestMoEHparams checks the settings read from the test models against llama.cpp's
// load_hparams and graphs.
func TestMoEHparams(t *testing.T) {
	read := func(name string) hparams {
		t.Helper()
		hp, err := readHparams(moeModel(t, name))
		if err != nil {
			t.Fatal(err)
		}
		return hp
	}
	q := read("qwen3moe-F32")
	if q.nExpert != 8 || !sameRouting(q.routing, Routing{NUsed: 2, Gating: GatingSoftmax, Normalize: true}) || q.nFFExp != 64 || q.act != ActSiLU ||
		q.window != 0 || q.extFactor != 0 || q.attnScale != float32(1/math.Sqrt(32)) {
		t.Errorf("qwen3moe: %+v", q)
	}
	l := read("llamamoe-F32")
	if l.nExpert != 4 || !sameRouting(l.routing, Routing{NUsed: 2, Gating: GatingSoftmax, Normalize: true}) || l.nFFExp != 64 || l.neox {
		t.Errorf("llama with experts: %+v", l)
	}
	q2 := read("qwen2moe-F32")
	if q2.routing.Normalize || q2.nFFExp != 64 || q2.nFFShexp != 96 {
		t.Errorf("qwen2moe: %+v", q2)
	}
	g := read("gptoss-F32")
	if !sameRouting(g.routing, Routing{NUsed: 2, Gating: GatingSoftmaxWeight}) || g.act != ActSwiGLUOAI || g.nFFExp != 64 || !g.neox ||
		g.window != 8 || g.swaPattern != 2 || g.ropeBase != 150000 || g.ropeBaseSWA != 150000 ||
		g.ropeScale != 1.0/32 || g.ropeScaleSWA != 1.0/32 || g.extFactor != 1 || g.nCtxOrig != 4096 ||
		g.betaFast != 32 || g.betaSlow != 1 || math.Abs(float64(g.attnFactor)-1) > 1e-6 || g.headDim != 32 ||
		g.attnScale != float32(1/math.Sqrt(32)) {
		t.Errorf("gpt-oss: %+v", g)
	}
	for il, slides := range []bool{true, false, true, false} { // even layers slide
		if _, _, w := g.layerRoPE(il); (w == 8) != slides || (w != 0 && w != 8) {
			t.Errorf("gpt-oss layer %d: window %d", il, w)
		}
	}
	if y := g.yarn(150000); y.lo != 4 || y.hi != 9 || y.ext != 1 {
		t.Errorf("gpt-oss YaRN: %+v, want the ramp over pairs 4..9", y)
	}
}

// TestYaRN checks ropeYaRN against plain RoPE where YaRN reduces to it, and its ends: pairs
// below the ramp turn by the extrapolated angle, pairs above it by the interpolated one, and
// every pair's magnitude is scaled by attnFactor * (1 + 0.1 ln(1/scale)).
func TestYaRN(t *testing.T) {
	const nHeads, hd, nRot = 2, 16, 16
	rng := rand.New(rand.NewPCG(11, 12))
	pos := []int32{0, 3, 17, 200}
	x := randn(rng, len(pos)*nHeads*hd, 1)
	run := func(scale float32, y yarnParams) []float32 {
		out := slices.Clone(x)
		ropeYaRN(out, pos, nHeads, hd, nRot, 10000, scale, true, nil, y)
		return out
	}
	plain := func(scale float32) []float32 {
		out := slices.Clone(x)
		rope(out, pos, nHeads, hd, nRot, 10000, scale, true, nil)
		return out
	}
	if e := cpuref.RelErr(run(0.25, yarnParams{attnFactor: 1}), plain(0.25)); e > 1e-6 {
		t.Errorf("no YaRN: relative error %.2g from linear scaling", e)
	}
	if e := cpuref.RelErr(run(1, yarnParams{ext: 1, attnFactor: 1, lo: 2, hi: 5}), plain(1)); e > 1e-6 {
		t.Errorf("YaRN at scale 1: relative error %.2g from plain RoPE", e)
	}
	// A ramp past every pair extrapolates all (plain RoPE, scaled); one before every pair
	// interpolates all (linear scaling, scaled).
	m := float32(0.9 * (1 + 0.1*math.Log(4)))
	scaled := func(v []float32) []float32 {
		out := slices.Clone(v)
		for i := range out {
			out[i] *= m
		}
		return out
	}
	if e := cpuref.RelErr(run(0.25, yarnParams{ext: 1, attnFactor: 0.9, lo: 100, hi: 200}), scaled(plain(1))); e > 1e-6 {
		t.Errorf("YaRN, ramp past every pair: relative error %.2g from plain RoPE x %g", e, m)
	}
	if e := cpuref.RelErr(run(0.25, yarnParams{ext: 1, attnFactor: 0.9, lo: -200, hi: -100}), scaled(plain(0.25))); e > 1e-6 {
		t.Errorf("YaRN, ramp before every pair: relative error %.2g from linear scaling x %g", e, m)
	}
	// ggml_rope_yarn_corr_dims for gpt-oss-20b's settings: head 64, 4096 positions, base 150000.
	if lo, hi := yarnCorrDims(64, 4096, 150000, 32, 1); lo != 8 || hi != 18 {
		t.Errorf("corr dims %g..%g, want 8..18", lo, hi)
	}
}
