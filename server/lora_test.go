package server

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// loraServer serves stories260K with the reference's adapters as llama-server ran them.
func loraServer(t *testing.T, kvF32 bool, files ...string) *httptest.Server {
	t.Helper()
	dir := shareddata.Path(t, "models", "lora")
	var specs []engine.LoraSpec
	for _, f := range files {
		specs = append(specs, engine.LoraSpec{Path: filepath.Join(dir, f), Scale: 1})
	}
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 2048, Slots: 4, KVF32: kvF32, Lora: specs})
	srv := New(Config{}, testLogger())
	srv.SetBackend(e)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	return ts
}

// loraStep is one recorded exchange of the reference's server scenarios.
type loraStep struct {
	Request struct {
		Method, Path string
		Body         json.RawMessage
	}
	Status   int
	Response json.RawMessage
}

func readLoraSteps(t *testing.T, sub string) map[string]loraStep {
	t.Helper()
	dir := filepath.Join(shareddata.Path(t, "models", "lora"), "refs", "server", sub)
	names, err := filepath.Glob(dir + "/[0-9][0-9]*_*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("no steps in %s: %v", dir, err)
	}
	out := map[string]loraStep{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		var s loraStep
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		out[strings.TrimSuffix(filepath.Base(n), ".json")] = s
	}
	return out
}

// completionOf is what a /completion answer is compared by.
type completionOf struct {
	Content  string `json:"content"`
	Settings struct {
		Lora []struct {
			ID    int     `json:"id"`
			Scale float64 `json:"scale"`
		} `json:"lora"`
	} `json:"generation_settings"`
	Probs []struct {
		Top []struct {
			ID      int     `json:"id"`
			Logprob float64 `json:"logprob"`
		} `json:"top_logprobs"`
	} `json:"completion_probabilities"`
}

// probGap is the largest difference of the top probabilities two answers share by id.
func probGap(a, b completionOf) float64 {
	gap := 0.0
	for i := range min(len(a.Probs), len(b.Probs)) {
		for _, x := range a.Probs[i].Top {
			for _, y := range b.Probs[i].Top {
				if x.ID == y.ID {
					gap = max(gap, math.Abs(math.Exp(x.Logprob)-math.Exp(y.Logprob)))
				}
			}
		}
	}
	return gap
}

// replay runs a scenario's steps in order against ts and compares each answer with
// llama-server's: status, error bodies, /lora-adapters (paths by file name), and a
// completion's text, echoed lora list and top probabilities (within tol). Where llama-server
// reused rows cached under other adapters (the STALE steps) the clean step given in clean is
// the reference instead.
func replay(t *testing.T, ts *httptest.Server, steps map[string]loraStep, clean map[string]string, tol float64) {
	names := make([]string, 0, len(steps))
	for n := range steps {
		names = append(names, n)
	}
	sort.Strings(names)
	base := regexp.MustCompile(`"path":"[^"]*/`)
	for _, name := range names {
		st := steps[name]
		var status int
		var body []byte
		if st.Request.Method == "GET" {
			s, b := get(t, ts.URL+st.Request.Path)
			status, body = s, []byte(base.ReplaceAllString(b, `"path":"`))
		} else {
			status, body = postJSON(t, ts.URL+st.Request.Path, st.Request.Body)
		}
		if status != st.Status {
			t.Errorf("%s: HTTP %d, llama-server %d: %s", name, status, st.Status, body)
			continue
		}
		if st.Request.Path != "/completion" || status != 200 {
			if !jsonEqual(body, st.Response) {
				t.Errorf("%s: %s\nllama-server: %s", name, body, st.Response)
			}
			continue
		}
		want := st
		if c, ok := clean[name[:2]]; ok {
			want = steps[c]
		}
		var got, ref completionOf
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		json.Unmarshal(want.Response, &ref)
		var echoed completionOf // the echo is the request's own
		json.Unmarshal(st.Response, &echoed)
		if got.Content != ref.Content || fmt.Sprint(got.Settings.Lora) != fmt.Sprint(echoed.Settings.Lora) {
			t.Errorf("%s: %q lora %v\nllama-server: %q lora %v", name, got.Content, got.Settings.Lora, ref.Content, echoed.Settings.Lora)
		}
		if g := probGap(got, ref); g > tol {
			t.Errorf("%s: top probabilities %.2g from llama-server's", name, g)
		}
	}
}

// llama-server's whole LoRA scenario on adapters A and B (per-request scales, bad fields,
// GET and POST /lora-adapters, cached prompts across adapter changes) gives its answers, with
// the clean text where it reused stale rows; probabilities within 2e-3 (f16 KV).
func TestLoraMatchesLlamaServer(t *testing.T) {
	ts := loraServer(t, false, "stories260K-lora-A-F32.gguf", "stories260K-lora-B-F32.gguf")
	replay(t, ts, readLoraSteps(t, ""), map[string]string{"26": "02_completion_no_lora_field_fresh", "29": "02_completion_no_lora_field_fresh", "32": "05_completion_lora_A_0.5"}, 2e-3)
}

// With an f32 KV cache, as llama-server's -ctk f32 -ctv f32 references, the probabilities
// agree within 1e-4 (3e-6 measured) for the F32 adapters, C without alpha among them. A in
// F16 is 1.2e-4 off: its products round their activations to halves, and llama.cpp's CPU
// there differs from exact arithmetic by 1.5e-4 itself (the reference's numpy cross-check),
// so it is held to 2e-4.
func TestLoraF32KV(t *testing.T) {
	replay(t, loraServer(t, true, "stories260K-lora-A-F32.gguf", "stories260K-lora-B-F32.gguf"), readLoraSteps(t, "f32kv"), nil, 1e-4)
	ts := loraServer(t, true, "stories260K-lora-A-F16.gguf", "stories260K-lora-C-noalpha-F32.gguf")
	steps := readLoraSteps(t, "f32kv_extra")
	c := "02_completion_lora_C_1.0"
	replay(t, ts, map[string]loraStep{c: steps[c]}, nil, 1e-4)
	delete(steps, c)
	replay(t, ts, steps, nil, 2e-4)
}
