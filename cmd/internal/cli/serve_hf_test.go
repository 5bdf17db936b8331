package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// hfCommit is the revision the tests' Hugging Face repository "main" points at.
const hfCommit = "0123456789abcdef0123456789abcdef01234567"

// loadingBody is llama-server's answer to every request while the model loads.
const loadingBody = `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`

// hfEnv points the Hub cache at cache and the Hub at endpoint, and clears the variables that
// would otherwise change how -hf resolves.
func hfEnv(t *testing.T, cache, endpoint string) {
	t.Helper()
	for k, v := range map[string]string{
		"LLAMA_CACHE": cache, "HF_ENDPOINT": endpoint, "MODEL_ENDPOINT": "",
		"HF_TOKEN": "", "LLAMA_OFFLINE": "", "LLAMA_ARG_HF_REPO": "", "LLAMA_ARG_HF_FILE": "", "LLAMA_ARG_MODEL": "",
	} {
		t.Setenv(k, v)
	}
}

// servedServer is a server started from its command line by startServer.
type servedServer struct {
	base   string
	stderr *enginetest.LogBuffer
}

// startServer runs the server with args on a free port and returns once it listens (the
// model may still be loading); the server is stopped, and must exit cleanly, when the test ends.
func startServer(t *testing.T, args ...string) *servedServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, done := startServerCtx(t, ctx, args...)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s
}

// startServerCtx is startServer under ctx, which stops the server; done yields run's result.
func startServerCtx(t *testing.T, ctx context.Context, args ...string) (s *servedServer, done chan error) {
	t.Helper()
	s = &servedServer{stderr: &enginetest.LogBuffer{}}
	done = make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"--port", "0"}, args...), io.Discard, s.stderr) }()
	urlRe := regexp.MustCompile(`url=(http://\S+)`)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if m := urlRe.FindStringSubmatch(s.stderr.String()); m != nil {
			s.base = m[1]
			return s, done
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the server exited before listening: %v\n%s", err, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not listen:\n%s", s.stderr.String())
		}
	}
}

// do sends one request and returns the status and body.
func (s *servedServer) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	return s.doKey(t, method, path, "", body)
}

// doKey is do with the API key key as a bearer token ("" sends none).
func (s *servedServer) doKey(t *testing.T, method, path, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// waitReady polls /health until it answers 200; until then it must answer 503 "Loading model".
func (s *servedServer) waitReady(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		status, body := s.do(t, "GET", "/health", "")
		if status == http.StatusOK {
			if body != `{"status":"ok"}` {
				t.Errorf("/health: %s", body)
			}
			return
		}
		if status != http.StatusServiceUnavailable || body != loadingBody {
			t.Fatalf("/health while loading: %d %s", status, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the model did not load:\n%s", s.stderr.String())
		}
	}
}

// checkStoriesServed checks that the server serves stories260K, named name: llama.cpp's greedy
// continuation of "Once upon a time" and the model list.
func (s *servedServer) checkStoriesServed(t *testing.T, name string) {
	t.Helper()
	status, body := s.do(t, "POST", "/completion", `{"prompt":"Once upon a time","n_predict":16,"temperature":0}`)
	var c struct {
		Content         string `json:"content"`
		TokensPredicted int    `json:"tokens_predicted"`
		TokensEvaluated int    `json:"tokens_evaluated"`
	}
	if err := json.Unmarshal([]byte(body), &c); status != http.StatusOK || err != nil {
		t.Fatalf("/completion: %d %s (%v)", status, body, err)
	}
	if want := ", there was a little girl named Lily. She loved to play"; c.Content != want || c.TokensPredicted != 16 || c.TokensEvaluated != 5 {
		t.Errorf("/completion: %q (%d tokens after %d), want %q", c.Content, c.TokensPredicted, c.TokensEvaluated, want)
	}
	status, body = s.do(t, "GET", "/v1/models", "")
	var m struct {
		Data []struct {
			ID   string `json:"id"`
			Meta struct {
				NParams int `json:"n_params"`
				NVocab  int `json:"n_vocab"`
			} `json:"meta"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &m); status != http.StatusOK || err != nil || len(m.Data) != 1 {
		t.Fatalf("/v1/models: %d %s (%v)", status, body, err)
	}
	if d := m.Data[0]; d.ID != name || d.Meta.NParams != 292800 || d.Meta.NVocab != 512 {
		t.Errorf("/v1/models: %s, want stories260K's (292800 parameters, 512 tokens) named %q", body, name)
	}
}

// readStories reads the shared stories260K GGUF and its LFS object id (its SHA-256).
func readStories(t *testing.T) ([]byte, string) {
	t.Helper()
	data, err := os.ReadFile(shareddata.Path(t, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:])
}

// TestServeHFOffline is -hf's acceptance test without the network: a Hugging Face cache laid out
// as huggingface_hub lays it out (refs/main naming the revision, the snapshot's file a relative
// link to its blob) serves stories260K with --hf-repo ORG/NAME --offline.
func TestServeHFOffline(t *testing.T) {
	data, oid := readStories(t)
	requireGPU(t)
	cache := t.TempDir()
	repo := filepath.Join(cache, "models--tiny-org--stories260K-GGUF")
	snap := filepath.Join(repo, "snapshots", hfCommit)
	for _, d := range []string{filepath.Join(repo, "refs"), filepath.Join(repo, "blobs"), snap} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range map[string][]byte{
		filepath.Join(repo, "refs", "main"): []byte(hfCommit),
		filepath.Join(repo, "blobs", oid):   data,
		filepath.Join(snap, "README.md"):    []byte("# stories260K\n"),
	} {
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join("..", "..", "blobs", oid), filepath.Join(snap, "stories260K.gguf")); err != nil {
		t.Fatal(err)
	}
	hfEnv(t, cache, "http://127.0.0.1:1/") // unreachable: offline must not ask

	s := startServer(t, "--hf-repo", "tiny-org/stories260K-GGUF", "--offline", "-c", "256")
	s.waitReady(t)
	s.checkStoriesServed(t, "stories260K")
	if !strings.Contains(s.stderr.String(), "path="+filepath.Join(snap, "stories260K.gguf")) {
		t.Errorf("the log does not name the snapshot's file:\n%s", s.stderr.String())
	}
}

// fakeHub is an httptest Hugging Face Hub serving one repository, org/name at hfCommit, with
// stories260K.gguf; the file's download waits until release is called.
type fakeHub struct {
	*httptest.Server
	requested chan struct{} // closed when the file's download starts
	release   func()
	downloads int
	mu        sync.Mutex
}

func newFakeHub(t *testing.T, data []byte, oid string) *fakeHub {
	t.Helper()
	h := &fakeHub{requested: make(chan struct{})}
	released := make(chan struct{})
	var once, requestOnce sync.Once
	h.release = func() { once.Do(func() { close(released) }) }
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/models/org/name/refs", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"branches":[{"name":"main","ref":"refs/heads/main","targetCommit":%q}],"converts":[],"tags":[]}`, hfCommit)
	})
	mux.HandleFunc("GET /api/models/org/name/tree/"+hfCommit, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("recursive") != "true" {
			t.Errorf("tree listing %s, want recursive=true", r.URL)
		}
		fmt.Fprintf(w, `[{"type":"file","oid":"1111111111111111111111111111111111111111","size":14,"path":"README.md"},`+
			`{"type":"file","oid":"2222222222222222222222222222222222222222","size":%d,"path":"stories260K.gguf","lfs":{"oid":%q,"size":%d,"pointerSize":134}}]`,
			len(data), oid, len(data))
	})
	mux.HandleFunc("GET /org/name/resolve/"+hfCommit+"/stories260K.gguf", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.downloads++
		h.mu.Unlock()
		requestOnce.Do(func() { close(h.requested) })
		select {
		case <-released:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Write(data)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected Hub request %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	})
	h.Server = httptest.NewServer(mux)
	t.Cleanup(h.Close)
	t.Cleanup(h.release) // before Close, which waits for the stalled download
	return h
}

