package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

func requireGPU(t *testing.T) {
	t.Helper()
	_, err := gpu.Adapters()
	gputest.Check(t, err)
}

// TestCompleteGreedy is the walking skeleton's first acceptance check: llama.cpp's greedy
// output for stories260K, byte for byte on stdout.
func TestCompleteGreedy(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	requireGPU(t)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"complete", "-m", path, "-p", "Once upon a time", "-n", "32", "--temp", "0"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	const want = " Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw\n\n"
	if stdout.String() != want {
		t.Errorf("stdout %q\nwant   %q", stdout.String(), want)
	}
	if !strings.Contains(stderr.String(), "model loaded") {
		t.Errorf("stderr lacks the load log:\n%s", stderr.String())
	}
}

// TestCompleteEveryModel generates greedily with every real model in the shared models dir.
func TestCompleteEveryModel(t *testing.T) {
	for _, name := range []string{"stories260K.gguf", "llama-2-tiny-random.gguf"} {
		path := shareddata.Path(t, "models", name)
		requireGPU(t)
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), []string{"complete", "-m", path, "-p", "Hello", "-n", "8", "--temp", "0", "-c", "256"}, &stdout, &stderr); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, stderr.String())
		}
		if !strings.HasPrefix(stdout.String(), " Hello") || len(stdout.String()) <= len(" Hello\n\n") {
			t.Errorf("%s: stdout %q", name, stdout.String())
		}
	}
}

func TestCLIErrors(t *testing.T) {
	cases := [][]string{
		{"frobnicate"},
		{"complete", "--no-such-flag"},
		{"complete", "-m", "/nonexistent.gguf", "-p", "x"},
		{"serve", "extra-arg"},
		{"serve", "--reasoning-format", "openai"},
		{"serve", "--reasoning-budget", "-5"},
		{"devices", "x"},
	}
	for _, args := range cases {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, &stdout, &stderr); err == nil {
			t.Errorf("%q: expected an error", args)
		}
	}
}

func TestDevices(t *testing.T) {
	requireGPU(t)
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"devices"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	if !strings.HasPrefix(out, "INDEX") || !strings.Contains(out, "FEATURES") || !strings.Contains(out, "vulkan") && !strings.Contains(out, "metal") && !strings.Contains(out, "d3d12") {
		t.Errorf("devices output:\n%s", out)
	}
}

// TestCompleteF32Cache runs with llama.cpp's --cache-type-k/-v f32 spelling and rejects
// unsupported cache types.
func TestCompleteF32Cache(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	requireGPU(t)
	args := []string{"complete", "-m", path, "-p", "Once upon a time", "-n", "16", "--temp", "0"}
	f16 := runOK(t, args...)
	if f32 := runOK(t, append(args, "-ctk", "f32", "-ctv", "f32")...); f32 != f16 || !strings.HasPrefix(f32, " Once upon a time, there was a little girl") {
		t.Errorf("f32 cache: %q, f16 cache: %q", f32, f16)
	}
	for _, args := range [][]string{{"-ctk", "q8_0", "-ctv", "q8_0"}, {"-ctk", "f32"}} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), append([]string{"complete", "-m", path, "-p", "x"}, args...), &stdout, &stderr); err == nil {
			t.Errorf("%q: expected an error", args)
		}
	}
}
