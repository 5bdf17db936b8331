package reference

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// hybridModel opens models/hybrid/NAME.gguf.
func hybridModel(t *testing.T, name string) *gguf.File {
	t.Helper()
	return open(t, shareddata.Path(t, "models", "hybrid", name+".gguf"))
}

// qwen35Greedy runs m's greedy continuation of ctx, one token at a time from a fresh state,
// against llama.cpp's run for up to steps steps, as greedyMatch does (first differing step,
// -1 for none; each agreeing step's largest top-10 probability difference).
func qwen35Greedy(t *testing.T, m *Qwen35, ctx []int32, run llamaRun, steps int) (first int, diffs []float64) {
	t.Helper()
	s := m.NewState()
	all, err := m.Run(s, ctx)
	if err != nil {
		t.Fatal(err)
	}
	logits := all[len(all)-1]
	for i := range min(steps, len(run.Tokens)) {
		lp := logSoftmax(logits)
		next := argmax(logits)
		if int32(next) != run.Tokens[i] {
			t.Logf("step %d: token %d (p %.4f), llama.cpp's %d (p %.4f here, %.4f there)", i, next, math.Exp(lp[next]),
				run.Tokens[i], math.Exp(lp[run.Tokens[i]]), math.Exp(run.Probs[i].Top[0].LogProb))
			return i, diffs
		}
		if i < len(run.Probs) {
			var d float64
			for _, top := range run.Probs[i].Top {
				d = max(d, math.Abs(math.Exp(lp[top.ID])-math.Exp(top.LogProb)))
			}
			diffs = append(diffs, d)
		}
		if logits, err = m.Step(s, int32(next)); err != nil {
			t.Fatal(err)
		}
	}
	return -1, diffs
}

// TestQwen35Hparams checks the hyperparameters and layer pattern read from models/hybrid's
// qwen35 file (see its README).
func TestQwen35Hparams(t *testing.T) {
	m, err := NewQwen35(hybridModel(t, "qwen35-F32"))
	if err != nil {
		t.Fatal(err)
	}
	c, hp := m.c, m.hp
	want := qwen35Params{convKernel: 4, headK: 32, headV: 32, nKHeads: 2, nVHeads: 4, sections: [4]int{4, 2, 2, 0},
		recurrent: []bool{true, true, true, false, true, true, true, false}}
	if c.convKernel != want.convKernel || c.headK != want.headK || c.headV != want.headV || c.nKHeads != want.nKHeads ||
		c.nVHeads != want.nVHeads || c.sections != want.sections || !slices.Equal(c.recurrent, want.recurrent) {
		t.Errorf("params %+v, want %+v", c, want)
	}
	if c.convChannels() != 256 || hp.nEmbd != 128 || hp.nHead != 4 || hp.nKVHead != 2 || hp.headDim != 32 || hp.nRot != 16 || hp.nFF != 256 {
		t.Errorf("conv channels %d, hparams %+v", c.convChannels(), hp)
	}
	if hp.eps != 1e-6 || hp.ropeBase != 1e6 {
		t.Errorf("eps %g, rope base %g", hp.eps, hp.ropeBase)
	}
}

// checkQwen35Run checks m's greedy continuation of prompt against llama.cpp's run for steps
// steps: the same tokens, every top-10 probability within tol, and within exactTol over the
// first exactSteps steps.
func checkQwen35Run(t *testing.T, what string, m *Qwen35, run llamaRun, steps int, tol, exactTol float64, exactSteps int) {
	t.Helper()
	first, diffs := qwen35Greedy(t, m, prompt, run, steps)
	judgeRun(t, what, first, diffs, tol, exactTol, exactSteps)
}

// judgeRun judges a greedy run against llama.cpp's (greedyMatch's or qwen35Greedy's first
// differing step and each agreeing step's largest top-10 probability difference): no step
// may differ, every difference be within tol, and the first exactSteps within exactTol.
func judgeRun(t *testing.T, what string, first int, diffs []float64, tol, exactTol float64, exactSteps int) {
	t.Helper()
	worst := slices.Max(append(diffs, 0))
	t.Logf("%s: %d steps agree; top-10 probabilities within %.2e", what, len(diffs), worst)
	if first >= 0 {
		t.Errorf("%s: step %d: token differs from llama.cpp's", what, first)
	}
	if worst > tol {
		t.Errorf("%s: top-10 probabilities differ from llama.cpp's by up to %.2e (tolerance %.0e)", what, worst, tol)
	}
	for i, d := range diffs[:min(exactSteps, len(diffs))] {
		if d > exactTol {
			t.Errorf("%s: step %d: top-10 probabilities differ by %.2e, want llama.cpp's arithmetic (%.0e)", what, i, d, exactTol)
		}
	}
}

