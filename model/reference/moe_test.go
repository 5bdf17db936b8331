package reference

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// llamaRun is llama-server's /completion answer recorded beside a model in models/moe/: the
// greedy continuation of prompt and llama.cpp's top-10 log-probabilities at every step.
type llamaRun struct {
	Tokens []int32 `json:"tokens"`
	Probs  []struct {
		Top []struct {
			ID      int     `json:"id"`
			LogProb float64 `json:"logprob"`
		} `json:"top_logprobs"`
	} `json:"completion_probabilities"`
}

func readRun(t *testing.T, path string) llamaRun {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r llamaRun
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Tokens) == 0 || len(r.Probs) != len(r.Tokens) {
		t.Fatalf("%s: %d tokens, %d steps of probabilities", path, len(r.Tokens), len(r.Probs))
	}
	return r
}

// greedyMatch runs forward's greedy continuation of prompt for llama.cpp's first steps
// (recomputing every token at every step) and returns the first step whose token differs from
// llama.cpp's (-1: none) and, for each step before it, the largest difference between its
// softmax probability and llama.cpp's over llama.cpp's top-10 tokens.
func greedyMatch(t *testing.T, f *gguf.File, run llamaRun, steps int, forward func(*gguf.File, []int32) ([]float32, error)) (first int, diffs []float64) {
	t.Helper()
	ctx := slices.Clone(prompt)
	for i := range min(steps, len(run.Tokens)) {
		logits, err := forward(f, ctx)
		if err != nil {
			t.Fatal(err)
		}
		lp := logSoftmax(logits)
		next := argmax(logits)
		if int32(next) != run.Tokens[i] {
			t.Logf("step %d: token %d (p %.4f), llama.cpp's %d (p %.4f here, %.4f there)", i, next, math.Exp(lp[next]),
				run.Tokens[i], math.Exp(lp[run.Tokens[i]]), math.Exp(run.Probs[i].Top[0].LogProb))
			return i, diffs
		}
		var d float64
		for _, top := range run.Probs[i].Top {
			d = max(d, math.Abs(math.Exp(lp[top.ID])-math.Exp(top.LogProb)))
		}
		diffs = append(diffs, d)
		ctx = append(ctx, int32(next))
	}
	return -1, diffs
}

// moeModel opens models/moe/NAME.gguf, or generates qwen2moe-F32 (qwen2moeFile).
func moeModel(t *testing.T, name string) *gguf.File {
	t.Helper()
	if name == "qwen2moe-F32" {
		f, err := gguf.Parse(qwen2moeFile(t))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	return open(t, shareddata.Path(t, "models", "moe", name+".gguf"))
}

// TestMoEMatchesLlamaCpp checks Forward on the F32 Mixture-of-Experts models against
// llama.cpp b10587 run with a float32 cache and without flash attention (llama-server -fa off
// -ctk f32 -ctv f32: testdata/llamacpp/*.f32kv.json), where its arithmetic is Forward's up to
// rounding: the same 32 greedy tokens, and every top-10 probability within 1e-4 (they agree
// to 2e-5).
func TestMoEMatchesLlamaCpp(t *testing.T) {
	for _, name := range []string{"qwen3moe-F32", "llamamoe-F32", "gptoss-F32", "qwen2moe-F32"} {
		t.Run(name, func(t *testing.T) {
			f := moeModel(t, name)
			run := readRun(t, filepath.Join("testdata", "llamacpp", name+".f32kv.json"))
			first, diffs := greedyMatch(t, f, run, len(run.Tokens), Forward)
			worst := slices.Max(append(diffs, 0))
			t.Logf("%d steps; top-10 probabilities within %.2e", len(diffs), worst)
			if first >= 0 {
				t.Errorf("step %d: token differs from llama.cpp's", first)
			}
			if worst > 1e-4 {
				t.Errorf("top-10 probabilities differ from llama.cpp's by up to %.2e", worst)
			}
		})
	}
}

// TestMoEMatchesLlamaCppDefault checks the models against llama.cpp's runs with its default
// float16 cache and flash attention (models/moe/*.probs.json, and testdata's for qwen2moe).
// These differ from Forward's float32 arithmetic enough to move probabilities by up to 0.07 on
// these random models, whose outputs amplify any rounding, so the F32 files are checked twice:
// Forward for the same 32 tokens within 0.1, and forwardLlamaCpp, which rounds as llama.cpp
// does, within 1e-2. The quantized files, whose products llama.cpp computes on 8-bit rounded
// activations, run forwardLlamaCppQuant: its first 3 steps agree to 1e-5 (llama.cpp's
// arithmetic reproduced), then one last-bit difference somewhere flips a rounding and the
// outputs drift; so 8 tokens are checked, their probabilities within 0.05. MXFP4 files wait
// for gguf to decode MXFP4; their products' exactness is not required.
func TestMoEMatchesLlamaCppDefault(t *testing.T) {
	for _, c := range []struct {
		name      string
		steps     int
		quantized bool
		ref       string // the recorded run, when not models/moe/NAME.gguf.probs.json
	}{
		{name: "qwen3moe-F32", steps: 32},
		{name: "llamamoe-F32", steps: 32},
		{name: "gptoss-F32", steps: 32},
		{name: "qwen2moe-F32", steps: 32, ref: filepath.Join("testdata", "llamacpp", "qwen2moe-F32.json")},
		{name: "qwen3moe-Q8_0", steps: 8, quantized: true},
		{name: "qwen3moe-Q4_K_M", steps: 8, quantized: true},
		{name: "qwen3moe256-Q4_K_M", steps: 8, quantized: true},
		{name: "llamamoe-Q8_0", steps: 8, quantized: true},
		{name: "llamamoe-Q4_K_M", steps: 8, quantized: true},
		{name: "qwen3moe-MXFP4_MOE", steps: 8, quantized: true},
		{name: "llamamoe-MXFP4_MOE", steps: 8, quantized: true},
		{name: "gptoss-MXFP4_MOE", steps: 8, quantized: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := moeModel(t, c.name)
			if err := decodable(f); err != nil {
				t.Skipf("gguf cannot decode it yet: %v", err)
			}
			ref := c.ref
			if ref == "" {
				ref = shareddata.Path(t, "models", "moe", c.name+".gguf.probs.json")
			}
			run := readRun(t, ref)
			check := func(what string, forward func(*gguf.File, []int32) ([]float32, error), tol, exactTol float64, exactSteps int) {
				first, diffs := greedyMatch(t, f, run, c.steps, forward)
				judgeRun(t, what, first, diffs, tol, exactTol, exactSteps)
			}
			if !c.quantized {
				check("Forward", Forward, 0.1, 0, 0)
				check("forwardLlamaCpp", forwardLlamaCpp, 1e-2, 0, 0)
				return
			}
			exact := 3
			if strings.Contains(c.name, "MXFP4") {
				exact = 0
			}
			check("forwardLlamaCppQuant", forwardLlamaCppQuant, 0.05, 1e-5, exact)
		})
	}
}

// decodable says whether gguf.Dequantize decodes every tensor type of f.
func decodable(f *gguf.File) error {
	var errs []error
	seen := map[gguf.GGMLType]bool{}
	for _, ti := range f.Tensors {
		if seen[ti.Type] {
			continue
		}
		seen[ti.Type] = true
		n := ti.NumElements()
		if err := gguf.Dequantize(ti.Type, f.TensorData(&ti), make([]float32, n)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
