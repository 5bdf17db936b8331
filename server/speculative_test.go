package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// TestSpeculativeTimings runs /completion and chat on an engine where stories260K drafts for
// itself: timings carry draft_n and draft_n_accepted (all drafts accepted), generation_settings
// names the method, and speculative.n_max 0 drafts nothing, which drops the two fields as
// llama-server does. Without speculative decoding the fields are absent.
func TestSpeculativeTimings(t *testing.T) {
	spec := engine.DefaultSpecConfig()
	spec.DraftModel = "models/stories260K.gguf"
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(enginetest.LoadSpec(t, 1, spec, "models", "stories260K.gguf"))
	h := &harness{srv: srv, h: srv.Handler()}
	post := func(path, body string) map[string]any {
		t.Helper()
		rec := h.do(t, http.MethodPost, path, body)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", path, rec.Code, rec.Body)
		}
		return decodeJSON(t, rec.Body.Bytes())
	}

	res := post("/completion", `{"prompt":"Once upon a time","n_predict":32,"temperature":0}`)
	tm := res["timings"].(map[string]any)
	if n, _ := tm["draft_n"].(float64); n <= 0 || tm["draft_n_accepted"] != n {
		t.Errorf("completion timings: draft_n %v, draft_n_accepted %v", tm["draft_n"], tm["draft_n_accepted"])
	}
	if got := res["generation_settings"].(map[string]any)["speculative.types"]; got != "draft-simple" {
		t.Errorf("generation_settings speculative.types %v, want draft-simple", got)
	}
	if !strings.HasPrefix(res["content"].(string), ", there was a little girl named Lily") {
		t.Errorf("content %q", res["content"])
	}

	chat := post("/v1/chat/completions", `{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":24,"temperature":0}`)
	if n, _ := lookup(t, chat, "timings.draft_n").(float64); n <= 0 {
		t.Errorf("chat timings: draft_n %v", n)
	}

	off := post("/completion", `{"prompt":"Once upon a time","n_predict":16,"temperature":0,"speculative.n_max":0}`)
	if _, ok := off["timings"].(map[string]any)["draft_n"]; ok {
		t.Errorf("speculative.n_max 0: timings still report draft_n: %v", off["timings"])
	}

	plain := newHarness(t)
	rec := plain.do(t, http.MethodPost, "/completion", `{"prompt":"Once","n_predict":4}`)
	if strings.Contains(rec.Body.String(), "draft_n") {
		t.Errorf("without speculative decoding the timings report drafts: %s", rec.Body)
	}
}
