package router

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// binary is the wgpu-llama binary the children run, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	code := func() int {
		if shareddata.Dir() != "" {
			dir, err := os.MkdirTemp("", "router-test")
			if err != nil {
				panic(err)
			}
			defer os.RemoveAll(dir)
			binary = filepath.Join(dir, "wgpu-llama")
			out, err := exec.Command("go", "build", "-o", binary, "github.com/wgpu-llama/wgpu-llama/cmd/wgpu-llama").CombinedOutput()
			if err != nil {
				fmt.Fprintf(os.Stderr, "building wgpu-llama: %v\n%s", err, out)
				return 1
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

// startRouter serves a router over a models-dir of real models (name → file in the shared
// models) with real children.
func startRouter(t *testing.T, maxModels int, models map[string]string) (*Router, *httptest.Server) {
	t.Helper()
	return startRouterWith(t, maxModels, models)
}

// startRouterWith is startRouter whose children also get the flags extra.
func startRouterWith(t *testing.T, maxModels int, models map[string]string, extra ...string) (*Router, *httptest.Server) {
	t.Helper()
	dir := t.TempDir()
	for name, file := range models {
		if err := os.Symlink(shareddata.Path(t, "models", file), filepath.Join(dir, name+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	return serveRouter(t, Config{
		Catalog:   Catalog{ModelsDir: dir},
		Command:   []string{binary, "serve", "--router-child"},
		Inherited: append([]string{"-c", "256", "--temp", "0"}, extra...),
		Metrics:   slices.Contains(extra, "--metrics"), // as the command line passes it to both
		MaxModels: maxModels,
		Autoload:  true,
		BuildInfo: "b1-test",
	})
}

// serveRouter serves a router made with cfg; both are closed when the test ends.
func serveRouter(t *testing.T, cfg Config) (*Router, *httptest.Server) {
	t.Helper()
	r, err := New(cfg, log.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(r.Handler())
	t.Cleanup(func() {
		ts.Close()
		r.Close()
	})
	return r, ts
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

// statuses maps each listed model to its status value.
func statuses(t *testing.T, ts *httptest.Server) map[string]string {
	t.Helper()
	var list struct {
		Data []struct {
			ID     string `json:"id"`
			Source string `json:"source"`
			Status struct {
				Value string `json:"value"`
			} `json:"status"`
		} `json:"data"`
	}
	getJSON(t, ts.URL+"/models", &list)
	out := map[string]string{}
	for _, m := range list.Data {
		out[m.ID] = m.Status.Value
	}
	return out
}

func waitStatus(t *testing.T, ts *httptest.Server, model, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := statuses(t, ts)[model]
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: status %q, want %q", model, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func chat(t *testing.T, ts *httptest.Server, model string) (int, map[string]any) {
	return post(t, ts.URL+"/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`)
}

// TestRouterLoadChatUnload lists two models, chats with both at once (each loads on its
// first request, in its own child), unloads one and rejects an unknown model.
func TestRouterLoadChatUnload(t *testing.T) {
	r, ts := startRouter(t, 4, map[string]string{"stories": "stories260K.gguf", "tiny": "llama-2-tiny-random.gguf"})
	if got := statuses(t, ts); got["stories"] != StatusUnloaded || got["tiny"] != StatusUnloaded || len(got) != 2 {
		t.Fatalf("statuses %v, want both unloaded", got)
	}
	var props map[string]any
	getJSON(t, ts.URL+"/props", &props)
	if props["role"] != "router" || props["max_instances"] != float64(4) || props["models_autoload"] != true || props["build_info"] != "b1-test" {
		t.Errorf("props %v", props)
	}

	var wg sync.WaitGroup
	for _, m := range []string{"stories", "tiny"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := chat(t, ts, m)
			if code != 200 || body["model"] != m {
				t.Errorf("%s: %d %v", m, code, body)
			}
		}()
	}
	wg.Wait()
	if got := statuses(t, ts); got["stories"] != StatusLoaded || got["tiny"] != StatusLoaded {
		t.Fatalf("statuses %v, want both loaded", got)
	}

	r.mu.Lock()
	pid := r.models["tiny"].child.cmd.Process.Pid
	r.mu.Unlock()
	if code, body := post(t, ts.URL+"/models/unload", `{"model":"tiny"}`); code != 200 || body["success"] != true {
		t.Fatalf("unload: %d %v", code, body)
	}
	waitStatus(t, ts, "tiny", StatusUnloaded)
	// the child process is gone, and all its memory with it
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("child %d after unload: %v, want no such process", pid, err)
	}
	if code, body := post(t, ts.URL+"/models/unload", `{"model":"tiny"}`); code != 400 || !strings.Contains(fmt.Sprint(body), "model is not running") {
		t.Errorf("second unload: %d %v", code, body)
	}
	code, body := chat(t, ts, "nope")
	if code != 400 || !strings.Contains(fmt.Sprint(body["error"]), "model 'nope' not found") {
		t.Errorf("unknown model: %d %v", code, body)
	}
	// loaded again on demand
	if code, body := chat(t, ts, "tiny"); code != 200 {
		t.Errorf("tiny again: %d %v", code, body)
	}
}

// TestRouterEvictsLeastRecentlyUsed loads three models at --models-max 2: the one used
// longest ago goes, not the one loaded first.
func TestRouterEvictsLeastRecentlyUsed(t *testing.T) {
	_, ts := startRouter(t, 2, map[string]string{"a": "stories260K.gguf", "b": "llama-2-tiny-random.gguf", "c": "stories260K.gguf"})
	for _, m := range []string{"a", "b", "a"} {
		if code, body := chat(t, ts, m); code != 200 {
			t.Fatalf("%s: %d %v", m, code, body)
		}
	}
	if code, body := post(t, ts.URL+"/models/load", `{"model":"c"}`); code != 200 || body["success"] != true {
		t.Fatalf("load c: %d %v", code, body)
	}
	waitStatus(t, ts, "c", StatusLoaded)
	if got := statuses(t, ts); got["a"] != StatusLoaded || got["b"] != StatusUnloaded {
		t.Errorf("statuses %v, want a loaded and b (least recently used) unloaded", got)
	}
	if code, body := post(t, ts.URL+"/models/load", `{"model":"c"}`); code != 400 || !strings.Contains(fmt.Sprint(body), "already running") {
		t.Errorf("load c again: %d %v", code, body)
	}
}

// TestRouterChildKilledMidStream kills a child with SIGKILL while it streams: the client's
// stream ends with an error event, the router reports the model failed and stays up, and
// the next request loads the model again.
func TestRouterChildKilledMidStream(t *testing.T) {
	r, ts := startRouter(t, 4, map[string]string{"stories": "stories260K.gguf"})
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"stories","messages":[{"role":"user","content":"hi"}],"max_tokens":200000,"stream":true,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatal("no first event")
	}
	r.mu.Lock()
	pid := r.models["stories"].child.cmd.Process.Pid
	r.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	last := ""
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			last = line
		}
	}
	if !strings.HasPrefix(last, `data: {"error":`) || !strings.Contains(last, "stopped answering") {
		t.Errorf("last event %q, want an error event", last)
	}
	waitStatus(t, ts, "stories", StatusFailed)
	var list struct {
		Data []struct {
			Status map[string]any `json:"status"`
		} `json:"data"`
	}
	getJSON(t, ts.URL+"/models", &list)
	if st := list.Data[0].Status; st["failed"] != true || st["exit_code"] != float64(-1) {
		t.Errorf("status %v, want failed with exit code -1", st)
	}
	if code, body := chat(t, ts, "stories"); code != 200 {
		t.Errorf("after the crash: %d %v", code, body)
	}
}

// TestRouterNoAutoload answers a request for an unloaded model with an error when autoload
// is off for it (?autoload=false), and requires the API key on router endpoints.
func TestRouterNoAutoloadAndAPIKey(t *testing.T) {
	r, ts := startRouter(t, 4, map[string]string{"stories": "stories260K.gguf"})
	r.cfg.APIKeys = []string{"sesame"}
	code, body := post(t, ts.URL+"/models/load", `{"model":"stories"}`)
	if code != 401 || fmt.Sprint(body["error"].(map[string]any)["type"]) != "authentication_error" {
		t.Fatalf("without key: %d %v", code, body)
	}
	if got := statuses(t, ts); got["stories"] != StatusUnloaded {
		t.Fatalf("GET /models is public: %v", got)
	}
	req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions?autoload=false", strings.NewReader(`{"model":"stories","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sesame")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "model is not loaded") {
		t.Errorf("autoload=false: %d %s", resp.StatusCode, b)
	}
}

// TestRouterQueueClientLeaves checks that a request that gives up while its model waits
// for room withdraws: the busy model keeps its place and nothing else loads.
func TestRouterQueueClientLeaves(t *testing.T) {
	r, ts := startRouter(t, 1, map[string]string{"a": "stories260K.gguf", "b": "stories260K.gguf"})
	if code, body := chat(t, ts, "a"); code != 200 {
		t.Fatalf("a: %d %v", code, body)
	}
	in, err := r.acquire(context.Background(), "a", true) // a is busy
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.acquire(ctx, "b", true); err != context.DeadlineExceeded {
		t.Fatalf("b: %v, want it to time out waiting", err)
	}
	r.release(in)
	time.Sleep(200 * time.Millisecond)
	if got := statuses(t, ts); got["a"] != StatusLoaded || got["b"] != StatusUnloaded {
		t.Errorf("statuses %v, want a kept and b not loaded", got)
	}
}

// TestRouterStatusEvents follows a load on GET /models/sse: loading (then the child's load
// progress, up to the whole model) and loaded.
func TestRouterStatusEvents(t *testing.T) {
	_, ts := startRouter(t, 4, map[string]string{"stories": "stories260K.gguf"})
	resp, err := http.Get(ts.URL + "/models/sse")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if code, body := post(t, ts.URL+"/models/load", `{"model":"stories"}`); code != 200 {
		t.Fatalf("load: %d %v", code, body)
	}
	sc := bufio.NewScanner(resp.Body)
	var statuses []string
	maxProgress := 0.0
	for sc.Scan() {
		js, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e struct {
			Model, Event string
			Data         struct {
				Status   string
				Progress *float64
			}
		}
		if err := json.Unmarshal([]byte(js), &e); err != nil {
			t.Fatal(err)
		}
		if e.Model != "stories" || e.Event != "status_change" {
			t.Fatalf("event %s", js)
		}
		if e.Data.Progress != nil {
			maxProgress = max(maxProgress, *e.Data.Progress)
		}
		if n := len(statuses); n == 0 || statuses[n-1] != e.Data.Status {
			statuses = append(statuses, e.Data.Status)
		}
		if e.Data.Status == StatusLoaded {
			break
		}
	}
	if strings.Join(statuses, ",") != "loading,loaded" || maxProgress != 1 {
		t.Errorf("statuses %v, progress up to %v; want loading,loaded and 1", statuses, maxProgress)
	}
}

// TestIdleRouterMemory starts the binary as a router with no model loaded and checks its
// peak resident memory stays under 60 MB (Linux: VmHWM of /proc/PID/status).
func TestIdleRouterMemory(t *testing.T) {
	dir := shareddata.Path(t, "models")
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	cmd := exec.Command(binary, "--models-dir", dir, "--port", "0")
	cmd.Env = append(os.Environ(), "LLAMA_CACHE="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "router listening") {
	}
	go io.Copy(io.Discard, stderr)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var kb int
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
		}
	}
	if kb == 0 || kb > 60<<10 {
		t.Errorf("idle router peak memory %d kB, want under 60 MB", kb)
	}
}

