package server

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

type capturedProb struct {
	ID      int32   `json:"id"`
	Token   string  `json:"token"`
	Bytes   []int   `json:"bytes"`
	Logprob float64 `json:"logprob"`
	Top     []struct {
		ID      int32   `json:"id"`
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
	} `json:"top_logprobs"`
}

// TestProbabilitiesMatchCaptures replays the n_probs and chat logprobs captures on the real
// engine: same tokens, same candidates, log-probabilities within 0.02 of llama-server's.
func TestProbabilitiesMatchCaptures(t *testing.T) {
	dir := shareddata.Path(t, "reference", "llama-server-wire", "server-default")
	b := enginetest.Load(t, "models", "stories260K.gguf")
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(b)
	h := &harness{srv: srv, h: srv.Handler()}
	for _, c := range []struct {
		capture, path, body string
		probs               func(map[string]any) any
	}{
		{"completion_nprobs", "/completion", `{"prompt":"Once upon a time","n_predict":2,"temperature":0,"n_probs":3}`,
			func(v map[string]any) any { return v["completion_probabilities"] }},
		{"chat_logprobs", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"temperature":0,"logprobs":true,"top_logprobs":2}`,
			func(v map[string]any) any { return lookup(t, v, "choices.0.logprobs.content") }},
	} {
		raw, err := os.ReadFile(dir + "/" + c.capture + ".body")
		if err != nil {
			t.Fatal(err)
		}
		var want, got []capturedProb
		remarshal(t, c.probs(decodeJSON(t, raw)), &want)
		rec := h.do(t, http.MethodPost, c.path, c.body)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", c.capture, rec.Code, rec.Body)
		}
		remarshal(t, c.probs(decodeJSON(t, rec.Body.Bytes())), &got)
		if len(got) != len(want) {
			t.Fatalf("%s: %d steps, want %d: %s", c.capture, len(got), len(want), rec.Body)
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.ID != w.ID || g.Token != w.Token || len(g.Top) != len(w.Top) || len(g.Bytes) != len(w.Bytes) || abs(g.Logprob-w.Logprob) > 0.02 {
				t.Errorf("%s step %d: got %+v, want %+v", c.capture, i, g, w)
				continue
			}
			for j := range w.Top {
				if g.Top[j].ID != w.Top[j].ID || g.Top[j].Token != w.Top[j].Token || abs(g.Top[j].Logprob-w.Top[j].Logprob) > 0.02 {
					t.Errorf("%s step %d candidate %d: got %+v, want %+v", c.capture, i, j, g.Top[j], w.Top[j])
				}
			}
		}
	}
}

func remarshal(t *testing.T, v any, dst any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
