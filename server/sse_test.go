package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// sseEvents splits an event-stream body into the payloads of its `data: ` events, failing on
// anything that is not `data: PAYLOAD` followed by a blank line.
func sseEvents(t *testing.T, body string) []string {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		payload, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(payload, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		out = append(out, payload)
	}
	return out
}

// jsonEvents decodes every payload but a final [DONE].
func jsonEvents(t *testing.T, payloads []string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, p := range payloads {
		if p == "[DONE]" {
			continue
		}
		out = append(out, decodeJSON(t, []byte(p)))
	}
	return out
}

func wantStreamHeaders(t *testing.T, h http.Header) {
	t.Helper()
	if ct := h.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q, want text/event-stream", ct)
	}
	if v := h.Get("X-Accel-Buffering"); v != "no" {
		t.Errorf("X-Accel-Buffering = %q, want no", v)
	}
}

func TestCompletionStream(t *testing.T) {
	tests := []struct {
		name, body  string
		wantContent string
		wantStop    string
	}{
		{"limit", `{"prompt":"Once upon a time","n_predict":8,"stream":true}`, ", there was a little girl named Lily", "limit"},
		{"stop word held back", `{"prompt":"x","stream":true,"stop":["Lily"]}`, ", there was a little girl named ", "word"},
		{"eos", `{"prompt":"x","stream":true}`, ", there was a little girl named Lily. She loved to play\n", "eos"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			rec := h.do(t, "POST", "/completion", tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			wantStreamHeaders(t, rec.Header())
			payloads := sseEvents(t, rec.Body.String())
			if payloads[len(payloads)-1] == "[DONE]" {
				t.Error("native stream ends with [DONE]; llama-server sends none")
			}
			events := jsonEvents(t, payloads)
			var content strings.Builder
			for i, ev := range events {
				content.WriteString(ev["content"].(string))
				last := i == len(events)-1
				if ev["stop"] != last {
					t.Errorf("event %d: stop = %v", i, ev["stop"])
				}
				if !last && len(ev["tokens"].([]any)) != 1 {
					t.Errorf("event %d: tokens = %v, want one id", i, ev["tokens"])
				}
			}
			final := events[len(events)-1]
			if content.String() != tt.wantContent || final["stop_type"] != tt.wantStop || final["content"] != "" {
				t.Errorf("content %q stop_type %v final content %q, want %q %s and empty", content.String(), final["stop_type"], final["content"], tt.wantContent, tt.wantStop)
			}
			if final["generation_settings"].(map[string]any)["stream"] != true {
				t.Error("generation_settings.stream is not true")
			}
		})
	}
}

func TestChatStream(t *testing.T) {
	tests := []struct {
		name, body   string
		includeUsage bool
		wantContent  string
		wantFinish   string
	}{
		{"limit", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"stream":true}`, false, ", there was a", "length"},
		{"usage", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`, true, ", there was a", "length"},
		{"stop word", `{"messages":[{"role":"user","content":"Hi"}],"stream":true,"stop":"Lily"}`, false, ", there was a little girl named ", "stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			rec := h.do(t, "POST", "/v1/chat/completions", tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			wantStreamHeaders(t, rec.Header())
			payloads := sseEvents(t, rec.Body.String())
			if payloads[len(payloads)-1] != "[DONE]" {
				t.Fatalf("stream does not end with [DONE]: %q", payloads[len(payloads)-1])
			}
			events := jsonEvents(t, payloads)
			id := events[0]["id"]
			for i, ev := range events {
				if ev["id"] != id || ev["object"] != "chat.completion.chunk" {
					t.Errorf("event %d: id %v object %v", i, ev["id"], ev["object"])
				}
			}
			first, _ := json.Marshal(events[0]["choices"])
			if string(first) != `[{"delta":{"content":null,"role":"assistant"},"finish_reason":null,"index":0}]` {
				t.Errorf("first chunk choices = %s", first)
			}
			tail := events[len(events)-1]
			finish := tail
			if tt.includeUsage {
				finish = events[len(events)-2]
				if c := tail["choices"].([]any); len(c) != 0 || tail["usage"] == nil || tail["timings"] == nil {
					t.Errorf("usage chunk = %v", tail)
				}
				if _, ok := finish["timings"]; ok {
					t.Error("finish chunk has timings although a usage chunk follows")
				}
			} else if finish["timings"] == nil {
				t.Error("finish chunk has no timings")
			}
			fc := finish["choices"].([]any)[0].(map[string]any)
			if fc["finish_reason"] != tt.wantFinish || len(fc["delta"].(map[string]any)) != 0 {
				t.Errorf("finish choice = %v", fc)
			}
			var content strings.Builder
			for _, ev := range events[1:] {
				for _, c := range ev["choices"].([]any) {
					if s, ok := c.(map[string]any)["delta"].(map[string]any)["content"].(string); ok {
						content.WriteString(s)
					}
				}
			}
			if content.String() != tt.wantContent {
				t.Errorf("content = %q, want %q", content.String(), tt.wantContent)
			}
		})
	}
}

func TestStreamFailureAfterStart(t *testing.T) {
	for _, path := range []string{"/completion", "/v1/chat/completions"} {
		t.Run(path, func(t *testing.T) {
			h := newHarness(t)
			h.fake.failAfter, h.fake.finalErr = 2, errors.New("device lost")
			rec := h.do(t, "POST", path, `{"prompt":"x","messages":[{"role":"user","content":"x"}],"stream":true}`)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
			payloads := sseEvents(t, rec.Body.String())
			last := decodeJSON(t, []byte(payloads[len(payloads)-1]))
			e, ok := last["error"].(map[string]any)
			if !ok || e["type"] != "server_error" || !strings.Contains(e["message"].(string), "device lost") {
				t.Errorf("last event = %s, want an error event", payloads[len(payloads)-1])
			}
		})
	}
}

// TestClientDisconnect drops a streaming request mid-stream over a real connection and checks
// the engine sees its context cancelled.
func TestClientDisconnect(t *testing.T) {
	for _, path := range []string{"/completion", "/v1/chat/completions"} {
		t.Run(path, func(t *testing.T) {
			h := newHarness(t)
			h.fake.delay = 5 * time.Millisecond
			ts := httptest.NewServer(h.h)
			defer ts.Close()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := `{"prompt":"x","messages":[{"role":"user","content":"x"}],"n_predict":-1,"ignore_eos":true,"stream":true}`
			req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+path, strings.NewReader(body))
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			for range 3 { // a few events arrive, flushed one by one
				if _, err := r.ReadString('\n'); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			_, _ = io.Copy(io.Discard, r)
			select {
			case <-h.fake.cancelled:
			case <-time.After(5 * time.Second):
				t.Fatal("the engine's context was not cancelled after the client went away")
			}
		})
	}
}
