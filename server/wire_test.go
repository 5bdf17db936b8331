package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// capture is one exchange recorded from llama-server (shared/reference/llama-server-wire).
type capture struct {
	method, path string
	body         string
	status       int
	header       http.Header
	respBody     []byte
}

func loadCapture(t *testing.T, name string) capture {
	t.Helper()
	return loadCaptureIn(t, "server-default", name)
}

// loadCaptureIn loads a capture of the server started as set says (server-default or
// server-embeddings; see the captures' README).
func loadCaptureIn(t *testing.T, set, name string) capture {
	t.Helper()
	dir := filepath.Dir(shareddata.Path(t, "reference", "llama-server-wire", set, name+".body"))
	read := func(suffix string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name+suffix))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	var c capture
	first, body, _ := strings.Cut(string(read(".request.txt")), "\n")
	c.method, c.path, _ = strings.Cut(first, " ")
	c.body = strings.TrimSuffix(body, "\n")

	c.header = http.Header{}
	lines := strings.Split(strings.TrimRight(string(read(".headers.txt")), "\r\n"), "\n")
	if _, err := fmt.Sscanf(lines[0], "HTTP/1.1 %d", &c.status); err != nil {
		t.Fatalf("%s: status line %q: %v", name, lines[0], err)
	}
	for _, l := range lines[1:] {
		if k, v, ok := strings.Cut(strings.TrimRight(l, "\r"), ":"); ok {
			c.header.Add(k, strings.TrimSpace(v))
		}
	}
	c.respBody = read(".body")
	return c
}

// jsonKind names a decoded JSON value's type.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// compareShape reports where got differs from want in key sets or value types, recursively;
// values themselves are not compared. Arrays compare their first elements when both have one.
func compareShape(t *testing.T, path string, want, got any) {
	t.Helper()
	if jsonKind(want) != jsonKind(got) {
		t.Errorf("%s: %s, llama-server has %s", path, jsonKind(got), jsonKind(want))
		return
	}
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		var missing, extra []string
		for k := range w {
			if _, ok := g[k]; !ok {
				missing = append(missing, k)
			}
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				extra = append(extra, k)
			}
		}
		sort.Strings(missing)
		sort.Strings(extra)
		if len(missing) > 0 || len(extra) > 0 {
			t.Errorf("%s: missing keys %q, extra keys %q", path, missing, extra)
		}
		for k, wv := range w {
			if gv, ok := g[k]; ok {
				compareShape(t, path+"."+k, wv, gv)
			}
		}
	case []any:
		g := got.([]any)
		if len(w) > 0 && len(g) > 0 {
			compareShape(t, path+"[0]", w[0], g[0])
		}
	}
}

func decodeAny(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	return v
}

// chatEventKind classifies an OpenAI stream event: role, content, finish, usage or done.
func chatEventKind(t *testing.T, payload string) string {
	if payload == "[DONE]" {
		return "done"
	}
	ev := decodeAny(t, []byte(payload)).(map[string]any)
	choices, _ := ev["choices"].([]any)
	if len(choices) == 0 {
		return "usage"
	}
	c := choices[0].(map[string]any)
	if c["finish_reason"] != nil {
		return "finish"
	}
	if _, ok := c["delta"].(map[string]any)["role"]; ok {
		return "role"
	}
	return "content"
}

// compareChatStream compares event kinds in order and the shape of each kind. Runs of content
// events are collapsed unless real, when the events and the text must be llama-server's.
func compareChatStream(t *testing.T, want, got []string, real bool) {
	t.Helper()
	kinds := func(events []string) ([]string, map[string]string) {
		var seq []string
		first := map[string]string{}
		for _, e := range events {
			k := chatEventKind(t, e)
			if _, ok := first[k]; !ok {
				first[k] = e
			}
			if real || len(seq) == 0 || seq[len(seq)-1] != k || k != "content" {
				seq = append(seq, k)
			}
		}
		return seq, first
	}
	if real {
		if w, g := chatStreamText(t, want), chatStreamText(t, got); w != g {
			t.Errorf("streamed text %q, llama-server streams %q", g, w)
		}
	}
	wantSeq, wantFirst := kinds(want)
	gotSeq, gotFirst := kinds(got)
	if strings.Join(wantSeq, " ") != strings.Join(gotSeq, " ") {
		t.Fatalf("event sequence %v, llama-server sends %v", gotSeq, wantSeq)
	}
	for k, w := range wantFirst {
		if k != "done" {
			compareShape(t, k+" event", decodeAny(t, []byte(w)), decodeAny(t, []byte(gotFirst[k])))
		}
	}
}

