package cli

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestServeEndToEnd starts the server from its command line (port 0), waits for the model,
// and checks that the flags reach it: the API key, /metrics, /props' defaults and slot saving.
func TestServeEndToEnd(t *testing.T) {
	model := shareddata.Path(t, "models", "stories260K.gguf")
	requireGPU(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pprofAddr := ln.Addr().String()
	ln.Close()
	srv := startServer(t, "-m", model, "-c", "256", "--api-key", "sesame", "--metrics",
		"--seed", "42", "--slot-save-path", t.TempDir(), "-ngl", "99", "--pprof-addr", pprofAddr)
	srv.waitReady(t)
	get := func(method, path, key, body string) (int, string) { return srv.doKey(t, method, path, key, body) }
	if status, _ := get("GET", "/health", "", ""); status != 200 {
		t.Errorf("/health without a key: %d", status)
	}
	if status, _ := get("GET", "/props", "", ""); status != 401 {
		t.Errorf("/props without the key: %d, want 401", status)
	}
	if status, body := get("GET", "/props", "sesame", ""); status != 200 || !strings.Contains(body, `"seed":42`) {
		t.Errorf("/props with the key: %d %s", status, body)
	}
	if status, body := get("POST", "/completion", "sesame", `{"prompt":"Once upon a time","n_predict":4}`); status != 200 {
		t.Errorf("/completion: %d %s", status, body)
	}
	if status, body := get("POST", "/slots/0?action=save", "sesame", `{"filename":"s.bin"}`); status != 200 || !strings.Contains(body, `"n_saved":8`) {
		t.Errorf("slot save: %d %s", status, body)
	}
	if status, body := get("GET", "/metrics", "sesame", ""); status != 200 || !strings.Contains(body, "llamacpp:tokens_predicted_total 4\n") {
		t.Errorf("/metrics: %d %s", status, body)
	}
	// --pprof-addr: Go's profiles on their own listener, not on the API's
	resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile:") {
		t.Errorf("pprof: %d %.200s", resp.StatusCode, body)
	}
	if status, _ := get("GET", "/debug/pprof/", "sesame", ""); status != 404 {
		t.Errorf("/debug/pprof/ on the API's port: %d, want 404", status)
	}
}