// TestQwen35Keys checks the layer pattern's keys (attention.recurrent_layers over
// full_attention_interval, whose default is 4), nextn_predict_layers trimming the blocks run,
// and a missing ssm key refused.
func TestQwen35Keys(t *testing.T) {
	f := hybridModel(t, "qwen35-F32")
	u32 := func(k string, v uint32) gguf.KV { return gguf.KV{Key: "qwen35." + k, Type: gguf.TypeUint32, Value: v} }
	pattern := func(g *gguf.File) ([]bool, int, error) {
		hp, err := readHparams(g)
		if err != nil {
			return nil, 0, err
		}
		c, err := readQwen35(g, &hp)
		return c.recurrent, hp.nLayer, err
	}
	T, F := true, false
	flags := []bool{F, T, T, F, T, T, T, T}
	for _, c := range []struct {
		drop   []string
		add    []gguf.KV
		want   []bool
		layers int
	}{
		{[]string{"qwen35.full_attention_interval"}, nil, []bool{T, T, T, F, T, T, T, F}, 8},
		{[]string{"qwen35.full_attention_interval"}, []gguf.KV{u32("full_attention_interval", 2)}, []bool{T, F, T, F, T, F, T, F}, 8},
		{nil, []gguf.KV{{Key: "qwen35.attention.recurrent_layers", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeBool, Values: flags}}}, flags, 8},
		{nil, []gguf.KV{u32("nextn_predict_layers", 1)}, []bool{T, T, T, F, T, T, T}, 7},
	} {
		got, n, err := pattern(rewrite(t, f, c.drop, c.add...))
		if err != nil || !slices.Equal(got, c.want) || n != c.layers {
			t.Errorf("%v %v: recurrent %v, %d layers (%v), want %v, %d", c.drop, c.add, got, n, err, c.want, c.layers)
		}
	}
	if _, _, err := pattern(rewrite(t, f, []string{"qwen35.ssm.conv_kernel"})); err == nil || !strings.Contains(err.Error(), "ssm.conv_kernel") {
		t.Errorf("without ssm.conv_kernel: %v", err)
	}
}

// TestQwen35MatchesLlamaCpp checks the F32 qwen35 model against llama.cpp b10587. With a
// float32 cache and no flash attention (llama-server -fa off -ctk f32 -ctv f32:
// testdata/llamacpp/qwen35-F32.f32kv.json) llama.cpp's arithmetic is Qwen35's up to rounding:
// the same 32 greedy tokens, top-10 probabilities within 5e-5 (they agree to 1e-5). Against its
// default run (float16 cache, flash attention: models/hybrid/qwen35-F32.gguf.probs.json) plain
// float32 agrees to 1e-3 and with that rounding emulated to 4e-4.
func TestQwen35MatchesLlamaCpp(t *testing.T) {
	f := hybridModel(t, "qwen35-F32")
	f32kv := readRun(t, filepath.Join("testdata", "llamacpp", "qwen35-F32.f32kv.json"))
	def := readRun(t, shareddata.Path(t, "models", "hybrid", "qwen35-F32.gguf.probs.json"))
	plain, err := NewQwen35(f)
	if err != nil {
		t.Fatal(err)
	}
	f16, err := newQwen35(f, options{kvF16: true})
	if err != nil {
		t.Fatal(err)
	}
	checkQwen35Run(t, "float32 vs f32 cache", plain, f32kv, 32, 5e-5, 0, 0)
	checkQwen35Run(t, "float32 vs default", plain, def, 32, 5e-3, 0, 0)
	checkQwen35Run(t, "float16 cache vs default", f16, def, 32, 2e-3, 0, 0)
}

