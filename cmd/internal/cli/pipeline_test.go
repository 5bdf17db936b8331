package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%q: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// TestQuantizedQ8Greedy quantizes stories260K to Q8_0 with our quantizer and checks that the
// first 16 greedy tokens equal the F32 original's.
func TestQuantizedQ8Greedy(t *testing.T) {
	src := shareddata.Path(t, "models", "stories260K.gguf")
	requireGPU(t)
	q8 := filepath.Join(t.TempDir(), "q8.gguf")
	runOK(t, "quantize", src, q8, "Q8_0")
	args := []string{"-p", "Once upon a time", "-n", "16", "--temp", "0", "-c", "128"}
	want := runOK(t, append([]string{"complete", "-m", src}, args...)...)
	got := runOK(t, append([]string{"complete", "-m", q8}, args...)...)
	if got != want {
		t.Errorf("Q8_0: %q\nF32:  %q", got, want)
	}
}

// TestGenModelEveryType generates a small model of every type, inspects it and generates
// from it.
func TestGenModelEveryType(t *testing.T) {
	requireGPU(t)
	for _, typ := range []string{"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
		"Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K"} {
		t.Run(typ, func(t *testing.T) {
			path := genModel(t, "--preset", "tiny", "--type", typ, "--dim", "256", "--ff", "512", "--layers", "1")
			if out := runOK(t, "inspect", path); !strings.Contains(out, "blk.0.attn_q.weight") {
				t.Fatalf("inspect output lacks the tensor table:\n%s", out)
			}
			out := runOK(t, "complete", "-m", path, "-p", "Once upon a time", "-n", "4", "--temp", "0", "-c", "64")
			if !strings.HasPrefix(out, " Once upon a time") || len(out) <= len(" Once upon a time\n\n") {
				t.Errorf("complete output %q", out)
			}
		})
	}
}

// TestBench runs both bench tests briefly and checks the JSON shape.
func TestBench(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	requireGPU(t)
	out := runOK(t, "bench", "-m", path, "-p", "16", "-n", "8", "-r", "2", "--json")
	var res []map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if len(res) != 2 || res[0]["test"] != "pp16" || res[1]["test"] != "tg8" {
		t.Fatalf("bench tests %v", res)
	}
	for _, r := range res {
		for _, k := range []string{"tokens_per_second", "stddev", "gb_per_second"} {
			if v, ok := r[k].(float64); !ok || v < 0 || (k == "tokens_per_second" && v == 0) {
				t.Errorf("%v: %s = %v", r["test"], k, r[k])
			}
		}
		if s, _ := r["adapter"].(string); s == "" {
			t.Errorf("%v: no adapter", r["test"])
		}
		if v, _ := r["copy_gb_per_second"].(float64); v <= 0 {
			t.Errorf("%v: copy bandwidth %v", r["test"], r["copy_gb_per_second"])
		}
	}
	// The roofline: prompt processing in GFLOP/s (2 per parameter and token), generation as a
	// share of the copy bandwidth.
	if g, _ := res[0]["gflop_per_second"].(float64); math.Abs(g-2*res[0]["params"].(float64)*res[0]["tokens_per_second"].(float64)/1e9) > 1e-6*g || g == 0 {
		t.Errorf("pp16 GFLOP/s %v", res[0]["gflop_per_second"])
	}
	if s, _ := res[1]["roofline_share"].(float64); math.Abs(s-res[1]["gb_per_second"].(float64)/res[1]["copy_gb_per_second"].(float64)) > 1e-9 || s == 0 {
		t.Errorf("tg8 roofline share %v", res[1]["roofline_share"])
	}
	// At a depth, as llama-bench's -d: the tests run after 20 tokens in the cache.
	out = runOK(t, "bench", "-m", path, "-p", "8", "-n", "4", "-d", "20", "-r", "1", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 2 || res[0]["test"] != "pp8 @ d20" || res[1]["test"] != "tg4 @ d20" {
		t.Fatalf("bench -d 20: %v %v\n%s", err, res, out)
	}
	// With an adapter each test also runs as "+lora", interleaved with the base, counting the
	// adapter's weights and reporting its cost relative to the base.
	adapter := shareddata.Path(t, "models", "lora", "stories260K-lora-A-F32.gguf")
	out = runOK(t, "bench", "-m", path, "-p", "8", "-n", "4", "-r", "3", "--lora", adapter, "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 4 || res[1]["test"] != "pp8 +lora" || res[3]["test"] != "tg4 +lora" {
		t.Fatalf("bench --lora: %v %v\n%s", err, res, out)
	}
	for i, r := range res {
		ratio, _ := r["base_time_ratio"].(float64)
		if (i%2 == 1) != (ratio > 0) || (i%2 == 1) != (r["size_bytes"].(float64) > res[0]["size_bytes"].(float64)) {
			t.Errorf("bench --lora %v: base_time_ratio %v, size_bytes %v", r["test"], r["base_time_ratio"], r["size_bytes"])
		}
	}
	table := runOK(t, "bench", "-m", path, "-p", "8", "-n", "4", "-r", "1", "--profile")
	for _, want := range []string{"pp8", "% of copy", "GFLOP/s", "device copy bandwidth:", "pp8, one pass by kernel family (", "tg (one token)", " matvec ", " attention_lanes ", " attention ", " total "} {
		if !strings.Contains(table, want) {
			t.Errorf("bench --profile lacks %q:\n%s", want, table)
		}
	}
}

// TestCompleteEveryArch generates a small model of each architecture and completes with it.
func TestCompleteEveryArch(t *testing.T) {
	requireGPU(t)
	for _, arch := range []string{"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			path := genModel(t, "--preset", "tiny", "--arch", arch, "--type", "Q8_0", "--ff", "192")
			out := runOK(t, "complete", "-m", path, "-p", "Once upon a time", "-n", "6", "--temp", "0", "-c", "64")
			if !strings.HasPrefix(out, " Once upon a time") || len(out) <= len(" Once upon a time\n\n") {
				t.Errorf("complete output %q", out)
			}
		})
	}
}

