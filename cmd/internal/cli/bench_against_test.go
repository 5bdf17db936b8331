package cli

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestBenchAgainst runs bench --against with the shared llama-bench of llama.cpp's Vulkan
// backend on stories260K (lavapipe, which it takes with GGML_VK_VISIBLE_DEVICES=0): each
// test has llama-bench's tokens/s beside ours and their ratio. (Every llama-bench run compiles
// its pipelines anew, some 10 s on lavapipe: one repetition.)
func TestBenchAgainst(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	lb := shareddata.Path(t, "llama.cpp", "llama-bench-vulkan")
	requireGPU(t)
	t.Setenv("GGML_VK_VISIBLE_DEVICES", "0")
	out := runOK(t, "bench", "-m", path, "-p", "16", "-n", "4", "-r", "1", "--against", lb, "--json")
	var res []benchResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench --against --json: %v\n%s", err, out)
	}
	if len(res) != 2 || res[0].Test != "pp16" || res[1].Test != "tg4" {
		t.Fatalf("bench --against tests %+v", res)
	}
	for _, r := range res {
		if r.AgainstTokensPerSecond <= 0 || r.AgainstStddev != 0 {
			t.Errorf("%s: llama-bench %v ± %v t/s from one run", r.Test, r.AgainstTokensPerSecond, r.AgainstStddev)
		}
		if want := r.TokensPerSecond / r.AgainstTokensPerSecond; math.Abs(r.AgainstRatio-want) > 1e-9*want {
			t.Errorf("%s: ratio %v, want %v", r.Test, r.AgainstRatio, want)
		}
	}
}

// TestBenchAgainstTable checks the side-by-side table and llama-bench's statistics over
// repetitions (mean, sample standard deviation, our rate over its).
func TestBenchAgainstTable(t *testing.T) {
	lb := &llamaBench{samples: map[string][]float64{"pp8": {90, 110}}}
	rs := []benchResult{{Model: "m.gguf", Test: "pp8", TokensPerSecond: 300, Stddev: 3}, {Model: "m.gguf", Test: "tg4", TokensPerSecond: 50}}
	for i := range rs {
		lb.fill(&rs[i])
	}
	if r := rs[0]; r.AgainstTokensPerSecond != 100 || math.Abs(r.AgainstStddev-math.Sqrt(200)) > 1e-9 || r.AgainstRatio != 3 {
		t.Errorf("pp8: %v ± %v, ratio %v", r.AgainstTokensPerSecond, r.AgainstStddev, r.AgainstRatio)
	}
	var b strings.Builder
	if err := writeAgainst(&b, rs); err != nil {
		t.Fatal(err)
	}
	want := " model  | test | wgpu-llama t/s | llama.cpp t/s  | ratio\n m.gguf | pp8  | 300.00 ± 3.00  | 100.00 ± 14.14 | 3.00×\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestBenchAgainstErrors checks bench --against's refusals: no model file, and a llama-bench
// that fails (its error is reported with the tool's path).
func TestBenchAgainstErrors(t *testing.T) {
	err := run(t.Context(), []string{"bench", "--against", "/bin/false"}, &strings.Builder{}, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "--against needs a model file") {
		t.Errorf("bench --against without -m: %v", err)
	}
	path := shareddata.Path(t, "models", "stories260K.gguf")
	requireGPU(t)
	err = run(t.Context(), []string{"bench", "-m", path, "-p", "8", "-n", "0", "-r", "1", "--against", "/bin/false"}, &strings.Builder{}, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "bench --against /bin/false") {
		t.Errorf("bench --against a failing tool: %v", err)
	}
}
