package server

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// progressHarness serves stories260K evaluating prompts 2 tokens a pass, so a short prompt
// takes several progress events.
func progressHarness(t *testing.T) *harness {
	b := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 512, BatchSize: 2})
	srv := New(Config{Alias: "stories260K"}, testLogger())
	t.Cleanup(srv.Close)
	srv.SetBackend(b)
	return &harness{srv: srv, h: srv.Handler()}
}

// progressOf lists the prompt_progress objects of events, without time_ms, and checks that
// they come before any generated text.
func progressOf(t *testing.T, events []map[string]any, text func(map[string]any) string) []map[string]any {
	t.Helper()
	var out []map[string]any
	generated := false
	for _, ev := range events {
		p, ok := ev["prompt_progress"].(map[string]any)
		if !ok {
			generated = generated || text(ev) != ""
			continue
		}
		if generated {
			t.Errorf("progress after generated text: %v", ev)
		}
		if ms, ok := p["time_ms"].(float64); !ok || ms < 0 {
			t.Errorf("time_ms %v", p["time_ms"])
		}
		delete(p, "time_ms")
		out = append(out, p)
	}
	return out
}

// TestReturnProgress: a stream with return_progress gets llama-server's prompt_progress
// events — at the start, then after each prompt chunk — on /completion (with empty content
// and tokens) and on chat (a role delta carrying it); without a stream, or the field, none.
func TestReturnProgress(t *testing.T) {
	h := progressHarness(t)
	want := func(total int, processed ...int) []map[string]any {
		var out []map[string]any
		for _, p := range processed {
			out = append(out, map[string]any{"total": float64(total), "cache": 0.0, "processed": float64(p)})
		}
		return out
	}
	// "Once upon a time" is 5 tokens with BOS: chunks of 2, 2 and 1.
	rec := h.do(t, http.MethodPost, "/completion", `{"prompt":"Once upon a time","n_predict":3,"temperature":0,"stream":true,"return_progress":true,"cache_prompt":false}`)
	events := jsonEvents(t, sseEvents(t, rec.Body.String()))
	got := progressOf(t, events, func(ev map[string]any) string { s, _ := ev["content"].(string); return s })
	if !reflect.DeepEqual(got, want(5, 0, 2, 4, 5)) {
		t.Errorf("/completion progress %v", got)
	}
	for _, ev := range events[:4] {
		if ev["content"] != "" || len(ev["tokens"].([]any)) != 0 || ev["tokens_predicted"] != 0.0 || ev["tokens_evaluated"] != 5.0 || ev["stop"] != false {
			t.Errorf("progress event %v", ev)
		}
	}
	var text strings.Builder
	for _, ev := range events[4:] {
		text.WriteString(ev["content"].(string))
	}
	if text.String() != ", there was" {
		t.Errorf("text after the progress %q", text.String())
	}

	rec = h.do(t, http.MethodPost, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"temperature":0,"stream":true,"return_progress":true,"cache_prompt":false}`)
	events = jsonEvents(t, sseEvents(t, rec.Body.String()))
	delta := func(ev map[string]any) map[string]any {
		return ev["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
	}
	got = progressOf(t, events, func(ev map[string]any) string {
		if len(ev["choices"].([]any)) == 0 {
			return ""
		}
		s, _ := delta(ev)["content"].(string)
		return s
	})
	// The ChatML prompt of "Hi" is 42 tokens: a start event and 21 chunks.
	if !reflect.DeepEqual(got, want(42, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42)) {
		t.Errorf("chat progress %v", got)
	}
	if d := delta(events[0]); d["role"] != "assistant" || d["content"] != nil {
		t.Errorf("chat progress delta %v, want the role announcement", d)
	}

	for _, body := range []string{
		`{"prompt":"Once upon a time","n_predict":2,"stream":true}`,
		`{"prompt":"Once upon a time","n_predict":2,"return_progress":true}`,
	} {
		if rec := h.do(t, http.MethodPost, "/completion", body); strings.Contains(rec.Body.String(), "prompt_progress") {
			t.Errorf("%s: progress in %s", body, rec.Body)
		}
	}
}

// TestNIndentField: n_indent reaches the engine and must not be negative.
func TestNIndentField(t *testing.T) {
	h := newHarness(t)
	f := h.fake
	if rec := h.do(t, http.MethodPost, "/completion", `{"prompt":"def f():","n_indent":4,"n_predict":1}`); rec.Code != http.StatusOK || f.lastTask(t).Params.NIndent != 4 {
		t.Errorf("n_indent 4: %d %s, engine got %d", rec.Code, rec.Body, f.lastTask(t).Params.NIndent)
	}
	rec := h.do(t, http.MethodPost, "/completion", `{"prompt":"x","n_indent":-1}`)
	if want := `{"error":{"code":400,"message":"'n_indent' must be at least 0 (got -1)","type":"invalid_request_error"}}`; rec.Code != http.StatusBadRequest || rec.Body.String() != want {
		t.Errorf("n_indent -1: %d %s, want %s", rec.Code, rec.Body, want)
	}
}

// TestTimingsPerToken: with timings_per_token every event of a /completion stream carries the
// timings so far, as llama-server's: the first progress event before any prompt token is
// evaluated has none evaluated and no time; prompt_n then counts the evaluated tokens and
// time never goes back; the text events count the tokens generated. Without it only the last
// event has timings.
func TestTimingsPerToken(t *testing.T) {
	h := progressHarness(t)
	rec := h.do(t, http.MethodPost, "/completion", `{"prompt":"Once upon a time","n_predict":3,"temperature":0,"stream":true,"return_progress":true,"timings_per_token":true,"cache_prompt":false}`)
	events := jsonEvents(t, sseEvents(t, rec.Body.String()))
	var promptN, predictedN []float64
	lastMS := 0.0
	for i, ev := range events {
		tm, ok := ev["timings"].(map[string]any)
		if !ok {
			t.Fatalf("event %d has no timings: %v", i, ev)
		}
		if tm["prompt_ms"].(float64) < lastMS {
			t.Errorf("event %d: prompt_ms %v after %v", i, tm["prompt_ms"], lastMS)
		}
		lastMS = tm["prompt_ms"].(float64)
		promptN, predictedN = append(promptN, tm["prompt_n"].(float64)), append(predictedN, tm["predicted_n"].(float64))
	}
	first := events[0]["timings"].(map[string]any)
	if first["prompt_n"] != 0.0 || first["prompt_ms"] != 0.0 || first["predicted_n"] != 0.0 || first["predicted_ms"] != 0.0 {
		t.Errorf("first progress timings %v", first)
	}
	// Progress after 0, 2, 4, 5 prompt tokens, then 3 tokens generated and the final event.
	if want := []float64{0, 2, 4, 5, 5, 5, 5, 5}; !reflect.DeepEqual(promptN, want) {
		t.Errorf("prompt_n %v, want %v", promptN, want)
	}
	if want := []float64{0, 0, 0, 0, 1, 2, 3, 3}; !reflect.DeepEqual(predictedN, want) {
		t.Errorf("predicted_n %v, want %v", predictedN, want)
	}
	if settings := events[len(events)-1]["generation_settings"].(map[string]any); settings["timings_per_token"] != true {
		t.Errorf("generation_settings.timings_per_token %v", settings["timings_per_token"])
	}

	rec = h.do(t, http.MethodPost, "/completion", `{"prompt":"Once upon a time","n_predict":3,"temperature":0,"stream":true,"cache_prompt":false}`)
	events = jsonEvents(t, sseEvents(t, rec.Body.String()))
	for i, ev := range events[:len(events)-1] {
		if _, ok := ev["timings"]; ok {
			t.Errorf("event %d has timings without timings_per_token: %v", i, ev)
		}
	}
}