// TestQwen35IMRoPE checks the partial interleaved M-RoPE against llama.cpp on the F32 model
// with rope.freq_base 10 (testdata/llamacpp/qwen35-F32-base10.f32kv.json, -fa off -ctk f32
// -ctv f32), where every rotated pair turns visibly: with sections [4, 2, 2, 0] over 8 pairs
// the last pair's sector selects the fourth position component, 0 for text, so it does not
// turn (rotating it as NeoX RoPE would changes the 11th token).
func TestQwen35IMRoPE(t *testing.T) {
	f := hybridModel(t, "qwen35-F32")
	f = rewrite(t, f, []string{"qwen35.rope.freq_base"}, gguf.KV{Key: "qwen35.rope.freq_base", Type: gguf.TypeFloat32, Value: float32(10)})
	m, err := NewQwen35(f)
	if err != nil {
		t.Fatal(err)
	}
	run := readRun(t, filepath.Join("testdata", "llamacpp", "qwen35-F32-base10.f32kv.json"))
	checkQwen35Run(t, "rope base 10", m, run, 32, 5e-5, 0, 0)
}

// TestQwen35QuantizedMatchesLlamaCpp checks the Q8_0 and Q4_K_M files against llama.cpp's
// default runs with its rounding emulated (float16 cache, flash attention, products' inputs
// rounded to 8-bit blocks). On these random models the activations' rounding decides tokens:
// without it the greedy continuation leaves llama.cpp's at step 1 (Q8_0) or 2 (Q4_K_M). With
// it, Q4_K_M agrees to 3e-6 over all 32 steps; Q8_0 to 1e-6 over its first 13, after which a
// last-bit difference flips a rounding and the probabilities drift (up to 0.12), the tokens
// still llama.cpp's.
func TestQwen35QuantizedMatchesLlamaCpp(t *testing.T) {
	for _, c := range []struct {
		name       string
		tol        float64
		exactSteps int
	}{
		{"qwen35-Q8_0", 0.2, 12},
		{"qwen35-Q4_K_M", 1e-4, 32},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := hybridModel(t, c.name)
			run := readRun(t, shareddata.Path(t, "models", "hybrid", c.name+".gguf.probs.json"))
			m, err := newQwen35(f, options{kvF16: true, actQuant: true})
			if err != nil {
				t.Fatal(err)
			}
			checkQwen35Run(t, "llama.cpp rounding", m, run, 32, c.tol, 1e-5, c.exactSteps)
		})
	}
}

// TestQwen35ForwardMatchesSteps checks that Forward's logits are Qwen35's last step's, and that
// a state cloned after a prefix (a checkpoint) continues as the uninterrupted run does.
func TestQwen35ForwardMatchesSteps(t *testing.T) {
	f := hybridModel(t, "qwen35-F32")
	m, err := NewQwen35(f)
	if err != nil {
		t.Fatal(err)
	}
	toks := []int32{1, 403, 407, 261, 378, 298, 357, 328}
	want, err := m.Run(m.NewState(), toks)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Forward(f, toks)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want[len(want)-1]) {
		t.Errorf("Forward differs from the last step: rel err %.2e", cpuref.RelErr(got, want[len(want)-1]))
	}
	s := m.NewState()
	if _, err := m.Run(s, toks[:5]); err != nil {
		t.Fatal(err)
	}
	ck := s.Clone()
	if _, err := m.Run(s, []int32{300, 301}); err != nil { // a diverging continuation
		t.Fatal(err)
	}
	rest, err := m.Run(ck, toks[5:])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rest[len(rest)-1], want[len(want)-1]) {
		t.Errorf("run from the checkpoint differs from the uninterrupted run")
	}
}

