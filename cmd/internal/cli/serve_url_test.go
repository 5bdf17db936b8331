package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestServeModelURL: --model-url downloads stories260K into $LLAMA_CACHE under the URL's file
// name and serves it; a second start, offline, serves the downloaded file without asking.
func TestServeModelURL(t *testing.T) {
	data, _ := readStories(t)
	requireGPU(t)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path != "/files/stories260K.gguf" {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	}))
	defer srv.Close()
	cache := t.TempDir()
	hfEnv(t, cache, "http://127.0.0.1:1/")
	t.Setenv("LLAMA_ARG_MODEL_URL", "")

	s := startServer(t, "--model-url", srv.URL+"/files/stories260K.gguf?download=1", "-c", "256")
	s.waitReady(t)
	s.checkStoriesServed(t, "stories260K")
	if got, err := os.ReadFile(filepath.Join(cache, "stories260K.gguf")); err != nil || len(got) != len(data) {
		t.Fatalf("the cached download: %d bytes (%v), want %d", len(got), err, len(data))
	}

	t.Setenv("LLAMA_ARG_MODEL_URL", srv.URL+"/files/stories260K.gguf")
	s = startServer(t, "--offline", "-c", "256")
	s.waitReady(t)
	s.checkStoriesServed(t, "stories260K")
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests to the model URL, want 1", n)
	}
}

// TestModelURLFlag: --model-url (-mu, LLAMA_ARG_MODEL_URL) is checked before anything loads.
func TestModelURLFlag(t *testing.T) {
	for _, args := range [][]string{{"--model-url", "https://h/m.gguf"}, {"-mu", "https://h/m.gguf"}} {
		if f := parseServe(t, nil, args...); f.modelURL != "https://h/m.gguf" {
			t.Errorf("%q: %q", args, f.modelURL)
		}
	}
	if f := parseServe(t, map[string]string{"LLAMA_ARG_MODEL_URL": "https://h/e.gguf"}); f.modelURL != "https://h/e.gguf" {
		t.Errorf("from the environment: %q", f.modelURL)
	}
	for args, want := range map[string]string{
		"--model-url ftp://h/m.gguf":           "--model-url: \"ftp://h/m.gguf\" is not an http(s) URL",
		"--model-url https://h/":               "names no file",
		"--model-url https://h/m.gguf -hf a/b": "not both",
	} {
		_, err := parseServeFlags(strings.Fields(args), io.Discard, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// TestServeModelURLInterrupted: a signal while --model-url downloads stops the download and
// serve exits 0, as a signal while loading does; no file is left behind.
func TestServeModelURLInterrupted(t *testing.T) {
	asked := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.Write([]byte("GGUF"))
		w.(http.Flusher).Flush()
		close(asked)
		<-r.Context().Done()
	}))
	defer srv.Close()
	cache := t.TempDir()
	hfEnv(t, cache, "http://127.0.0.1:1/")
	t.Setenv("LLAMA_ARG_MODEL_URL", "")
	ctx, signal := context.WithCancel(context.Background())
	defer signal()
	_, done := startServerCtx(t, ctx, "--model-url", srv.URL+"/m.gguf")
	<-asked
	signal()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after a signal during the download: %v, want nil (exit status 0)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the download was not stopped")
	}
	if left, _ := os.ReadDir(cache); len(left) != 0 {
		t.Errorf("left in the cache: %v", left)
	}
}
