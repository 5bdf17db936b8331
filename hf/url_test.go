package hf

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestFetchURL: --model-url downloads into the llama.cpp cache under the URL's file name (or
// to the given destination), reuses what is there, and offline never downloads.
func TestFetchURL(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/dir/model.gguf" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("GGUF-bytes"))
	}))
	defer srv.Close()
	cache := t.TempDir()
	t.Setenv("LLAMA_CACHE", cache)
	ctx := context.Background()

	if _, err := FetchURL(ctx, srv.URL+"/dir/model.gguf?download=true", URLOptions{Offline: true}); err == nil || !strings.Contains(err.Error(), "--offline") {
		t.Errorf("offline before the download: %v", err)
	}
	got, err := FetchURL(ctx, srv.URL+"/dir/model.gguf?download=true#x", URLOptions{})
	if err != nil || got != filepath.Join(cache, "model.gguf") {
		t.Fatalf("download: %q %v", got, err)
	}
	if b, _ := os.ReadFile(got); string(b) != "GGUF-bytes" {
		t.Errorf("downloaded %q", b)
	}
	if got, err := FetchURL(ctx, srv.URL+"/dir/model.gguf", URLOptions{Offline: true}); err != nil || got != filepath.Join(cache, "model.gguf") || hits.Load() != 1 {
		t.Errorf("cached file offline: %q %v, %d requests", got, err, hits.Load())
	}
	dest := filepath.Join(t.TempDir(), "sub", "mine.gguf")
	if got, err := FetchURL(ctx, srv.URL+"/dir/model.gguf", URLOptions{Dest: dest}); err != nil || got != dest {
		t.Errorf("-m destination: %q %v", got, err)
	}
	if _, err := FetchURL(ctx, srv.URL+"/dir/missing.gguf", URLOptions{}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "missing.gguf.incomplete")); !os.IsNotExist(err) {
		t.Errorf("an incomplete file was left: %v", err)
	}
	for _, bad := range []string{"ftp://host/a.gguf", "model.gguf", "https://host/", "https://host"} {
		if _, err := FetchURL(ctx, bad, URLOptions{}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
