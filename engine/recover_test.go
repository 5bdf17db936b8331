package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestDeviceLossRecovers loses the device (wgpu's destroy call) while a generation streams:
// that generation fails with ErrDeviceLost, a request queued behind it runs once the device is
// reopened and the model loaded again, and greedy output after the recovery is the same as
// before it.
func TestDeviceLossRecovers(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 1024, Slots: 1})
	before, _ := generate(t, e, "Once upon a time", greedy(24))
	ctx := context.Background()

	long, err := e.Submit(ctx, engine.Task{Prompt: e.Tokenizer().Encode("Once upon a time", true, true), Params: greedy(400)})
	if err != nil {
		t.Fatal(err)
	}
	first := <-long // the generation is running
	if first.Stop {
		t.Fatalf("the long generation ended at once: %+v", first)
	}
	// One slot: this one waits in the queue through the loss and the reload.
	queued, err := e.Submit(ctx, engine.Task{Prompt: e.Tokenizer().Encode("Once upon a time", true, true), Params: greedy(24)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoseDevice(ctx); err != nil {
		t.Fatal(err)
	}
	_, final, _ := collect(t, long)
	if !errors.Is(final.Err, engine.ErrDeviceLost) || !strings.Contains(final.Err.Error(), "retry") {
		t.Fatalf("the running generation ended with %v, want ErrDeviceLost saying to retry", final.Err)
	}
	after, res, _ := collect(t, queued)
	if res.Err != nil {
		t.Fatalf("the queued request after the recovery: %v", res.Err)
	}
	if after != before {
		t.Errorf("after the recovery: %q, before: %q", after, before)
	}
	if e.Recoveries() != 1 || e.Health() != nil {
		t.Errorf("Recoveries %d, Health %v; want 1, nil", e.Recoveries(), e.Health())
	}
	if st := e.Stats(); st.Processing != 0 || st.KVPagesAdrift != 0 || st.GPUMemory == 0 || st.Recoveries != 1 {
		t.Errorf("after the recovery: %d slots processing, %d pages adrift, %d bytes of GPU memory, %d recoveries; want 0, 0, > 0, 1",
			st.Processing, st.KVPagesAdrift, st.GPUMemory, st.Recoveries)
	}
}

// TestDeviceLossReloadFails makes the reload after a loss fail (the model file is gone): Health
// says so, a request fails with the reason, and once the file is back the next request loads
// the model and runs, clearing Health.
func TestDeviceLossReloadFails(t *testing.T) {
	src, err := os.ReadFile(shareddata.Path(t, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stories260K.gguf")
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 512, Slots: 1})
	before, _ := generate(t, e, "Once upon a time", greedy(16))
	ctx := context.Background()
	if err := os.Rename(path, path+".away"); err != nil {
		t.Fatal(err)
	}
	if err := e.LoseDevice(ctx); err != nil {
		t.Fatal(err)
	}
	// The request finds the loss, the reload fails, and so does the request.
	ch, err := e.Submit(ctx, engine.Task{Prompt: e.Tokenizer().Encode("Once upon a time", true, true), Params: greedy(16)})
	if err != nil {
		t.Fatal(err)
	}
	if _, res, _ := collect(t, ch); res.Err == nil || !strings.Contains(res.Err.Error(), "no such file") {
		t.Errorf("a request while the model cannot load: %v, want the load's error", res.Err)
	}
	if h := e.Health(); h == nil || !strings.Contains(h.Error(), "device was lost") || !strings.Contains(h.Error(), "no such file") {
		t.Errorf("Health = %v; want the loss and the failed reload", h)
	}
	if err := os.Rename(path+".away", path); err != nil {
		t.Fatal(err)
	}
	after, _ := generate(t, e, "Once upon a time", greedy(16))
	if after != before || e.Health() != nil {
		t.Errorf("once the file is back: %q (Health %v), want %q and nil", after, e.Health(), before)
	}
}
