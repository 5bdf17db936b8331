package cli

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// startStream posts a streaming request and returns its body's reader once the first event
// arrived (the request runs in a slot).
func startStream(t *testing.T, s *servedServer, path, body string) (*bufio.Reader, func()) {
	t.Helper()
	resp, err := http.Post(s.base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatalf("the stream's first event: %v", err)
	}
	return r, func() { resp.Body.Close() }
}

// TestServeDrainsCleanly: after the first signal a running request finishes (its stream ends
// with [DONE]) and the server's run returns nil, exit status 0.
func TestServeDrainsCleanly(t *testing.T) {
	model := shareddata.Path(t, "models", "stories260K.gguf")
	requireGPU(t)
	ctx, signal := context.WithCancel(context.Background())
	defer signal()
	s, done := startServerCtx(t, ctx, "-m", model, "-np", "1")
	s.waitReady(t)
	r, closeBody := startStream(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":300,"ignore_eos":true,"stream":true}`)
	defer closeBody()
	signal()
	var rest strings.Builder
	_, err := r.WriteTo(&rest)
	if err != nil || !strings.HasSuffix(rest.String(), "data: [DONE]\n\n") {
		t.Errorf("the running stream after the signal: %v, ends %q", err, tailOf(rest.String()))
	}
	if err := <-done; err != nil {
		t.Errorf("run after a clean drain: %v, want nil (exit status 0)", err)
	}
}

// TestServeShutdownQueuedAndForced: after the first signal a request queued behind a running
// one gets its 503 while that one still runs (not after the drain timeout), and a second signal
// ends run at once with errForced.
func TestServeShutdownQueuedAndForced(t *testing.T) {
	model := shareddata.Path(t, "models", "stories260K.gguf")
	requireGPU(t)
	ctx, signal := context.WithCancel(context.Background())
	defer signal()
	force := make(chan struct{})
	s, done := startServerCtx(t, withForce(ctx, force), "-m", model, "-np", "1", "--metrics")
	s.waitReady(t)
	r, closeBody := startStream(t, s, "/completion", `{"prompt":"Once","n_predict":-1,"ignore_eos":true,"stream":true}`)
	defer closeBody()
	type answer struct {
		status int
		body   string
	}
	queued := make(chan answer, 1)
	go func() {
		resp, err := http.Post(s.base+"/completion", "application/json", strings.NewReader(`{"prompt":"Once","n_predict":4}`))
		if err != nil {
			queued <- answer{0, err.Error()}
			return
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		queued <- answer{resp.StatusCode, b.String()}
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, m := s.do(t, "GET", "/metrics", ""); strings.Contains(m, "llamacpp:requests_deferred 1\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second request was never queued")
		}
	}
	signal()
	var a answer
	select {
	case a = <-queued:
	case <-time.After(drainTimeout / 2):
		t.Fatal("the queued request was not answered at once, but left for the drain timeout")
	}
	if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "the server is shutting down") {
		t.Errorf("the queued request: %d %s, want 503", a.status, a.body)
	}
	// The running stream goes on after the queued request's answer.
	for range 5 {
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatalf("the running stream ended when the queued request was answered: %v", err)
		}
	}
	close(force)
	select {
	case err := <-done:
		if !errors.Is(err, errForced) {
			t.Errorf("run after a second signal: %v, want errForced", err)
		}
	case <-time.After(drainTimeout / 2):
		t.Fatal("a second signal did not end run at once")
	}
}

func tailOf(s string) string {
	if len(s) > 120 {
		return "..." + s[len(s)-120:]
	}
	return s
}

// TestServeDrainTimeoutEndsStreams: a stream still running when the drain times out ends with
// an error event saying the server is shutting down, not a cut connection.
func TestServeDrainTimeoutEndsStreams(t *testing.T) {
	model := shareddata.Path(t, "models", "stories260K.gguf")
	requireGPU(t)
	defer func(d time.Duration) { drainTimeout = d }(drainTimeout)
	drainTimeout = 200 * time.Millisecond
	ctx, signal := context.WithCancel(context.Background())
	defer signal()
	s, done := startServerCtx(t, ctx, "-m", model, "-np", "1")
	s.waitReady(t)
	r, closeBody := startStream(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":-1,"ignore_eos":true,"stream":true}`)
	defer closeBody()
	signal()
	var rest strings.Builder
	_, err := r.WriteTo(&rest)
	const last = `data: {"error":{"code":503,"message":"the server is shutting down","type":"unavailable_error"}}` + "\n\n"
	if err != nil || !strings.HasSuffix(rest.String(), last) {
		t.Errorf("the stream running at the drain timeout: %v, ends %q, want %q", err, tailOf(rest.String()), last)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "requests still running after 200ms were ended") {
		t.Errorf("run after the drain timed out: %v", err)
	}
}