// TestEmbedBert generates a BERT model and prints its embedding: one line, n_embd values of a
// unit vector. A decoder model (no pooling_type: none) prints one line per token, or one with
// --pooling; rank and unknown poolings are refused.
func TestEmbedBert(t *testing.T) {
	requireGPU(t)
	path := genModel(t, "--preset", "tiny", "--arch", "bert", "--kv-heads", "4")
	out := runOK(t, "embed", "-m", path, "-p", "Once upon a time")
	fields := strings.Fields(strings.TrimPrefix(out, "embedding 0:"))
	if !strings.HasPrefix(out, "embedding 0:") || len(fields) != 64 {
		t.Fatalf("embed output %q", out)
	}
	var ss float64
	for _, f := range fields {
		var v float64
		if _, err := fmt.Sscan(f, &v); err != nil {
			t.Fatal(err)
		}
		ss += v * v
	}
	if ss < 0.99 || ss > 1.01 {
		t.Errorf("embedding norm² %.4f, want 1", ss)
	}
	decoder := genModel(t, "--preset", "tiny")
	if out := runOK(t, "embed", "-m", decoder, "-p", "Once upon a time"); strings.Count(out, "\n") < 3 || !strings.Contains(out, "\nembedding 2:") {
		t.Errorf("decoder, pooling none: %q, want a line per token", out)
	}
	if out := runOK(t, "embed", "-m", decoder, "-p", "Once upon a time", "--pooling", "last", "--embd-normalize", "-1"); strings.Count(out, "\n") != 1 {
		t.Errorf("decoder, pooling last: %q, want one line", out)
	}
	for _, c := range []struct{ pooling, want string }{
		{"rank", "rank pooling scores a query and a document"},
		{"max", `--pooling: pooling "max" not supported`},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"embed", "-m", decoder, "-p", "x", "--pooling", c.pooling}, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--pooling %s: %v, want %q", c.pooling, err, c.want)
		}
	}
}
