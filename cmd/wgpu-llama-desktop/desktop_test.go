package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// needXvfb returns xvfb-run's path, skipping the test without it (failing under
// WGPU_LLAMA_REQUIRE_GPU, as CI runs).
func needXvfb(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("xvfb-run")
	if err != nil {
		if os.Getenv(gputest.RequireEnv) != "" {
			t.Fatalf("xvfb-run is required (%s is set): install xvfb and xauth (.ci/setup)", gputest.RequireEnv)
		}
		t.Skip("xvfb-run not installed: the desktop app needs a display")
	}
	return path
}

// buildDesktop builds this command into a temporary directory.
func buildDesktop(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wgpu-llama-desktop")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestScreenshotWhileServing runs the app under Xvfb on stories260K with 4 slots while four
// requests run at once, and checks its --screenshot: all eight panels drawn, four slots in the
// slots and KV panels, and the numbers drawn equal to what /slots and /metrics answered.
func TestScreenshotWhileServing(t *testing.T) {
	model := shareddata.Path(t, "models", "stories260K.gguf")
	xvfb := needXvfb(t)
	bin := buildDesktop(t)
	dir := t.TempDir()
	shot := filepath.Join(dir, "shot.png")
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, xvfb, "-a", "-s", "-screen 0 1920x1080x24", bin, "-m", model, "--port", strconv.Itoa(port),
		"-np", "4", "-c", "1024", "--metrics", "--screenshot", shot, "--after", "50")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHealthy(t, url, done, &stderr)

	var wg sync.WaitGroup
	for i, prompt := range []string{"Once upon a time", "The little dog", "Lily and Tom went", "One day, a bird"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"prompt": %q, "n_predict": %d, "temperature": 0}`, prompt, 60+4*i)
			resp, err := http.Post(url+"/completion", "application/json", strings.NewReader(body))
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("request %d: status %d", i, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the app: %v\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("the app did not exit after its screenshot\n%s", stderr.String())
	}
	if dst := os.Getenv("WGPU_LLAMA_ARTIFACTS"); dst != "" {
		// CI keeps the picture to look at
		if data, err := os.ReadFile(shot); err == nil {
			os.MkdirAll(dst, 0o755)
			os.WriteFile(filepath.Join(dst, "desktop-screenshot.png"), data, 0o644)
		}
	}
	checkShot(t, shot)
}

// waitHealthy waits for the server's /health to answer 200.
func waitHealthy(t *testing.T, url string, done <-chan error, stderr *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("the app exited early: %v\n%s", err, stderr.String())
		default:
		}
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the server never became healthy\n%s", stderr.String())
}

// shot is the JSON the app writes beside its screenshot.
type shot struct {
	Pass   uint64 `json:"pass"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Panels []struct {
		Title      string
		X, Y, W, H int
	} `json:"panels"`
	Slots []struct {
		ID      int    `json:"id"`
		State   string `json:"state"`
		Tokens  int    `json:"tokens"`
		Context int    `json:"n_ctx"`
	} `json:"slots"`
	KV struct {
		Used        int            `json:"used"`
		Pages       int            `json:"pages"`
		PagesBySlot map[string]int `json:"pages_by_slot"`
	} `json:"kv"`
	Totals struct {
		PromptTokens    float64 `json:"prompt_tokens_total"`
		PredictedTokens float64 `json:"tokens_predicted_total"`
		Decodes         float64 `json:"n_decode_total"`
		KVTokens        float64 `json:"kv_cache_tokens"`
	} `json:"totals"`
	TimelinePasses int `json:"timeline_passes"`
	Kernels        int `json:"kernel_families"`
	Candidates     []struct {
		P float64 `json:"p"`
	} `json:"candidates"`
	MemoryBytes uint64 `json:"memory_bytes"`
	Attention   *struct {
		Positions int `json:"positions"`
	} `json:"attention"`
	Server struct {
		Slots []struct {
			ID            int  `json:"id"`
			NCtx          int  `json:"n_ctx"`
			IsProcessing  bool `json:"is_processing"`
			NPromptTokens int  `json:"n_prompt_tokens"`
		} `json:"slots"`
		Metrics string `json:"metrics"`
	} `json:"server"`
}

// xvfbApp is the desktop app serving stories260K under xvfb-run, and what the shell line that
// started it wrote from inside (the display it got, its pid).
type xvfbApp struct {
	done   <-chan error
	stderr *bytes.Buffer
	told   string
}

