package server

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// faultyBackend is a fake whose engine reports a fault through Health (a device lost and the
// model not loaded again yet) until health is cleared.
type faultyBackend struct {
	*fakeBackend
	health error
}

func (b *faultyBackend) Health() error { return b.health }

// TestHealthReportsDeviceLoss checks /health while the engine recovers from a device loss:
// 503 with the engine's reason, then ok once it is loaded again.
func TestHealthReportsDeviceLoss(t *testing.T) {
	b := &faultyBackend{fakeBackend: newFakeBackend(t)}
	b.health = errors.New("the GPU device was lost (gpu: device lost: destroyed); the model is being loaded again")
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(b)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	for _, path := range []string{"/health", "/v1/health"} {
		code, header, body := do(t, "GET", ts.URL+path, "", nil)
		if code != 503 || header.Get("Retry-After") != "1" || !strings.Contains(body, "device was lost") || !strings.Contains(body, `"unavailable_error"`) {
			t.Errorf("%s while recovering: %d %q", path, code, body)
		}
	}
	b.health = nil
	if code, _, body := do(t, "GET", ts.URL+"/health", "", nil); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/health after the recovery: %d %q", code, body)
	}
}

// TestGPUFaultsAnswer503 checks what a request whose generation fails with a GPU fault gets:
// 503 and a one-line message, before streaming (a status) and while streaming (an error
// event), for a device loss and for an out-of-memory.
func TestGPUFaultsAnswer503(t *testing.T) {
	lost := fmt.Errorf("%w: destroyed: the request was running when it happened; the model is being loaded again, retry", engine.ErrDeviceLost)
	oom := fmt.Errorf("model: scratch topk_out: %w: buffer \"topk_out\" of 4096 bytes does not fit: 1000 of 1024 bytes in use\nCaused by: more", engine.ErrOutOfMemory)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"device lost", lost, "the model is being loaded again, retry"},
		{"out of memory", oom, "the GPU has no memory left for this request"},
	} {
		b := newFakeBackend(t)
		b.failAfter, b.finalErr = 0, c.err
		srv := New(Config{Alias: "stories260K"}, testLogger())
		srv.SetBackend(b)
		ts := httptest.NewServer(srv.Handler())
		code, header, body := do(t, "POST", ts.URL+"/completion", `{"prompt": "Hello", "n_predict": 4}`, map[string]string{"Content-Type": "application/json"})
		e := decodeAPIError(t, body)
		if code != 503 || header.Get("Retry-After") != "1" || e.Type != "unavailable_error" ||
			!strings.Contains(e.Message, c.want) || strings.Contains(e.Message, "\n") {
			t.Errorf("%s: %d, Retry-After %q, %+v", c.name, code, header.Get("Retry-After"), e)
		}
		b.failAfter = 2 // the stream has started: the error comes as an event
		_, _, body = do(t, "POST", ts.URL+"/completion", `{"prompt": "Hello", "n_predict": 8, "stream": true}`, map[string]string{"Content-Type": "application/json"})
		if !strings.Contains(body, `"code":503`) || !strings.Contains(body, c.want) {
			t.Errorf("%s, streaming: %s", c.name, body)
		}
		ts.Close()
	}
}
