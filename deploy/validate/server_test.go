package validate

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer collects a child process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The model server, run with the Deployment's args on the shared test model (and a LoRA
// adapter), answers /health as the probes expect and writes every series the EPP config and
// the ScaledObject read, with the labels the EPP parses.
func TestServerWritesWhatTheEPPReads(t *testing.T) {
	docs := manifests(t)
	_, c := modelServer(t, docs)
	ex := eppConfig(t, docs)

	shared := os.Getenv("WGPU_LLAMA_SHARED")
	if shared == "" {
		shared = filepath.Join(repoRoot(t), "..", "shared")
	}
	model := filepath.Join(shared, "models", "stories260K.gguf")
	adapter := filepath.Join(shared, "models", "lora", "stories260K-lora-A-F16.gguf")
	for _, f := range []string{model, adapter} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("shared test data: %v", err)
		}
	}

	// A free loopback port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	// The Deployment's args, with the model, address and port of this test.
	known := serverFlags(t)
	var args []string
	for _, f := range parseArgs(t, c.Args, serverIsBool(t)) {
		switch f.Name {
		case "m", "model":
			f.Value = model
		case "host":
			f.Value = "127.0.0.1"
		case "port":
			f.Value = strconv.Itoa(port)
		}
		if f.Value == "" && known[f.Name] {
			args = append(args, "--"+f.Name)
		} else {
			args = append(args, "--"+f.Name, f.Value)
		}
	}
	args = append(args, "--lora", adapter)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBinary(t), args...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("wgpu-llama %s:\n%s", strings.Join(args, " "), out.String())
		}
	}()

	base := "http://127.0.0.1:" + strconv.Itoa(port)
	client := &http.Client{Timeout: 5 * time.Second}
	statuses := map[int]int{}
	healthy := false
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && !healthy; {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("wgpu-llama exited before /health answered 200: %v", err)
		default:
		}
		if resp, err := client.Get(base + "/health"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[resp.StatusCode]++
			healthy = resp.StatusCode == http.StatusOK
		}
		if !healthy {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !healthy {
		t.Fatalf("/health never answered 200 (answers: %v)", statuses)
	}
	for code := range statuses {
		if code != http.StatusOK && code != http.StatusServiceUnavailable {
			t.Errorf("/health answered %d while loading, want 503 (not ready) or 200", code)
		}
	}
	t.Logf("/health answers while starting: %v", statuses)

	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	series := map[string][]string{} // name -> label sets
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		series[name] = append(series[name], rest)
	}

	need := func(what, spec string) {
		ms, err := ParseMetricSpec(spec)
		if err != nil || ms == nil {
			return
		}
		if _, ok := series[ms.Name]; !ok {
			t.Errorf("%s reads %s, which /metrics does not have", what, ms.Name)
		}
	}
	engines := []string{"vllm"}
	for _, ec := range ex.EngineConfigs {
		engines = append(engines, ec.Name)
	}
	for _, name := range engines {
		ec, _ := ex.Engine(name)
		for _, spec := range []string{ec.QueuedRequestsSpec, ec.RunningRequestsSpec, ec.KVUsageSpec, ec.LoRASpec, ec.CacheInfoSpec, ec.CacheBlockSizeSpec, ec.CacheNumBlocksSpec} {
			need("EPP engine "+name, spec)
		}
	}
	// The labels the EPP reads from vLLM's info series.
	for name, labels := range map[string][]string{
		"vllm:cache_config_info":  {"block_size=", "num_gpu_blocks="},
		"vllm:lora_requests_info": {"max_lora=", "running_lora_adapters=", "waiting_lora_adapters="},
	} {
		for _, s := range series[name] {
			for _, l := range labels {
				if !strings.Contains(s, l) {
					t.Errorf("%s%s has no label %s", name, s, strings.TrimSuffix(l, "="))
				}
			}
		}
	}
	sos, _ := objects[*ScaledObject](docs)
	for _, so := range sos {
		for _, tr := range so.Spec.Triggers {
			for _, name := range metricNameRE.FindAllString(tr.Metadata["query"], -1) {
				need("ScaledObject "+so.Name+" query", name)
			}
		}
	}
}