// startXvfbApp starts the app in dir through `sh -c`: shell runs first with a file as $0 to
// write into, then the shell becomes the app. It returns once the app's server is healthy.
func startXvfbApp(t *testing.T, ctx context.Context, dir, shell string) xvfbApp {
	t.Helper()
	model := shareddata.Path(t, "models", "stories260K.gguf")
	xvfb := needXvfb(t)
	bin := buildDesktop(t)
	port := freePort(t)
	told := filepath.Join(dir, "told")
	cmd := exec.CommandContext(ctx, xvfb, "-a", "sh", "-c", shell+`; shift; exec "$@"`, told, "_",
		bin, "-m", model, "--port", strconv.Itoa(port), "-c", "256")
	cmd.Dir = dir
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitHealthy(t, fmt.Sprintf("http://127.0.0.1:%d", port), done, stderr)
	data, err := os.ReadFile(told)
	if err != nil {
		t.Fatal(err)
	}
	return xvfbApp{done: done, stderr: stderr, told: strings.TrimSpace(string(data))}
}

// checkShot checks the screenshot and what the app says it drew.
func checkShot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	data, err := os.ReadFile(strings.TrimSuffix(path, ".png") + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var s shot
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("screenshot JSON: %v\n%s", err, data)
	}
	if b := img.Bounds(); b.Dx() != s.Width || b.Dy() != s.Height {
		t.Errorf("PNG is %v, the JSON says %dx%d", b, s.Width, s.Height)
	}
	if s.Pass < 50 {
		t.Errorf("screenshot at pass %d, want at least 50", s.Pass)
	}
	titles := []string{"Slots", "Batch timeline", "Kernels", "KV cache", "Throughput", "Next token", "Memory", "Attention"}
	if len(s.Panels) != len(titles) {
		t.Fatalf("%d panels drawn, want %d", len(s.Panels), len(titles))
	}
	for i, pn := range s.Panels {
		if pn.Title != titles[i] {
			t.Errorf("panel %d is %q, want %q", i, pn.Title, titles[i])
		}
		if share := drawnShare(img, image.Rect(pn.X, pn.Y, pn.X+pn.W, pn.Y+pn.H)); share < 0.02 {
			t.Errorf("panel %q: only %.2f%% of its pixels differ from its background", pn.Title, 100*share)
		}
	}
	// four slots, each with its request's tokens, in the slots and KV panels
	if len(s.Slots) != 4 || len(s.Server.Slots) != 4 {
		t.Fatalf("%d slots drawn, /slots has %d; want 4", len(s.Slots), len(s.Server.Slots))
	}
	for i, sl := range s.Slots {
		srv := s.Server.Slots[i]
		if sl.ID != srv.ID || sl.State != "idle" || srv.IsProcessing || sl.Context != srv.NCtx || sl.Tokens != srv.NPromptTokens || sl.Tokens == 0 {
			t.Errorf("slot %d drawn %+v, /slots says %+v", i, sl, srv)
		}
		if want := (sl.Tokens + 15) / 16; s.KV.PagesBySlot[strconv.Itoa(sl.ID)] != want {
			t.Errorf("slot %d: %d KV pages drawn, want %d for %d tokens", sl.ID, s.KV.PagesBySlot[strconv.Itoa(sl.ID)], want, sl.Tokens)
		}
	}
	metric := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` ([0-9.e+]+)$`).FindStringSubmatch(s.Server.Metrics)
		if m == nil {
			t.Fatalf("/metrics lacks %s:\n%s", name, s.Server.Metrics)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	for _, c := range []struct {
		name  string
		drawn float64
	}{
		{"llamacpp:prompt_tokens_total", s.Totals.PromptTokens},
		{"llamacpp:tokens_predicted_total", s.Totals.PredictedTokens},
		{"llamacpp:n_decode_total", s.Totals.Decodes},
		{"wgpu_llama_kv_cache_tokens", s.Totals.KVTokens},
	} {
		if got := metric(c.name); got != c.drawn {
			t.Errorf("%s: drawn %v, /metrics %v", c.name, c.drawn, got)
		}
	}
	if float64(s.KV.Used) != s.Totals.KVTokens {
		t.Errorf("KV panel shows %d rows used, the totals %v", s.KV.Used, s.Totals.KVTokens)
	}
	if s.TimelinePasses < 50 || s.Kernels == 0 || len(s.Candidates) == 0 || s.MemoryBytes == 0 || s.Attention == nil || s.Attention.Positions == 0 {
		t.Errorf("panels' content: timeline %d passes, %d kernel families, %d candidates, %d bytes of memory, attention %+v",
			s.TimelinePasses, s.Kernels, len(s.Candidates), s.MemoryBytes, s.Attention)
	}
}

