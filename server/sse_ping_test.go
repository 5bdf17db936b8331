package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// pingStall is how long the fake engine stalls before each result in the ping tests, and
// serverPing the server's --sse-ping-interval there: a ping falls between the first and the
// final event.
const (
	pingStall  = 400 * time.Millisecond
	serverPing = 150 * time.Millisecond
)

// streamBlocks splits an event stream into its blocks (what lies between blank lines) and
// counts the keep-alive pings, failing on a block that is neither a ping (":") nor lines of
// "event: NAME" and "data: JSON" (or [DONE]), or on a ping before the first event.
func streamBlocks(t *testing.T, body string) (events []string, pings int) {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	for _, block := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		if block == ":" {
			if len(events) == 0 {
				t.Errorf("a ping before the first event: %q", body)
			}
			pings++
			continue
		}
		for _, line := range strings.Split(block, "\n") {
			if _, ok := strings.CutPrefix(line, "event: "); ok {
				continue
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || (data != "[DONE]" && !json.Valid([]byte(data))) {
				t.Fatalf("malformed line %q in %q", line, body)
			}
		}
		events = append(events, block)
	}
	return events, pings
}

// TestSSEPing: on every streamed endpoint, an engine silent for longer than the server's
// --sse-ping-interval gets llama-server's keep-alive comment (":" then a blank line) between
// events, and the stream stays valid to its usual end; a request's sse_ping_interval (seconds)
// overrides the server's, 0 and -1 sending none.
func TestSSEPing(t *testing.T) {
	endpoints := []struct{ name, path, body, last string }{
		{"completion", "/completion", `{"prompt":"x","n_predict":1,"stream":true`, `"stop":true`},
		{"v1 completions", "/v1/completions", `{"prompt":"x","max_tokens":1,"stream":true`, "data: [DONE]"},
		{"chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":1,"stream":true`, "data: [DONE]"},
		{"anthropic", "/v1/messages", `{"messages":[{"role":"user","content":"x"}],"max_tokens":1,"stream":true`, "event: message_stop"},
		{"responses", "/v1/responses", `{"input":"x","max_output_tokens":1,"stream":true`, "event: response.completed"},
	}
	type pingCase struct {
		name, field string
		server      time.Duration // Config.SSEPingInterval
		stall       time.Duration
		wantPings   bool
	}
	run := func(t *testing.T, path, body, last string, tc pingCase) {
		t.Parallel()
		h := newHarnessConfig(t, Config{Alias: "stories260K", SSEPingInterval: tc.server})
		h.fake.delay = tc.stall
		rec := h.do(t, "POST", path, body+tc.field)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		events, pings := streamBlocks(t, rec.Body.String())
		if got := pings > 0; got != tc.wantPings {
			t.Errorf("%d pings, want some: %v\n%s", pings, tc.wantPings, rec.Body)
		}
		if len(events) < 2 || !strings.Contains(events[len(events)-1], last) {
			t.Errorf("the stream does not end with %q:\n%s", last, rec.Body)
		}
	}
	for _, ep := range endpoints {
		for _, tc := range []pingCase{
			{"server interval", "}", serverPing, pingStall, true},
			{"request 0", `,"sse_ping_interval":0}`, serverPing, pingStall, false},
		} {
			t.Run(ep.name+"/"+tc.name, func(t *testing.T) { run(t, ep.path, ep.body, ep.last, tc) })
		}
	}
	// The request's interval is in seconds, and -1 is off as 0 is.
	ep := endpoints[0]
	for _, tc := range []pingCase{
		{"request 1", `,"sse_ping_interval":1}`, -1, 1300 * time.Millisecond, true},
		{"request -1", `,"sse_ping_interval":-1}`, serverPing, pingStall, false},
		{"server off", "}", -1, pingStall, false},
	} {
		t.Run(ep.name+"/"+tc.name, func(t *testing.T) { run(t, ep.path, ep.body, ep.last, tc) })
	}
}

// TestSSEPingResumable: a resumable chat stream's pings go through its session, so the POST's
// relay (and any follower) receives them between events.
func TestSSEPingResumable(t *testing.T) {
	h := newHarnessConfig(t, Config{Alias: "stories260K", SSEPingInterval: serverPing})
	h.fake.delay = pingStall
	rec := h.doWith(t, "POST", "/v1/chat/completions",
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":1,"stream":true}`, conversation("ping"))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	events, pings := streamBlocks(t, rec.Body.String())
	if pings == 0 || events[len(events)-1] != "data: [DONE]" {
		t.Errorf("%d pings, last event %q:\n%s", pings, events[len(events)-1], rec.Body)
	}
}

// TestSSEPingRange: sse_ping_interval below -1 is refused with a 400 naming the field.
func TestSSEPingRange(t *testing.T) {
	h := newHarness(t)
	rec := h.do(t, "POST", "/completion", `{"prompt":"x","stream":true,"sse_ping_interval":-2}`)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "sse_ping_interval") {
		t.Errorf("status %d: %s", rec.Code, rec.Body)
	}
}