// TestRouterResumableStreams routes GET /v1/stream/{id} to the child that ran the
// conversation's chat, and answers 404 for a conversation no child has.
func TestRouterResumableStreams(t *testing.T) {
	_, ts := startRouter(t, 4, map[string]string{"stories": "stories260K.gguf", "tiny": "llama-2-tiny-random.gguf"})
	if code, body := chat(t, ts, "tiny"); code != 200 { // another child, which must not be asked
		t.Fatalf("tiny: %d %v", code, body)
	}
	req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"stories","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}`))
	req.Header.Set("X-Conversation-Id", "conv-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp, err = http.Get(ts.URL + "/v1/stream/conv-1")
	if err != nil {
		t.Fatal(err)
	}
	replay, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(replay), `"model":"stories"`) || !strings.Contains(string(first), "data: ") {
		t.Errorf("replay: %d %s", resp.StatusCode, replay)
	}
	resp, err = http.Get(ts.URL + "/v1/stream/conv-2")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown conversation: %d, want 404", resp.StatusCode)
	}
}

// TestRouterChildSleepsAndWakes runs a child with --sleep-idle-seconds 1: idle, it frees its
// model and the router lists it sleeping (the child stays); a chat wakes it with an answer.
func TestRouterChildSleepsAndWakes(t *testing.T) {
	_, ts := startRouterWith(t, 4, map[string]string{"stories": "stories260K.gguf"}, "--sleep-idle-seconds", "1")
	if code, body := chat(t, ts, "stories"); code != 200 {
		t.Fatalf("first chat: %d %v", code, body)
	}
	waitStatus(t, ts, "stories", StatusSleeping)
	code, body := chat(t, ts, "stories")
	if code != 200 || len(body["choices"].([]any)) != 1 {
		t.Fatalf("chat with the sleeping model: %d %v", code, body)
	}
	waitStatus(t, ts, "stories", StatusLoaded)
}