// drawnShare is the share of r's pixels whose colour differs from the colour most common in
// r (the panel's fill).
func drawnShare(img image.Image, r image.Rectangle) float64 {
	r = r.Intersect(img.Bounds())
	counts := map[[4]uint32]int{}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, ca := img.At(x, y).RGBA()
			counts[[4]uint32{cr, cg, cb, ca}]++
		}
	}
	most, total := 0, r.Dx()*r.Dy()
	for _, n := range counts {
		most = max(most, n)
	}
	if total == 0 {
		return 0
	}
	return float64(total-most) / float64(total)
}

// TestKeysAndClose runs the app under Xvfb, presses F12 (a PNG of the window in the working
// directory) and then Escape, which closes the window as its close button does: the server
// shuts down and the app exits 0.
func TestKeysAndClose(t *testing.T) {
	shareddata.Path(t, "models", "stories260K.gguf") // skips early without the shared data
	needXvfb(t)
	xdotool, err := exec.LookPath("xdotool")
	if err != nil {
		if os.Getenv(gputest.RequireEnv) != "" {
			t.Fatal("xdotool is required: install it (.ci/setup)")
		}
		t.Skip("xdotool not installed")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// the shell tells the test which display xvfb-run chose, then becomes the app
	app := startXvfbApp(t, ctx, dir, `echo "$DISPLAY $XAUTHORITY" > "$0"`)
	done, stderr := app.done, app.stderr
	disp, auth, _ := strings.Cut(app.told, " ")
	// press sends key to the app's window, searching for it again when the one found went
	// away before the event reached it (X's BadWindow: a loaded machine has shown it between
	// the search and the send). A key that closes the window may see it, and then X, go before
	// xdotool is done with it: the app's log tells that the key arrived.
	press := func(key string) {
		for try := 1; ; try++ {
			x := exec.CommandContext(ctx, xdotool, "search", "--sync", "--name", "^wgpu-llama$", "key", "--window", "%1", key)
			x.Env = append(os.Environ(), "DISPLAY="+disp, "XAUTHORITY="+auth)
			out, err := x.CombinedOutput()
			if err == nil || key == "Escape" && strings.Contains(stderr.String(), "window closed") {
				return
			}
			if try == 5 || !strings.Contains(string(out), "BadWindow") {
				t.Fatalf("xdotool key %s: %v\n%s\nthe app's log:\n%s", key, err, out, stderr.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	press("F12")
	deadline := time.Now().Add(30 * time.Second)
	for {
		shots, _ := filepath.Glob(filepath.Join(dir, "wgpu-llama-*.png"))
		if len(shots) == 1 {
			f, err := os.Open(shots[0])
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(f)
			f.Close()
			if err == nil && img.Bounds().Dx() >= 320 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("F12 saved no PNG (%v)\n%s", shots, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	press("Escape")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the app after its window closed: %v\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("the app did not exit when its window closed\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "window closed") || !strings.Contains(stderr.String(), "shutting down") {
		t.Errorf("no clean shutdown logged:\n%s", stderr.String())
	}
}

// TestRouterModeScreenshot runs the app as a router over a models directory: the window lists
// the router's models, and --screenshot saves it once drawn.
func TestRouterModeScreenshot(t *testing.T) {
	model := shareddata.Path(t, "models", "stories260K.gguf")
	xvfb := needXvfb(t)
	bin := buildDesktop(t)
	dir := t.TempDir()
	models := filepath.Join(dir, "models")
	if err := os.MkdirAll(models, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(model, filepath.Join(models, "stories260K.gguf")); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "router.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, xvfb, "-a", bin, "--models-dir", models, "--port", strconv.Itoa(freePort(t)), "--screenshot", shot)
	cmd.Env = append(os.Environ(), "LLAMA_CACHE="+filepath.Join(dir, "hf"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the app: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "router.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Router bool `json:"router"`
		Models []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"models"`
	}
	if err := json.Unmarshal(data, &got); err != nil || !got.Router || len(got.Models) != 1 || got.Models[0].ID != "stories260K" || got.Models[0].Status != "unloaded" {
		t.Fatalf("router shot %s (%v)", data, err)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if share := drawnShare(img, img.Bounds()); share < 0.01 {
		t.Errorf("router frame: %.2f%% drawn", 100*share)
	}
}

// TestTerminateExits sends the app SIGTERM: the server drains, the window closes and the app
// exits 0, whichever of the two notices first.
func TestTerminateExits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	app := startXvfbApp(t, ctx, t.TempDir(), `echo $$ > "$0"`)
	done, stderr := app.done, app.stderr
	pid, err := strconv.Atoi(app.told)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || !strings.Contains(stderr.String(), "window closed") {
			t.Fatalf("after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("the app did not exit after SIGTERM\n%s", stderr.String())
	}
}