// TestServeHFDownloadWhileLoading runs -hf against a fake Hub whose download stalls: the server
// already listens and answers 503 "Loading model"; once the download completes, the model loads
// from the cache, laid out as huggingface_hub does, and /health turns 200.
func TestServeHFDownloadWhileLoading(t *testing.T) {
	data, oid := readStories(t)
	requireGPU(t)
	hub := newFakeHub(t, data, oid)
	cache := t.TempDir()
	hfEnv(t, cache, hub.URL)

	s := startServer(t, "-hf", "org/name", "-c", "256")
	select {
	case <-hub.requested:
	case <-time.After(time.Minute):
		t.Fatalf("the server did not request the model file:\n%s", s.stderr.String())
	}
	for _, path := range []string{"/health", "/v1/health", "/v1/models"} {
		if status, body := s.do(t, "GET", path, ""); status != http.StatusServiceUnavailable || body != loadingBody {
			t.Errorf("%s while downloading: %d %s, want 503 %s", path, status, body, loadingBody)
		}
	}
	if status, body := s.do(t, "POST", "/completion", `{"prompt":"Once"}`); status != http.StatusServiceUnavailable || body != loadingBody {
		t.Errorf("/completion while downloading: %d %s", status, body)
	}
	hub.release()
	s.waitReady(t)
	s.checkStoriesServed(t, "stories260K")

	repo := filepath.Join(cache, "models--org--name")
	if ref, err := os.ReadFile(filepath.Join(repo, "refs", "main")); err != nil || string(ref) != hfCommit {
		t.Errorf("refs/main = %q, %v; want %s", ref, err, hfCommit)
	}
	snapFile := filepath.Join(repo, "snapshots", hfCommit, "stories260K.gguf")
	if target, err := os.Readlink(snapFile); err != nil || target != filepath.Join("..", "..", "blobs", oid) {
		t.Errorf("the snapshot's file links to %q (%v), want its blob", target, err)
	}
	if blob, err := os.ReadFile(filepath.Join(repo, "blobs", oid)); err != nil || len(blob) != len(data) {
		t.Errorf("blob: %d bytes (%v), want %d", len(blob), err, len(data))
	}
	if _, err := os.Stat(filepath.Join(repo, "snapshots", hfCommit, "README.md")); err == nil {
		t.Error("README.md was downloaded; only the model file is needed")
	}
	hub.mu.Lock()
	defer hub.mu.Unlock()
	if hub.downloads != 1 {
		t.Errorf("the model was requested %d times, want once", hub.downloads)
	}
}
