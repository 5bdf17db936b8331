package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// TestLoadTooBig loads stories260K with --gpu-memory below its footprint: the load fails
// before uploading anything, with the parts' sizes and the flag that shrinks the biggest.
func TestLoadTooBig(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	_, err := gpu.Adapters()
	gputest.Check(t, err)
	for _, c := range []struct {
		name  string
		cfg   engine.Config
		lower string
	}{
		// 8 slots of 32768 tokens: the KV cache (160 MiB in f16) dominates.
		{"KV cache", engine.Config{CtxSize: 8 * 32768, Slots: 8, GPUMemory: 64 << 20}, "lower the context (-c 262144) or the slots (-np 8)"},
		{"KV cache f32", engine.Config{CtxSize: 8 * 32768, Slots: 8, KVF32: true, GPUMemory: 64 << 20}, "keep the cache in f16 (-ctk f16)"},
		// A small context: the 1 MiB of weights are the biggest part.
		{"weights", engine.Config{CtxSize: 256, BatchSize: 8, GPUMemory: 512 << 10}, "smaller quantization"},
	} {
		c.cfg.ModelPath, c.cfg.Device = path, -1
		c.cfg.Logger = log.New(&strings.Builder{})
		_, err := engine.Load(context.Background(), c.cfg)
		if !errors.Is(err, engine.ErrTooBig) {
			t.Fatalf("%s: %v, want ErrTooBig", c.name, err)
		}
		for _, want := range []string{"weights 1.1 MiB", "KV cache", "scratch", "(--gpu-memory)", c.lower} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q lacks %q", c.name, err, want)
			}
		}
	}
}

// TestOutOfMemoryWhileRunning caps the device's memory at what the engine holds after loading a
// Qwen projector, whose encoder sizes its buffers to each image: encoding an image fails with
// ErrOutOfMemory, the engine goes on (a text request runs, no recovery), and with the cap
// lifted the image encodes.
func TestOutOfMemoryWhileRunning(t *testing.T) {
	text, proj := synthVision(t, "qwen2vl_merger")
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: text, MMProjPath: proj, CtxSize: 512})
	h, _ := e.Vision()
	ctx := context.Background()
	generate(t, e, "Once upon a time", greedy(8)) // M-RoPE's positions take a buffer at the first pass
	if err := e.CapMemory(ctx, 0); err != nil {
		t.Fatal(err)
	}
	prep := vision.Prepare(noise(150, 80, 1), h)
	encode := func(key byte) error {
		_, err := e.EncodeImage(ctx, [32]byte{key}, func() (vision.Prepared, error) { return prep, nil })
		return err
	}
	if err := encode(1); !errors.Is(err, engine.ErrOutOfMemory) {
		t.Fatalf("an image with no memory to spare: %v, want ErrOutOfMemory", err)
	}
	if e.Health() != nil || e.Recoveries() != 0 {
		t.Fatalf("out of memory was taken for a device loss: Health %v, Recoveries %d", e.Health(), e.Recoveries())
	}
	if _, final := generate(t, e, "Once upon a time", greedy(8)); final.TokensPredicted != 8 {
		t.Errorf("a text request after the failed image: %d tokens, want 8", final.TokensPredicted)
	}
	if err := e.CapMemory(ctx, -1); err != nil {
		t.Fatal(err)
	}
	if err := encode(2); err != nil {
		t.Errorf("the image with the cap lifted: %v", err)
	}
}