// TestQwen35PrefixReuse checks the prompts of models/hybrid's prefix-reuse runs: llama-server
// continued the longer prompt from a recurrent-state checkpoint after 40 of its tokens and gave
// the fresh server's 24 tokens; so does a Qwen35 run (float16 cache, as llama-server's) from a
// state cloned after those 40 tokens, and the shorter prompt's run gives its 24.
func TestQwen35PrefixReuse(t *testing.T) {
	f := hybridModel(t, "qwen35-F32")
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	fresh := readPrefixRun(t, "qwen35-F32.prefix-b-fresh.json")
	a := readPrefixRun(t, "qwen35-F32.prefix-a.json")
	encode := func(p string) []int32 { return tk.Encode(strings.TrimPrefix(p, "<s> "), true, false) }
	pa, pb := encode(a.Prompt), encode(fresh.Prompt)
	if len(pa) != a.Evaluated || len(pb) != fresh.Evaluated {
		t.Fatalf("prompts of %d and %d tokens, llama.cpp's %d and %d", len(pa), len(pb), a.Evaluated, fresh.Evaluated)
	}
	m, err := newQwen35(f, options{kvF16: true})
	if err != nil {
		t.Fatal(err)
	}
	greedy := func(s *Qwen35State, logits []float32, n int) []int32 {
		var out []int32
		for range n {
			next := int32(argmax(logits))
			out = append(out, next)
			if logits, err = m.Step(s, next); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	s := m.NewState()
	if _, err := m.Run(s, pa[:40]); err != nil {
		t.Fatal(err)
	}
	ck := s.Clone() // the checkpoint llama-server restored
	rest, err := m.Run(s, pa[40:])
	if err != nil {
		t.Fatal(err)
	}
	if got := greedy(s, rest[len(rest)-1], len(a.Tokens)); !slices.Equal(got, a.Tokens) {
		t.Errorf("prompt a: %v, llama.cpp's %v", got, a.Tokens)
	}
	if !slices.Equal(pb[:40], pa[:40]) {
		t.Fatalf("the prompts' first 40 tokens differ")
	}
	rest, err = m.Run(ck, pb[40:])
	if err != nil {
		t.Fatal(err)
	}
	if got := greedy(ck, rest[len(rest)-1], len(fresh.Tokens)); !slices.Equal(got, fresh.Tokens) {
		t.Errorf("prompt b from the checkpoint: %v, llama.cpp's %v", got, fresh.Tokens)
	}
}

type prefixRun struct {
	Prompt    string  `json:"prompt"`
	Tokens    []int32 `json:"tokens"`
	Evaluated int     `json:"tokens_evaluated"`
}

func readPrefixRun(t *testing.T, name string) prefixRun {
	t.Helper()
	raw, err := os.ReadFile(shareddata.Path(t, "models", "hybrid", name))
	if err != nil {
		t.Fatal(err)
	}
	var r prefixRun
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSSMConvStep checks the conv with state against the written-out causal convolution of a
// whole sequence (inputs before the first taken as 0).
func TestSSMConvStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const K, C, T = 4, 5, 9
	w, xs := randVec(rng, C*K), randVec(rng, T*C)
	state := make([]float32, (K-1)*C)
	for tk := range T {
		got := SSMConvStep(state, w, xs[tk*C:(tk+1)*C], K)
		for c := range C {
			var want float64
			for i := range K {
				if src := tk - (K - 1) + i; src >= 0 {
					want += float64(w[c*K+i]) * float64(xs[src*C+c])
				}
			}
			if math.Abs(float64(got[c])-want) > 1e-6 {
				t.Fatalf("token %d channel %d: %g, want %g", tk, c, got[c], want)
			}
			for i := range K - 1 { // the state holds the last K-1 inputs, oldest first
				var v float32
				if src := tk - (K - 2) + i; src >= 0 {
					v = xs[src*C+c]
				}
				if state[c*(K-1)+i] != v {
					t.Fatalf("token %d channel %d: state %v", tk, c, state[c*(K-1):(c+1)*(K-1)])
				}
			}
		}
	}
}

// TestGatedDeltaStep checks the delta rule against its matrix form, S' = e^g S + k (beta (v -
// (e^g S)^T k))^T, o = S'^T q / sqrt(n), over a few steps; and that with g = 0, beta = 1 and
// a unit key the state then maps k to v exactly (the delta rule's write).
func TestGatedDeltaStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 8
	s := make([]float32, n*n) // s[j*n+i] = S[i][j]
	var S [n][n]float64
	for step := range 4 {
		q, k, v := randVec(rng, n), L2Norm(randVec(rng, n), n, 1e-6), randVec(rng, n)
		g, beta := -rng.Float32(), rng.Float32()
		out := make([]float32, n)
		GatedDeltaStep(s, q, k, v, g, beta, out)
		e := math.Exp(float64(g))
		var d [n]float64
		for j := range n {
			var sk float64
			for i := range n {
				S[i][j] *= e
				sk += S[i][j] * float64(k[i])
			}
			d[j] = float64(beta) * (float64(v[j]) - sk)
		}
		for i := range n {
			for j := range n {
				S[i][j] += float64(k[i]) * d[j]
			}
		}
		for j := range n {
			var o float64
			for i := range n {
				o += S[i][j] * float64(q[i])
				if math.Abs(float64(s[j*n+i])-S[i][j]) > 1e-5 {
					t.Fatalf("step %d: S[%d][%d] = %g, want %g", step, i, j, s[j*n+i], S[i][j])
				}
			}
			if want := o / math.Sqrt(n); math.Abs(float64(out[j])-want) > 1e-5 {
				t.Fatalf("step %d: out[%d] = %g, want %g", step, j, out[j], want)
			}
		}
	}
	k, v := L2Norm(randVec(rng, n), n, 1e-6), randVec(rng, n)
	out := make([]float32, n)
	GatedDeltaStep(s, k, k, v, 0, 1, out) // q = k: out = S'^T k / sqrt(n) = v / sqrt(n)
	for j := range n {
		if want := float64(v[j]) / math.Sqrt(n); math.Abs(float64(out[j])-want) > 1e-5 {
			t.Fatalf("write: out[%d] = %g, want %g", j, out[j], want)
		}
	}
}

// TestL2Norm checks rows scaled to unit length, and a row shorter than eps divided by eps.
func TestL2Norm(t *testing.T) {
	x := []float32{3, 4, 0, 0, 1e-7, 0}
	got := L2Norm(x, 2, 1e-6)
	want := []float32{0.6, 0.8, 0, 0, 0.1, 0}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-6 {
			t.Fatalf("L2Norm = %v, want %v", got, want)
		}
	}
}

