package cli

import (
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestServeEndToEnd starts the server from its command line (port 0), waits for the model,
// and checks that the flags reach it: the API key, /metrics, /props' defaults and slot saving.
func TestServeEndToEnd(t *testing.T) {
	model := shareddata.Path(t, "models", "stories260K.gguf")
	requireGPU(t)
	srv := startServer(t, "-m", model, "-c", "256", "--api-key", "sesame", "--metrics",
		"--seed", "42", "--slot-save-path", t.TempDir(), "-ngl", "99")
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
}
