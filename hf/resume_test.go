package hf

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A download cut mid-way keeps its partial file; the next Resolve continues it with a Range
// request from where it stopped, and the progress starts there.
func TestResolveResumesInterruptedDownload(t *testing.T) {
	retryDelay = time.Millisecond
	t.Cleanup(func() { retryDelay = time.Second })
	model := strings.Repeat("0123456789", 1000)
	hub := &fakeHub{repo: "org/name", files: map[string]string{"name-Q4_K_M.gguf": model}, cutAfter: 4000}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	cache := t.TempDir()
	var seen []Progress
	opt := Options{CacheDir: cache, Endpoint: srv.URL + "/", Logger: quiet, OnProgress: func(p Progress) { seen = append(seen, p) }}

	got, err := Resolve(context.Background(), "org/name", opt)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(got); err != nil || string(data) != model {
		t.Fatalf("downloaded %d bytes %v, want the %d of the model", len(data), err, len(model))
	}
	if len(hub.ranges) != 2 || hub.ranges[0] != "" || hub.ranges[1] != "bytes=4000-" {
		t.Errorf("Range headers %q, want none then bytes=4000-", hub.ranges)
	}
	if len(seen) == 0 || seen[0] != (Progress{File: "name-Q4_K_M.gguf", Done: 0, Total: 10000}) {
		t.Fatalf("first progress %v", seen)
	}
	resumed := false
	for _, p := range seen {
		resumed = resumed || p.Done == 4000 && p.Total == 10000
	}
	if last := seen[len(seen)-1]; !resumed || last.Done != 10000 || last.Total != 10000 {
		t.Errorf("progress %v, want a resume at 4000 and 10000/10000 at the end", seen)
	}
}

// A partial file left by an earlier run (the process was killed) is continued by the next
// one; a partial file as long as the file (416) or a server that ignores Range (200) makes
// it start over.
func TestResolveResumesAcrossRuns(t *testing.T) {
	model := strings.Repeat("abcdefgh", 500)
	hub := &fakeHub{repo: "org/name", files: map[string]string{"name-Q4_K_M.gguf": model}}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	cache := t.TempDir()
	blob := filepath.Join(repoDir(cache, "org/name"), "blobs", hub.oid("name-Q4_K_M.gguf"))
	for _, tt := range []struct {
		partial, wantRange string
		ignoreRange        bool
	}{
		{model[:1234], "bytes=1234-", false},
		{model + "stale", "bytes=4005-", false}, // 416, then the whole file
		{"garbage", "bytes=7-", true},           // 200: the whole file, written over the partial one
	} {
		os.RemoveAll(cache)
		hub.ranges, hub.ignoreRange = nil, tt.ignoreRange
		if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(blob+".incomplete", []byte(tt.partial), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Resolve(context.Background(), "org/name", Options{CacheDir: cache, Endpoint: srv.URL + "/", Logger: quiet})
		if err != nil {
			t.Fatalf("partial of %d bytes: %v", len(tt.partial), err)
		}
		if data, _ := os.ReadFile(got); string(data) != model {
			t.Errorf("partial of %d bytes: got %d bytes", len(tt.partial), len(data))
		}
		if len(hub.ranges) == 0 || hub.ranges[0] != tt.wantRange {
			t.Errorf("partial of %d bytes: Range headers %q", len(tt.partial), hub.ranges)
		}
	}
}

// A file whose sha256 is not the Hub's LFS oid is refused, removed, and not in the cache.
func TestResolveRefusesShaMismatch(t *testing.T) {
	hub := &fakeHub{repo: "org/name", files: map[string]string{"name-Q4_K_M.gguf": "the real model"},
		served: map[string]string{"name-Q4_K_M.gguf": "a tampered one"}}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	cache := t.TempDir()
	_, err := Resolve(context.Background(), "org/name", Options{CacheDir: cache, Endpoint: srv.URL + "/", Logger: quiet})
	var mismatch *ShaMismatchError
	if !errors.As(err, &mismatch) || mismatch.Want != hub.oid("name-Q4_K_M.gguf") || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Fatalf("err %v, want a sha256 mismatch", err)
	}
	if n := hub.count("/org/name/resolve/"); n != 1 {
		t.Errorf("%d downloads, want 1 (a mismatch is not retried)", n)
	}
	models, err := ListCache(cache)
	if err != nil || len(models) != 0 {
		t.Errorf("cache lists %v %v, want nothing", models, err)
	}
	left, _ := filepath.Glob(filepath.Join(repoDir(cache, "org/name"), "blobs", "*"))
	if len(left) != 0 {
		t.Errorf("files left: %v", left)
	}
}
