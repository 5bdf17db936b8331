package router

import (
	"bufio"
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
)

const hubCommit = "0123456789abcdef0123456789abcdef01234567"

// fakeHub serves one repository with one model file, as the Hugging Face Hub: the refs, the
// tree (with the file's LFS sha256) and the file, with Range requests. While stall is set,
// a download sends that many bytes and then hangs until the client leaves.
type fakeHub struct {
	repo, file   string
	body, listed string // served bytes, and the bytes whose sha256 the tree lists

	mu     sync.Mutex
	stall  int
	ranges []string
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; p {
	case "/api/models/" + h.repo + "/refs":
		fmt.Fprintf(w, `{"branches":[{"name":"main","targetCommit":"%s"}]}`, hubCommit)
	case "/api/models/" + h.repo + "/tree/" + hubCommit:
		sum := sha256.Sum256([]byte(h.listed))
		json.NewEncoder(w).Encode([]map[string]any{{"type": "file", "path": h.file, "oid": strings.Repeat("a", 40),
			"lfs": map[string]any{"oid": hex.EncodeToString(sum[:])}}})
	case "/" + h.repo + "/resolve/" + hubCommit + "/" + h.file:
		h.mu.Lock()
		h.ranges = append(h.ranges, r.Header.Get("Range"))
		stall := h.stall
		h.mu.Unlock()
		start := 0
		if rg, ok := strings.CutPrefix(r.Header.Get("Range"), "bytes="); ok {
			fmt.Sscanf(rg, "%d-", &start)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(h.body)-1, len(h.body)))
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(h.body)-start))
		if start > 0 {
			w.WriteHeader(http.StatusPartialContent)
		}
		if stall > 0 {
			w.Write([]byte(h.body[start : start+stall]))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.Write([]byte(h.body[start:]))
	default:
		http.NotFound(w, r)
	}
}

// startDownloadRouter serves a router whose cache is cache and whose download children reach hub.
func startDownloadRouter(t *testing.T, cache string) (*Router, *httptest.Server) {
	t.Helper()
	return serveRouter(t, Config{
		Catalog:         Catalog{CacheDir: cache},
		Command:         []string{binary, "serve", "--router-child"},
		DownloadCommand: []string{binary, "download", "--progress-lines"},
		Autoload:        true,
	})
}

// downloadEvents posts a download of model and returns the model's events on /models/sse up
// to download_finished, or up to the first for which stop says true.
func downloadEvents(t *testing.T, ts *httptest.Server, model string, stop func(Event) bool) []Event {
	t.Helper()
	resp, err := http.Get(ts.URL + "/models/sse")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if code, body := post(t, ts.URL+"/models", `{"model":"`+model+`"}`); code != 200 || body["success"] != true {
		t.Fatalf("POST /models: %d %v", code, body)
	}
	var events []Event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		js, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e Event
		if err := json.Unmarshal([]byte(js), &e); err != nil {
			t.Fatal(err)
		}
		if e.Model != model {
			continue
		}
		events = append(events, e)
		if e.Event == "download_finished" || stop != nil && stop(e) {
			return events
		}
	}
	t.Fatalf("events ended without download_finished: %v", events)
	return nil
}

func progressOf(e Event) (done, total float64) {
	m, _ := e.Data.(map[string]any)
	done, _ = m["done"].(float64)
	total, _ = m["total"].(float64)
	return done, total
}

