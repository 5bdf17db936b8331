package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// TestCandidatesNeeded checks when a request can sample from the GPU's candidates and how many
// it needs.
func TestCandidatesNeeded(t *testing.T) {
	greedy := func(f func(p *Params)) func(p *Params) {
		return func(p *Params) {
			p.Temperature = 0
			if f != nil {
				f(p)
			}
		}
	}
	tests := []struct {
		name string
		set  func(p *Params)
		want int
	}{
		{"defaults: top_k 40 first", nil, 40},
		{"n_probs above top_k", func(p *Params) { p.NProbs = 60 }, 60},
		{"top_k off", func(p *Params) { p.TopK = 0 }, 0},
		{"top_k above the kernel's limit", func(p *Params) { p.TopK = 300 }, 0},
		{"n_probs above the kernel's limit", func(p *Params) { p.NProbs = 300 }, 0},
		{"logit bias", func(p *Params) { p.LogitBias = []LogitBias{{Token: 3, Bias: 1}} }, 0},
		{"repeat penalty", func(p *Params) { p.RepeatPenalty = 1.1 }, 0},
		{"repeat penalty over no tokens", func(p *Params) { p.RepeatPenalty, p.RepeatLastN = 1.1, 0 }, 40},
		{"presence penalty", func(p *Params) { p.PresencePenalty = 0.5 }, 0},
		{"dry", func(p *Params) { p.DRYMultiplier = 0.8 }, 0},
		{"top_n_sigma", func(p *Params) { p.TopNSigma = 1 }, 0},
		{"mirostat", func(p *Params) { p.Mirostat = 2 }, 0},
		{"temperature before top_k", func(p *Params) { p.Samplers = []string{"temperature", "top_k"} }, 0},
		{"inactive top_p before top_k", func(p *Params) { p.Samplers, p.TopP = []string{"top_p", "top_k", "temperature"}, 1 }, 40},
		{"top_p before top_k", func(p *Params) { p.Samplers = []string{"top_p", "top_k", "temperature"} }, 0},
		{"infill before top_k", func(p *Params) { p.Samplers = []string{"infill", "top_k"} }, 40},
		{"no top_k in the chain", func(p *Params) { p.Samplers = []string{"top_p", "temperature"} }, 0},
		{"greedy", greedy(nil), 1},
		{"greedy with n_probs", greedy(func(p *Params) { p.NProbs = 5 }), 5},
		{"greedy ignores top_k, top_n_sigma", greedy(func(p *Params) { p.TopK, p.TopNSigma = 0, 1 }), 1},
		{"greedy with typical", greedy(func(p *Params) { p.TypicalP = 0.5 }), 0},
		{"greedy with xtc", greedy(func(p *Params) { p.XTCProbability = 0.5 }), 0},
		{"greedy with a penalty", greedy(func(p *Params) { p.FrequencyPenalty = 0.5 }), 0},
		{"greedy without temperature in the chain", greedy(func(p *Params) { p.Samplers = []string{"min_p"} }), 0},
	}
	for _, tc := range tests {
		s := newSampler(testParams(tc.set), nil, nil)
		if got := s.candidatesNeeded(); got != tc.want {
			t.Errorf("%s: %d candidates, want %d", tc.name, got, tc.want)
		}
	}
}

// TestReadbackModes checks which engines read back candidates: by default only those on GPU
// adapters (the barrier-free kernels are CPU adapters').
func TestReadbackModes(t *testing.T) {
	cpu, gpuDev := &gpu.Device{BarrierFree: true}, &gpu.Device{}
	for _, tc := range []struct {
		mode     Readback
		dev      *gpu.Device
		want     bool
		describe string
	}{
		{ReadbackAuto, gpuDev, true, "auto on a GPU"},
		{ReadbackAuto, cpu, false, "auto on a CPU adapter"},
		{ReadbackFullRows, gpuDev, false, "full rows on a GPU"},
		{ReadbackCandidates, cpu, true, "candidates on a CPU adapter"},
	} {
		if got := tc.mode.candidates(tc.dev); got != tc.want {
			t.Errorf("%s: candidates %v, want %v", tc.describe, got, tc.want)
		}
	}
}

