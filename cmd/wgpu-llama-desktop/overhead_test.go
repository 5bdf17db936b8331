package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// BenchmarkViewOverhead measures the engine's generation throughput with the view open (this
// app under Xvfb) and closed (`wgpu-llama serve`, the same engine without a window), one server
// at a time, alternating, under the same load: four streams of 512 tokens at once on
// stories260K. It reports each side's median tokens/s and the view's cost in percent (the
// median over adjacent pairs of runs):
//
//	go test ./cmd/wgpu-llama-desktop -run '^$' -bench ViewOverhead -benchtime 5x
func BenchmarkViewOverhead(b *testing.B) {
	model := shareddata.Path(b, "models", "stories260K.gguf")
	xvfb, err := exec.LookPath("xvfb-run")
	if err != nil {
		b.Skip("xvfb-run not installed")
	}
	desktop := buildDesktop(b)
	desktopPath = desktop
	server := desktop + "-server"
	if out, err := exec.Command("go", "build", "-o", server, "../wgpu-llama").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	args := []string{"-m", model, "-np", "4", "-c", "4096"}
	open := func(port int) *exec.Cmd {
		return exec.Command(xvfb, append([]string{"-a", "-s", "-screen 0 1920x1080x24", desktop, "--port", strconv.Itoa(port)}, args...)...)
	}
	closed := func(port int) *exec.Cmd {
		return exec.Command(server, append([]string{"--port", strconv.Itoa(port)}, args...)...)
	}
	var rates [2][]float64
	var shares []float64
	shareRe := regexp.MustCompile(`busy_draw_share=([0-9.]+)%`)
	for range b.N {
		for i, start := range []func(int) *exec.Cmd{open, closed} {
			rate, log := loadRate(b, start)
			rates[i] = append(rates[i], rate)
			if m := shareRe.FindStringSubmatch(log); i == 0 && m != nil {
				v, _ := strconv.ParseFloat(m[1], 64)
				shares = append(shares, v)
			}
		}
	}
	med := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
	}
	b.Logf("open: %.0f tok/s, closed: %.0f tok/s", rates[0], rates[1])
	// the cost is the median over adjacent pairs of runs, which see the same machine
	costs := make([]float64, len(rates[0]))
	for i := range costs {
		costs[i] = 100 * (1 - rates[0][i]/rates[1][i])
	}
	b.ReportMetric(med(rates[0]), "open-tok/s")
	b.ReportMetric(med(rates[1]), "closed-tok/s")
	b.ReportMetric(med(costs), "cost-%")
	if len(shares) > 0 {
		// the app's own account: its frames' share of the time the engine was busy
		b.ReportMetric(med(shares), "draw-share-%")
	}
}

// desktopPath is the app's binary, which loadRate stops by name.
var desktopPath string

// loadRate starts a server, runs the load against it and stops it, returning generated
// tokens per second of the load and the server's log.
func loadRate(b *testing.B, start func(port int) *exec.Cmd) (float64, string) {
	port := freePort(b)
	cmd := start(port)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // xvfb-run's children go with it
	var log bytes.Buffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stop := func() {
		// the app first, so that it logs its account before xvfb-run takes the display away
		if exec.Command("pkill", "-TERM", "-f", "^"+regexp.QuoteMeta(desktopPath)+" ").Run() != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // not the app: the plain server
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		<-done
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			b.Fatalf("server not healthy\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	run := func(n int) int {
		var wg sync.WaitGroup
		var mu sync.Mutex
		total := 0
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := fmt.Sprintf(`{"prompt": "Once upon a time %d", "n_predict": %d, "temperature": 0, "ignore_eos": true}`, i, n)
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/completion", strings.NewReader(body))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				defer resp.Body.Close()
				var out struct {
					TokensPredicted int `json:"tokens_predicted"`
				}
				json.NewDecoder(resp.Body).Decode(&out)
				mu.Lock()
				total += out.TokensPredicted
				mu.Unlock()
			}()
		}
		wg.Wait()
		return total
	}
	run(8) // warm-up: pipelines compiled, the window drawn
	t0 := time.Now()
	n := run(512)
	rate := float64(n) / time.Since(t0).Seconds()
	stop()
	return rate, log.String()
}