// TestRouterDownloadResumes downloads a model from a fake hub through a download child:
// the first try is cancelled by DELETE and the second by the router's shutdown (the child
// killed mid-file each time); each next try continues from the bytes kept, with progress
// events, and the model is listed once it is whole.
func TestRouterDownloadResumes(t *testing.T) {
	if binary == "" {
		t.Skip("no shared data: the wgpu-llama binary was not built")
	}
	body := strings.Repeat("wgpu-llama model bytes ", 20000) // 460000 bytes
	hub := &fakeHub{repo: "org/name", file: "name-Q4_K_M.gguf", body: body, listed: body, stall: 100000}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("MODEL_ENDPOINT", "")
	cache := t.TempDir()
	const model = "org/name:Q4_K_M"

	r1, ts1 := startDownloadRouter(t, cache)
	blobs := filepath.Join(cache, "models--org--name", "blobs")
	partialSize := func() int64 {
		m, _ := filepath.Glob(filepath.Join(blobs, "*.incomplete"))
		if len(m) != 1 {
			t.Fatalf("partial files %v, want one", m)
		}
		st, err := os.Stat(m[0])
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	stallAt := func(n float64) func(Event) bool {
		return func(e Event) bool {
			done, _ := progressOf(e)
			return e.Event == "download_progress" && done == n
		}
	}
	// DELETE cancels the download: the child is killed, the partial file stays.
	downloadEvents(t, ts1, model, stallAt(100000))
	if st := statuses(t, ts1)[model]; st != StatusDownloading {
		t.Errorf("status while downloading %q", st)
	}
	req, _ := http.NewRequest(http.MethodDelete, ts1.URL+"/models?model="+model, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("DELETE while downloading: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, ok := statuses(t, ts1)[model]; ok {
		t.Errorf("listed after the download was cancelled")
	}
	if n := partialSize(); n != 100000 {
		t.Fatalf("partial file of %d bytes after DELETE, want 100000", n)
	}
	// The next POST continues it, and the router's shutdown stops it again.
	hub.mu.Lock()
	hub.stall = 200000
	hub.mu.Unlock()
	downloadEvents(t, ts1, model, stallAt(300000))
	ts1.Close()
	r1.Close() // kills the download child
	if n := partialSize(); n != 300000 {
		t.Fatalf("partial file of %d bytes after the router stopped, want 300000", n)
	}

	hub.mu.Lock()
	hub.stall = 0
	hub.mu.Unlock()
	_, ts2 := startDownloadRouter(t, cache)
	events := downloadEvents(t, ts2, model, nil)
	last := events[len(events)-1]
	if data, _ := last.Data.(map[string]any); data["success"] != true {
		t.Fatalf("download_finished %v", last.Data)
	}
	first, lastDone := -1.0, 0.0
	for _, e := range events {
		if e.Event == "download_progress" {
			done, total := progressOf(e)
			if total != float64(len(body)) {
				t.Errorf("progress total %v, want %d", total, len(body))
			}
			if first < 0 {
				first = done
			}
			lastDone = done
		}
	}
	if first != 300000 || lastDone != float64(len(body)) {
		t.Errorf("progress from %v to %v, want from 300000 (resumed) to %d", first, lastDone, len(body))
	}
	hub.mu.Lock()
	ranges := append([]string{}, hub.ranges...)
	hub.mu.Unlock()
	if strings.Join(ranges, ",") != ",bytes=100000-,bytes=300000-" {
		t.Errorf("Range headers %q, want none, then bytes=100000- and bytes=300000-", ranges)
	}
	waitStatus(t, ts2, model, StatusUnloaded)
	got, err := os.ReadFile(filepath.Join(cache, "models--org--name", "snapshots", hubCommit, "name-Q4_K_M.gguf"))
	if err != nil || string(got) != body {
		t.Errorf("cached file: %d bytes, %v", len(got), err)
	}
}

// TestRouterDownloadShaMismatch refuses a file whose sha256 is not the hub's: the download
// fails with the reason and nothing is listed.
func TestRouterDownloadShaMismatch(t *testing.T) {
	if binary == "" {
		t.Skip("no shared data: the wgpu-llama binary was not built")
	}
	hub := &fakeHub{repo: "org/name", file: "name-Q4_K_M.gguf", body: "tampered bytes", listed: "the real model"}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("MODEL_ENDPOINT", "")
	_, ts := startDownloadRouter(t, t.TempDir())
	events := downloadEvents(t, ts, "org/name:Q4_K_M", nil)
	data, _ := events[len(events)-1].Data.(map[string]any)
	if data["success"] != false || !strings.Contains(fmt.Sprint(data["error"]), "sha256 mismatch") {
		t.Fatalf("download_finished %v, want a sha256 mismatch", data)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := statuses(t, ts)
		if len(st) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listed after a refused download: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
