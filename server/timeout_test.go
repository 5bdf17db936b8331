package server

import (
	"strings"
	"testing"
	"time"
)

// TestWriteTimeoutIsPerWrite: --timeout bounds each write, as a socket send timeout does in
// llama-server, so a stream or a long generation that outlasts it is not cut.
func TestWriteTimeoutIsPerWrite(t *testing.T) {
	ts, fb := newFakeServer(t, Config{WriteTimeout: 30 * time.Millisecond})
	fb.delay = 50 * time.Millisecond // each result comes after more than the timeout
	status, _, body := do(t, "POST", ts.URL+"/completion", `{"prompt":"hi","n_predict":4,"stream":true}`, nil)
	if status != 200 || strings.Count(body, "data: ") != 5 || !strings.Contains(body, `"stop":true`) {
		t.Errorf("stream: %d, %d events:\n%s", status, strings.Count(body, "data: "), body)
	}
	status, _, body = do(t, "POST", ts.URL+"/completion", `{"prompt":"hi","n_predict":4}`, nil)
	if status != 200 || !strings.Contains(body, `"content":", there was a"`) {
		t.Errorf("long generation: %d %s", status, body)
	}
}