// compareCompletionStream compares a native stream: partial events, then one final event;
// when real, also the events' texts.
func compareCompletionStream(t *testing.T, want, got []string, real bool) {
	t.Helper()
	if real {
		texts := func(events []string) []string {
			var out []string
			for _, e := range events {
				out = append(out, decodeAny(t, []byte(e)).(map[string]any)["content"].(string))
			}
			return out
		}
		if w, g := texts(want), texts(got); strings.Join(w, "|") != strings.Join(g, "|") {
			t.Errorf("event texts %q, llama-server sends %q", g, w)
		}
	}
	if got[len(got)-1] == "[DONE]" {
		t.Error("native stream ends with [DONE]; llama-server sends none")
	}
	if len(got) < 2 {
		t.Fatalf("%d events, want partial events and a final one", len(got))
	}
	compareShape(t, "partial event", decodeAny(t, []byte(want[0])), decodeAny(t, []byte(got[0])))
	compareShape(t, "final event", decodeAny(t, []byte(want[len(want)-1])), decodeAny(t, []byte(got[len(got)-1])))
}

// chatStreamText concatenates the content deltas of an OpenAI stream.
func chatStreamText(t *testing.T, events []string) string {
	var sb strings.Builder
	for _, e := range events {
		if e == "[DONE]" {
			continue
		}
		for _, c := range decodeAny(t, []byte(e)).(map[string]any)["choices"].([]any) {
			if s, ok := c.(map[string]any)["delta"].(map[string]any)["content"].(string); ok {
				sb.WriteString(s)
			}
		}
	}
	return sb.String()
}

// TestWireFormat replays llama-server's captured requests and compares our responses with its:
// status, content type, JSON key sets and value types (not timings, ids or generated text),
// and event-stream structure. Deterministic bodies must match exactly; with the real model,
// greedy outputs must as well.
func TestWireFormat(t *testing.T) {
	forEachBackend(t, testWireFormat)
}

func testWireFormat(t *testing.T, url string, real bool) {
	tests := []struct {
		name string
		// status overrides the captured status where we answer differently on purpose.
		status int
		// exact: compare the whole body; exactReal: these dotted paths, with the real model.
		exact     bool
		exactReal []string
	}{
		{name: "health", exact: true},
		{name: "models"},
		{name: "apply_template", exact: true},
		{name: "completion", exactReal: []string{"content", "tokens_evaluated", "tokens_predicted", "prompt", "stop_type", "truncated"}},
		{name: "completion_stop", exactReal: []string{"content", "stop_type", "stopping_word", "tokens_predicted"}},
		{name: "completion_stream"},
		// cached_tokens differs: the engine reuses any shared prefix (here BOS), llama-server
		// only a long enough one.
		{name: "chat_nonstream", exactReal: []string{"choices", "usage.prompt_tokens", "usage.completion_tokens"}},
		{name: "chat_stream"},
		{name: "v1_completions", exactReal: []string{"choices", "usage.prompt_tokens", "usage.completion_tokens"}},
		{name: "chat_stream_usage"},
		{name: "chat_error_no_messages", exact: true},
		{name: "embeddings_on_nonembedding_server", exact: true},
		{name: "error_404"},
		// llama-server answers 500 server_error with its JSON library's message; we answer 400.
		{name: "error_bad_json", status: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := loadCapture(t, tt.name)
			req, err := http.NewRequest(c.method, url+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if c.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}

			wantStatus := c.status
			if tt.status != 0 {
				wantStatus = tt.status
			}
			if resp.StatusCode != wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, wantStatus, body)
			}
			for _, k := range []string{"Content-Type", "X-Accel-Buffering"} {
				if got, want := resp.Header.Get(k), c.header.Get(k); got != want {
					t.Errorf("%s = %q, llama-server sends %q", k, got, want)
				}
			}
			// llama-server b10587 echoes the request's missing Origin as an empty
			// Access-Control-Allow-Origin; issue 11 asks for no empty header (cors.go).
			if v, ok := resp.Header["Access-Control-Allow-Origin"]; ok {
				t.Errorf("Access-Control-Allow-Origin %q sent to a request without Origin", v)
			}

			if c.header.Get("Content-Type") == "text/event-stream" {
				want, got := sseEvents(t, string(c.respBody)), sseEvents(t, string(body))
				if want[len(want)-1] == "[DONE]" {
					compareChatStream(t, want, got, real)
				} else {
					compareCompletionStream(t, want, got, real)
				}
				return
			}

			if tt.exact {
				// Key order may differ (Go writes errors as code, message, type).
				w, g := decodeAny(t, c.respBody), decodeAny(t, body)
				if wj, gj := mustMarshal(t, w), mustMarshal(t, g); !bytes.Equal(wj, gj) {
					t.Errorf("body %s, llama-server sends %s", body, c.respBody)
				}
				return
			}
			want, got := decodeAny(t, c.respBody), decodeAny(t, body)
			compareShape(t, tt.name, want, got)
			if real {
				for _, path := range tt.exactReal {
					wj, gj := mustMarshal(t, lookup(t, want, path)), mustMarshal(t, lookup(t, got, path))
					if !bytes.Equal(wj, gj) {
						t.Errorf("%s = %s, llama-server has %s", path, gj, wj)
					}
				}
			}
		})
	}
}

// mustMarshal re-encodes a decoded value canonically (sorted keys).
func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
