package hf

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

var quiet = log.New(&bytes.Buffer{})

func TestCacheDir(t *testing.T) {
	for _, k := range []string{"LLAMA_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", "/home/u")
	steps := []struct{ env, val, want string }{
		{"", "", "/home/u/.cache/huggingface/hub"},
		{"XDG_CACHE_HOME", "/xdg", "/xdg/huggingface/hub"},
		{"HF_HOME", "/hfhome", "/hfhome/hub"},
		{"HUGGINGFACE_HUB_CACHE", "/old", "/old"},
		{"HF_HUB_CACHE", "/hub", "/hub"},
		{"LLAMA_CACHE", "/llama", "/llama"},
	}
	for _, s := range steps { // each variable set wins over those set before it
		if s.env != "" {
			t.Setenv(s.env, s.val)
		}
		if got, err := CacheDir(); err != nil || got != s.want {
			t.Errorf("with %s: %q %v, want %q", s.env, got, err, s.want)
		}
	}
}

func TestParseRepo(t *testing.T) {
	for in, want := range map[string][2]string{
		"org/name":            {"org/name", ""},
		"org/name:Q8_0":       {"org/name", "Q8_0"},
		"ggml-org/a.b-c_d:q4": {"ggml-org/a.b-c_d", "q4"},
		"org/name:extra:Q4_0": {"org/name", "Q4_0"},
	} {
		repo, tag, err := ParseRepo(in)
		if err != nil || repo != want[0] || tag != want[1] {
			t.Errorf("%q: %q %q %v, want %q", in, repo, tag, err, want)
		}
	}
	for _, in := range []string{"", "name", "a/b/c", "/name", "org/", "org//name", "org/-name", "org/na..me", "org/na me", "../x/y"} {
		if _, _, err := ParseRepo(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func files(paths ...string) []file {
	var out []file
	for _, p := range paths {
		out = append(out, file{path: p})
	}
	return out
}

func TestPickModel(t *testing.T) {
	repo := files("README.md", "mmproj-model-Q4_K_M.gguf", "model-F16.gguf", "model-Q8_0.gguf", "model-q4_k_m.gguf",
		"split/model-Q6_K-00002-of-00002.gguf", "split/model-Q6_K-00001-of-00002.gguf", "imatrix.gguf")
	for _, tt := range []struct{ tag, file, want string }{
		{"", "", "model-q4_k_m.gguf"}, // Q4_K_M by default, without case
		{"Q8_0", "", "model-Q8_0.gguf"},
		{"f16", "", "model-F16.gguf"},
		{"Q6_K", "", "split/model-Q6_K-00001-of-00002.gguf"}, // a split model by its first part
		{"Q4_K_M", "MODEL-F16.GGUF", "model-F16.gguf"},       // --hf-file wins, without case
	} {
		got, err := pickModel(repo, tt.tag, tt.file)
		if err != nil || got.path != tt.want {
			t.Errorf("tag %q file %q: %q %v, want %q", tt.tag, tt.file, got.path, err, tt.want)
		}
	}
	if got, err := pickModel(files("a-Q8_0.gguf", "b-F16.gguf"), "", ""); err != nil || got.path != "a-Q8_0.gguf" {
		t.Errorf("no Q4_K_M: %q %v, want Q8_0", got.path, err)
	}
	if got, err := pickModel(files("mmproj.gguf", "b-F16.gguf", "c-F32.gguf"), "", ""); err != nil || got.path != "b-F16.gguf" {
		t.Errorf("no default quant: %q %v, want the first model", got.path, err)
	}
	if _, err := pickModel(repo, "Q2_K", ""); err == nil || !strings.Contains(err.Error(), "model-Q8_0.gguf") {
		t.Errorf("missing quant: %v, want an error listing the files", err)
	}
	if _, err := pickModel(repo, "", "nope.gguf"); err == nil || !strings.Contains(err.Error(), `"nope.gguf" not found`) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := pickModel(files("README.md", "mmproj-f16.gguf"), "", ""); err == nil {
		t.Error("a repository without models gave one")
	}
	parts := modelParts(repo, file{path: "split/model-Q6_K-00001-of-00002.gguf"})
	if len(parts) != 2 {
		t.Errorf("parts of a split model: %v", parts)
	}
}

// prepareCache lays out a Hub cache with one repository: refs/main and a snapshot whose
// files link to blobs, as huggingface_hub writes them.
func prepareCache(t *testing.T, repo string, names ...string) string {
	t.Helper()
	cache := t.TempDir()
	dir := repoDir(cache, repo)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "refs"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(commit), 0o644))
	for _, n := range names {
		sum := sha256.Sum256([]byte(n))
		oid := hex.EncodeToString(sum[:])
		must(os.MkdirAll(filepath.Join(dir, "blobs"), 0o755))
		must(os.WriteFile(filepath.Join(dir, "blobs", oid), []byte("contents of "+n), 0o644))
		snap := filepath.Join(dir, "snapshots", commit, n)
		must(os.MkdirAll(filepath.Dir(snap), 0o755))
		must(os.Symlink(filepath.Join("..", "..", "blobs", oid), snap))
	}
	return cache
}

func TestResolveOffline(t *testing.T) {
	cache := prepareCache(t, "org/name", "name-Q8_0.gguf", "name-Q4_K_M.gguf", "mmproj-name-f16.gguf", "README.md")
	opt := Options{CacheDir: cache, Offline: true, Logger: quiet, Endpoint: "http://127.0.0.1:1/"} // never contacted
	snap := filepath.Join(cache, "models--org--name", "snapshots", commit)
	for in, want := range map[string]string{
		"org/name":      "name-Q4_K_M.gguf",
		"org/name:q8_0": "name-Q8_0.gguf",
	} {
		got, err := Resolve(context.Background(), in, opt)
		if err != nil || got != filepath.Join(snap, want) {
			t.Errorf("%s: %q %v, want %s", in, got, err, want)
			continue
		}
		if data, err := os.ReadFile(got); err != nil || string(data) != "contents of "+want {
			t.Errorf("%s: reading the resolved file: %q %v", in, data, err)
		}
	}
	fileOpt := opt
	fileOpt.File = "NAME-Q8_0.GGUF"
	if got, err := Resolve(context.Background(), "org/name", fileOpt); err != nil || got != filepath.Join(snap, "name-Q8_0.gguf") {
		t.Errorf("--hf-file: %q %v", got, err)
	}
	if _, err := Resolve(context.Background(), "org/name:Q2_K", opt); err == nil || !strings.Contains(err.Error(), "Q2_K") {
		t.Errorf("missing quant offline: %v", err)
	}
	_, err := Resolve(context.Background(), "org/other", opt)
	if err == nil || !strings.Contains(err.Error(), "not in the cache") || !strings.Contains(err.Error(), "offline mode") {
		t.Errorf("missing repository offline: %v", err)
	}
	// A snapshot link whose blob is gone (an interrupted cleanup) is reported, not returned.
	broken := prepareCache(t, "org/name", "name-Q4_K_M.gguf")
	os.RemoveAll(filepath.Join(broken, "models--org--name", "blobs"))
	if _, err := Resolve(context.Background(), "org/name", Options{CacheDir: broken, Offline: true, Logger: quiet}); err == nil {
		t.Error("a dangling snapshot link resolved")
	}
}

// fakeHub serves the Hub API for one repository.
type fakeHub struct {
	repo   string
	files  map[string]string // path -> contents
	token  string
	failAt string // a path whose download answers 500
	// cutAfter, when > 0, makes the next download send that many bytes of the file and then
	// drop the connection (once).
	cutAfter int
	// served, when set for a path, is what its download sends instead of the listed file
	// (whose sha256 the tree gives).
	served      map[string]string
	ranges      []string // the Range header of each download
	ignoreRange bool     // answer every download with the whole file (200)

	mu       sync.Mutex
	requests []string
}

func (h *fakeHub) oid(p string) string {
	sum := sha256.Sum256([]byte(h.files[p]))
	return hex.EncodeToString(sum[:])
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests = append(h.requests, r.URL.Path)
	cut := h.cutAfter
	if strings.Contains(r.URL.Path, "/resolve/") {
		h.ranges = append(h.ranges, r.Header.Get("Range"))
		h.cutAfter = 0
	}
	h.mu.Unlock()
	if h.token != "" && r.Header.Get("Authorization") != "Bearer "+h.token {
		http.Error(w, `{"error":"Invalid credentials"}`, http.StatusUnauthorized)
		return
	}
	switch p := r.URL.Path; {
	case p == "/api/models/"+h.repo+"/refs":
		fmt.Fprintf(w, `{"branches":[{"name":"dev","targetCommit":"%s"},{"name":"main","targetCommit":"%s"}]}`, strings.Repeat("f", 40), commit)
	case p == "/api/models/"+h.repo+"/tree/"+commit && r.URL.Query().Get("recursive") == "true":
		var tree []map[string]any
		for name := range h.files {
			tree = append(tree, map[string]any{"type": "file", "path": name, "oid": strings.Repeat("a", 40),
				"lfs": map[string]any{"oid": h.oid(name)}})
		}
		tree = append(tree, map[string]any{"type": "directory", "path": "sub"},
			map[string]any{"type": "file", "path": "../escape-Q4_K_M.gguf", "oid": strings.Repeat("b", 40)})
		json.NewEncoder(w).Encode(tree)
	case strings.HasPrefix(p, "/"+h.repo+"/resolve/"+commit+"/"):
		name := strings.TrimPrefix(p, "/"+h.repo+"/resolve/"+commit+"/")
		body, ok := h.files[name]
		switch {
		case name == h.failAt:
			http.Error(w, "boom", http.StatusInternalServerError)
		case !ok:
			http.NotFound(w, r)
		default:
			if alt, ok := h.served[name]; ok {
				body = alt
			}
			start := 0
			if rg, ok := strings.CutPrefix(r.Header.Get("Range"), "bytes="); ok && !h.ignoreRange {
				fmt.Sscanf(rg, "%d-", &start)
				if start >= len(body) {
					http.Error(w, "range not satisfiable", http.StatusRequestedRangeNotSatisfiable)
					return
				}
				w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(body)-1, len(body)))
			}
			w.Header().Set("Content-Length", fmt.Sprint(len(body)-start))
			if start > 0 {
				w.WriteHeader(http.StatusPartialContent)
			}
			if cut > 0 {
				w.Write([]byte(body[start : start+cut]))
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler) // drops the connection mid-body
			}
			w.Write([]byte(body[start:]))
		}
	default:
		http.NotFound(w, r)
	}
}