// TestRouterQueueIsFIFO has the only room (--models-max 1) taken by a busy model while two
// others wait: they get it in the order they asked, each loading in turn.
func TestRouterQueueIsFIFO(t *testing.T) {
	r, ts := startRouter(t, 1, map[string]string{"a": "stories260K.gguf", "b": "stories260K.gguf", "c": "stories260K.gguf"})
	if code, body := chat(t, ts, "a"); code != 200 {
		t.Fatalf("a: %d %v", code, body)
	}
	busy, err := r.acquire(context.Background(), "a", true)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	wait := func(name string) {
		defer wg.Done()
		in, err := r.acquire(context.Background(), name, true)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
		r.release(in)
	}
	wg.Add(2)
	go wait("b")
	time.Sleep(200 * time.Millisecond) // b is queued first
	go wait("c")
	time.Sleep(200 * time.Millisecond)
	r.release(busy)
	wg.Wait()
	if fmt.Sprint(order) != "[b c]" {
		t.Errorf("served %v, want [b c] (arrival order)", order)
	}
	if got := statuses(t, ts); got["c"] != StatusLoaded || got["a"] == StatusLoaded || got["b"] == StatusLoaded {
		t.Errorf("statuses %v, want only c loaded", got)
	}
}

// TestRouterProjectorFolder lists the shared vision model, kept as llama-server's models-dir
// keeps a model with its projector (a subfolder; the projector's file name starts with
// mmproj), under the folder's name with the text model as its file, and chats with it.
func TestRouterProjectorFolder(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "tinyvision")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for link, file := range map[string]string{"tinygemma3v-text-F32.gguf": "tinygemma3v-text-F32.gguf", "mmproj-tinygemma3v-F32.gguf": "tinygemma3v-mmproj-F32.gguf"} {
		if err := os.Symlink(shareddata.Path(t, "models", "vision", file), filepath.Join(sub, link)); err != nil {
			t.Fatal(err)
		}
	}
	_, ts := serveRouter(t, Config{
		Catalog:   Catalog{ModelsDir: dir},
		Command:   []string{binary, "serve", "--router-child"},
		Inherited: []string{"-c", "256", "--temp", "0"},
		Autoload:  true,
	})
	if got := statuses(t, ts); len(got) != 1 || got["tinyvision"] != StatusUnloaded {
		t.Fatalf("statuses %v, want tinyvision alone, unloaded", got)
	}
	if code, body := chat(t, ts, "tinyvision"); code != 200 || body["model"] != "tinyvision" {
		t.Fatalf("chat: %d %v", code, body)
	}
	// the child got the folder's projector: its /props reports vision
	resp, err := http.Get(ts.URL + "/props?model=tinyvision")
	if err != nil {
		t.Fatal(err)
	}
	var props struct {
		Modalities map[string]bool `json:"modalities"`
	}
	json.NewDecoder(resp.Body).Decode(&props)
	resp.Body.Close()
	if !props.Modalities["vision"] {
		t.Errorf("the child's modalities %v: no projector", props.Modalities)
	}
}