// TestSampleTopMatchesFullRow runs two samplers with the same settings and seed, one on full
// rows of logits and one on the rows' best candidates (as the GPU returns them), over many
// steps, and checks they pick the same tokens and report the same n_probs. The rows are
// rounded to eighths, so ties straddle the top_k cut; every third step verifies a drafted
// token.
func TestSampleTopMatchesFullRow(t *testing.T) {
	tests := []struct {
		name string
		set  func(p *Params)
	}{
		{"defaults", nil},
		{"top_k only", func(p *Params) { p.TopP, p.MinP, p.Temperature = 1, 0, 1 }},
		{"top_k 1", func(p *Params) { p.TopK = 1 }},
		{"top_k at the limit", func(p *Params) { p.TopK, p.TopP, p.MinP = 256, 1, 0 }},
		{"top_p", func(p *Params) { p.TopP = 0.5 }},
		{"top_p min_keep", func(p *Params) { p.TopP, p.MinKeep = 0.1, 5 }},
		{"min_p", func(p *Params) { p.MinP = 0.2 }},
		{"typical", func(p *Params) { p.TypicalP = 0.7 }},
		{"xtc", func(p *Params) { p.XTCProbability, p.XTCThreshold = 0.5, 0.05 }},
		{"hot", func(p *Params) { p.Temperature = 1.5 }},
		{"dynatemp", func(p *Params) { p.DynatempRange, p.DynatempExponent = 0.5, 1.5 }},
		{"n_probs", func(p *Params) { p.NProbs = 10 }},
		{"n_probs above top_k", func(p *Params) { p.NProbs = 100 }},
		{"post-sampling n_probs", func(p *Params) { p.NProbs, p.PostSamplingProbs = 10, true }},
		{"greedy", func(p *Params) { p.Temperature = 0 }},
		{"greedy n_probs", func(p *Params) { p.Temperature, p.NProbs = 0, 7 }},
		{"greedy post-sampling n_probs", func(p *Params) { p.Temperature, p.NProbs, p.PostSamplingProbs = 0, 7, true }},
	}
	const nVocab = 3000
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams(tc.set)
			full, fast := newSampler(p, nil, nil), newSampler(p, nil, nil)
			k := fast.candidatesNeeded()
			if k == 0 {
				t.Fatal("the settings need full rows")
			}
			rng := rand.New(rand.NewPCG(5, 6))
			for step := range 200 {
				logits := make([]float32, nVocab)
				for i := range logits {
					logits[i] = float32(math.Round(rng.NormFloat64()*3*8) / 8)
				}
				want := full.sample(logits)
				got := fast.sampleTop(candidatesOf(logits, k))
				if got != want {
					t.Fatalf("step %d: picked %d from candidates, %d from the row", step, got, want)
				}
				full.accept(want)
				fast.accept(got)
				if p.NProbs > 0 {
					checkSameProbs(t, fmt.Sprintf("step %d", step), fast, full, p.NProbs)
				}
			}
		})
	}
}

// candidatesOf is what the GPU returns for a row: its best k and its log-sum-exp.
func candidatesOf(logits []float32, k int) *model.Candidates {
	ids, vals, lse := cpuref.TopK(logits, len(logits), k)
	return &model.Candidates{IDs: ids[0], Logits: vals[0], Max: vals[0][0], LogSumExp: lse[0]}
}

func checkSameProbs(t *testing.T, what string, fast, full *sampler, n int) {
	t.Helper()
	gotTop, gotP := fast.probs(n)
	wantTop, wantP := full.probs(n)
	if len(gotTop) != len(wantTop) {
		t.Fatalf("%s: %d probabilities, want %d", what, len(gotTop), len(wantTop))
	}
	if math.Abs(float64(gotP-wantP)) > 1e-5 {
		t.Errorf("%s: picked token's probability %g, want %g", what, gotP, wantP)
	}
	for i := range wantTop {
		if gotTop[i].ID != wantTop[i].ID || math.Abs(float64(gotTop[i].Prob-wantTop[i].Prob)) > 1e-5 {
			t.Fatalf("%s: n_probs[%d] = %+v, want %+v", what, i, gotTop[i], wantTop[i])
		}
	}
}

// TestBestByLogit: the partial selection behind n_probs returns what sorting the whole row
// would put first, ties going to the lower id, on rows full of ties.
func TestBestByLogit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 5, 40} {
		row := make([]float32, 300)
		for i := range row {
			row[i] = float32(rng.IntN(20)) / 4 // many equal logits
		}
		all := make([]candidate, len(row))
		for i, l := range row {
			all[i] = candidate{id: int32(i), logit: l}
		}
		slices.SortFunc(all, byLogit)
		if got := bestByLogit(row, n); !slices.Equal(got, all[:n]) {
			t.Errorf("n %d: %v, want %v", n, got, all[:n])
		}
	}
}