func (h *fakeHub) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.requests {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func TestResolveDownloads(t *testing.T) {
	hub := &fakeHub{repo: "org/name", token: "hf_secret", files: map[string]string{
		"name-Q4_K_M.gguf":                  "q4 model",
		"name-Q8_0.gguf":                    "q8 model",
		"big/name-Q6_K-00001-of-00002.gguf": "part one",
		"big/name-Q6_K-00002-of-00002.gguf": "part two",
		"mmproj-name-f16.gguf":              "projector",
	}}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	cache := t.TempDir()
	var progress bytes.Buffer
	opt := Options{CacheDir: cache, Endpoint: srv.URL + "/", Token: "hf_secret", Progress: &progress, Logger: quiet}

	got, err := Resolve(context.Background(), "org/name", opt)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "models--org--name")
	if want := filepath.Join(dir, "snapshots", commit, "name-Q4_K_M.gguf"); got != want {
		t.Errorf("path %q, want %q", got, want)
	}
	if data, err := os.ReadFile(got); err != nil || string(data) != "q4 model" {
		t.Errorf("downloaded %q %v", data, err)
	}
	if target, err := os.Readlink(got); err != nil || target != filepath.Join("..", "..", "blobs", hub.oid("name-Q4_K_M.gguf")) {
		t.Errorf("snapshot entry links to %q (%v), want the blob", target, err)
	}
	if ref, _ := os.ReadFile(filepath.Join(dir, "refs", "main")); string(ref) != commit {
		t.Errorf("refs/main %q", ref)
	}
	if !strings.Contains(progress.String(), "Downloading name-Q4_K_M.gguf") || !strings.Contains(progress.String(), "100%") {
		t.Errorf("progress output %q", progress.String())
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "blobs", "*.incomplete")); len(matches) != 0 {
		t.Errorf("temporary files left: %v", matches)
	}
	if _, err := os.Stat(filepath.Join(cache, "escape-Q4_K_M.gguf")); err == nil {
		t.Error("a path leaving the snapshot was downloaded")
	}

	// Cached now: listed again, but not downloaded again; and offline it resolves too.
	if _, err := Resolve(context.Background(), "org/name", opt); err != nil {
		t.Fatal(err)
	}
	if n := hub.count("/org/name/resolve/"); n != 1 {
		t.Errorf("%d downloads after resolving twice, want 1", n)
	}
	offline := opt
	offline.Offline, offline.Endpoint = true, "http://127.0.0.1:1/"
	if p, err := Resolve(context.Background(), "org/name", offline); err != nil || p != got {
		t.Errorf("offline after the download: %q %v", p, err)
	}

	// A split model comes with all its parts.
	p, err := Resolve(context.Background(), "org/name:Q6_K", opt)
	if err != nil || filepath.Base(p) != "name-Q6_K-00001-of-00002.gguf" {
		t.Fatalf("split model: %q %v", p, err)
	}
	if data, err := os.ReadFile(filepath.Join(filepath.Dir(p), "name-Q6_K-00002-of-00002.gguf")); err != nil || string(data) != "part two" {
		t.Errorf("second part: %q %v", data, err)
	}
}

