package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/hf"
	"github.com/wgpu-llama/wgpu-llama/router"
)

// `wgpu-llama download` fetches a model into the cache; without a terminal its progress is
// logged, and with --progress-lines it is reported to a router on stdout.
func TestDownloadCommand(t *testing.T) {
	data, oid := readStories(t)
	hub := newFakeHub(t, data, oid)
	hub.release()
	cache := t.TempDir()
	hfEnv(t, cache, hub.URL)
	want := filepath.Join(cache, "models--org--name", "snapshots", hfCommit, "stories260K.gguf")

	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"download", "org/name"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	if got, _ := os.ReadFile(want); !bytes.Equal(got, data) {
		t.Errorf("cached file of %d bytes, want %d", len(got), len(data))
	}
	if log := stderr.String(); !strings.Contains(log, "downloading file=stories260K.gguf percent=0") ||
		!strings.Contains(log, "percent=100") || strings.Contains(log, "\r") {
		t.Errorf("console progress (not a terminal: log lines):\n%s", log)
	}

	other := t.TempDir()
	stdout.Reset()
	if err := run(context.Background(), []string{"download", "--progress-lines", "--cache-dir", other, "org/name"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var last hf.Progress
	for _, l := range lines[:len(lines)-1] {
		js, ok := strings.CutPrefix(l, router.DownloadProgressPrefix)
		if !ok || json.Unmarshal([]byte(js), &last) != nil {
			t.Fatalf("line %q", l)
		}
	}
	if last != (hf.Progress{File: "stories260K.gguf", Done: int64(len(data)), Total: int64(len(data))}) {
		t.Errorf("last progress %+v", last)
	}
	wantResult := router.DownloadResultLine(router.DownloadResult{Success: true,
		Path: filepath.Join(other, "models--org--name", "snapshots", hfCommit, "stories260K.gguf")})
	if lines[len(lines)-1] != wantResult {
		t.Errorf("result line %q, want %q", lines[len(lines)-1], wantResult)
	}
	if err := run(context.Background(), []string{"download"}, &stdout, &stderr); err == nil {
		t.Error("download without a model succeeded")
	}
}