// TestGatedRMSNorm checks the gated norm against its formula, head by head.
func TestGatedRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n, heads = 6, 3
	x, w, z := randVec(rng, n*heads), randVec(rng, n), randVec(rng, n*heads)
	got := GatedRMSNorm(x, w, z, n, 1e-6)
	for h := range heads {
		var ss float64
		for i := range n {
			ss += float64(x[h*n+i]) * float64(x[h*n+i])
		}
		r := 1 / math.Sqrt(ss/n+1e-6)
		for i := range n {
			zz := float64(z[h*n+i])
			want := float64(x[h*n+i]) * r * float64(w[i]) * zz / (1 + math.Exp(-zz))
			if math.Abs(float64(got[h*n+i])-want) > 1e-5 {
				t.Fatalf("head %d [%d]: %g, want %g", h, i, got[h*n+i], want)
			}
		}
	}
}

// TestIMRoPE checks the interleaved multi-section RoPE of a text token: with sections whose
// interleave covers every pair it is NeoX RoPE; with the test model's [4, 2, 2, 0] over 8
// pairs, pair 7's sector falls to the e component (position 0) and stays unturned.
func TestIMRoPE(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const heads, hd, nRot = 2, 32, 24 // 12 pairs
	x := randVec(rng, heads*hd)
	got, want := slices.Clone(x), slices.Clone(x)
	ropeIMRoPE(got, [4]int32{9, 9, 9, 0}, heads, hd, nRot, 1e4, 1, [4]int{4, 4, 4, 0})
	rope(want, []int32{9}, heads, hd, nRot, 1e4, 1, true, nil)
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > 1e-5 {
			t.Fatalf("[%d]: %g, NeoX RoPE's %g", i, got[i], want[i])
		}
	}
	comps := make([]int, 8)
	for d := range comps {
		comps[d] = imropeComponent(d, [4]int{4, 2, 2, 0})
	}
	if !slices.Equal(comps, []int{0, 1, 2, 0, 1, 2, 0, 3}) {
		t.Errorf("sections [4 2 2 0]: components %v", comps)
	}
	const rot16 = 16
	got, want = slices.Clone(x), slices.Clone(x)
	ropeIMRoPE(got, [4]int32{5, 5, 5, 0}, heads, hd, rot16, 1e6, 1, [4]int{4, 2, 2, 0})
	rope(want, []int32{5}, heads, hd, rot16, 1e6, 1, true, nil)
	for h := range heads {
		for d := range hd {
			i := h*hd + d
			ref := want[i]
			if d == 7 || d == 15 { // pair 7 (d, d+8): unturned
				ref = x[i]
			}
			if math.Abs(float64(got[i]-ref)) > 1e-5 {
				t.Fatalf("head %d [%d]: %g, want %g", h, d, got[i], ref)
			}
		}
	}
}

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}