func TestResolveDownloadErrors(t *testing.T) {
	retryDelay = time.Millisecond
	t.Cleanup(func() { retryDelay = time.Second })
	hub := &fakeHub{repo: "org/name", files: map[string]string{"name-Q4_K_M.gguf": "q4", "name-Q8_0.gguf": "q8"}, failAt: "name-Q8_0.gguf"}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	opt := Options{CacheDir: t.TempDir(), Endpoint: srv.URL + "/", Logger: quiet}
	if _, err := Resolve(context.Background(), "org/name:Q8_0", opt); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("server error: %v", err)
	}
	if n := hub.count("/org/name/resolve/"); n != attempts {
		t.Errorf("%d attempts at a failing download, want %d", n, attempts)
	}
	if _, err := Resolve(context.Background(), "org/name", Options{CacheDir: opt.CacheDir, Endpoint: srv.URL + "/", Token: "hf_wrong", Logger: quiet}); err != nil {
		t.Errorf("a token the server does not check: %v", err)
	}

	// Listing fails (a token the Hub refuses): the cache is used, and lacks the file.
	hub.token = "hf_right"
	_, err := Resolve(context.Background(), "org/name:Q8_0", Options{CacheDir: opt.CacheDir, Endpoint: srv.URL + "/", Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), `no GGUF file for quant "Q8_0"`) {
		t.Errorf("listing refused, file not cached: %v", err)
	}
	// ... and has the one downloaded before.
	if _, err := Resolve(context.Background(), "org/name", Options{CacheDir: opt.CacheDir, Endpoint: srv.URL + "/", Logger: quiet}); err != nil {
		t.Errorf("listing refused, file cached: %v", err)
	}
}
