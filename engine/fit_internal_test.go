package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// TestRefusedAtLoad: on a device that does not tell its memory (NVIDIA's), the load's first
// refused allocation comes back as checkFits' message, sizes and what to lower, still wrapping
// the refusal; any other error passes unchanged.
func TestRefusedAtLoad(t *testing.T) {
	f, err := gguf.Open(shareddata.Path(t, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dev, err := gpu.Open(-1)
	gputest.Check(t, err)
	defer dev.Close()
	c, err := model.ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{CtxSize: 8 * 32768, Slots: 8}
	kp, err := planKV(cfg, c.NCtxTrain, cfg.Slots)
	if err != nil {
		t.Fatal(err)
	}
	opts := model.Options{MaxBatch: 512, MaxOutputs: 8}
	refusal := fmt.Errorf("model: KV cache: gpu: create buffer \"cache_k_l3\" (4194304 bytes): %w (171966464 bytes in use)", gpu.ErrOutOfMemory)
	got := refusedAtLoad(refusal, dev, f, c, opts, kp, cfg)
	if !errors.Is(got, ErrTooBig) || !errors.Is(got, gpu.ErrOutOfMemory) {
		t.Fatalf("refusedAtLoad = %v, want ErrTooBig wrapping gpu.ErrOutOfMemory", got)
	}
	for _, want := range []string{"weights 1.1 MiB", "KV cache 160.0 MiB for 262144 tokens in f16", dev.Info.Name + " refused it",
		"lower the context (-c 262144) or the slots (-np 8)", "171966464 bytes in use"} {
		if !strings.Contains(got.Error(), want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if again := refusedAtLoad(got, dev, f, c, opts, kp, cfg); again != got {
		t.Errorf("an ErrTooBig was wrapped again: %v", again)
	}
	other := errors.New("gguf: tensor blk.0.attn_q.weight: data out of bounds")
	if got := refusedAtLoad(other, dev, f, c, opts, kp, cfg); got != other {
		t.Errorf("refusedAtLoad(%v) = %v, want it unchanged", other, got)
	}
}
