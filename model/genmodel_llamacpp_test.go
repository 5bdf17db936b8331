package model_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// llamaServerProbs runs llama.cpp's own llama-server (the shared build) on path and returns its
// greedy /completion from "Once upon a time" with the top-10 probabilities of each step, as
// the shared references were made (models/moe/refs.sh).
func llamaServerProbs(t *testing.T, path string, n int) probsRef {
	t.Helper()
	tool := shareddata.Path(t, "llama.cpp", "llama-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var logs bytes.Buffer
	cmd := exec.Command(tool, "-m", path, "--host", "127.0.0.1", "--port", fmt.Sprint(port), "-c", "256", "-np", "1")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("llama-server did not come up:\n%s", logs.Bytes())
		}
	}
	body := fmt.Sprintf(`{"prompt":"Once upon a time","n_predict":%d,"temperature":0,"n_probs":10,"return_tokens":true}`, n)
	resp, err := http.Post(base+"/completion", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("llama-server /completion: %v %d %s", err, resp.StatusCode, b)
	}
	return parseProbsRef(t, "llama-server's answer", b)
}

// TestGenModelMoEMatchesLlamaCpp writes gen-model's qwen3moe, qwen2moe and gpt-oss files (moe-tiny's
// shape; F32, Q8_0, and MXFP4 experts) and checks that llama.cpp's own llama-server loads
// them and generates, from "Once upon a time", our greedy tokens (or parts at a near-tie).
func TestGenModelMoEMatchesLlamaCpp(t *testing.T) {
	dev := gputest.Device(t)
	for _, arch := range []string{"qwen3moe", "qwen2moe", "gpt-oss"} {
		for _, mix := range []quantize.Mix{quantize.MixF32, quantize.MixQ8_0, quantize.MixMXFP4_MOE} {
			t.Run(arch+"/"+mix.String(), func(t *testing.T) {
				c, err := synth.Preset("moe-tiny")
				if err != nil {
					t.Fatal(err)
				}
				c.Arch, c.Mix = arch, mix
				path := filepath.Join(t.TempDir(), "m.gguf")
				if _, err := synth.WriteFile(path, c, nil); err != nil {
					t.Fatal(err)
				}
				ref := llamaServerProbs(t, path, 16)
				f, err := gguf.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				m, err := model.Load(dev, f, model.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				checkAgainstProbs(t, m, ref, refLimits{step0: 1e-3, all: 1e-3}) // the target, met here
			})
		}
	}
}
