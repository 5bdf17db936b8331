package gpu_test

import (
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// TestDestroyLosesDevice forces a device loss through wgpu's destroy call after a pass has
// run: every later call (allocation, write, a pass with cached pipelines and bind groups, a
// pass needing a new pipeline) fails with ErrDeviceLost rather than crashing or hanging.
func TestDestroyLosesDevice(t *testing.T) {
	d, err := gpu.Open(-1)
	gputest.Check(t, err)
	defer d.Close()
	logits, err := d.Upload("logits", gpu.Bytes([]float32{0.5, -1, 3, 2, 1}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.NewBuffer("out", 8)
	if err != nil {
		t.Fatal(err)
	}
	argmax := func() ([]byte, error) {
		r, err := d.Begin()
		if err != nil {
			return nil, err
		}
		r.Argmax(logits, out, 5, 1, 0, 1, nil)
		return r.SubmitAndRead(out, 0, 8)
	}
	raw, err := argmax()
	if err != nil || raw[0] != 2 {
		t.Fatalf("before the loss: %v, %v; want index 2", raw, err)
	}
	if d.Lost() != nil {
		t.Fatalf("Lost before Destroy: %v", d.Lost())
	}
	d.Destroy()
	if !errors.Is(d.Lost(), gpu.ErrDeviceLost) {
		t.Fatalf("Lost after Destroy: %v", d.Lost())
	}
	if _, err := d.NewBuffer("after", 64); !errors.Is(err, gpu.ErrDeviceLost) {
		t.Errorf("NewBuffer: %v, want ErrDeviceLost", err)
	}
	if err := d.Write(out, 0, make([]byte, 8)); !errors.Is(err, gpu.ErrDeviceLost) {
		t.Errorf("Write: %v, want ErrDeviceLost", err)
	}
	if _, err := argmax(); !errors.Is(err, gpu.ErrDeviceLost) {
		t.Errorf("a pass: %v, want ErrDeviceLost", err)
	}
	if _, err := d.Read(out, 0, 8); !errors.Is(err, gpu.ErrDeviceLost) {
		t.Errorf("Read: %v, want ErrDeviceLost", err)
	}
}

// TestBudget checks the storage byte count and SetBudget's cap: an allocation beyond it fails
// with ErrOutOfMemory and the sizes, Memory reports the cap, and releasing makes room again.
func TestBudget(t *testing.T) {
	d, err := gpu.Open(-1)
	gputest.Check(t, err)
	defer d.Close()
	base := d.StorageBytes()
	a, err := d.NewBuffer("a", 1001) // rounds up to 1004
	if err != nil {
		t.Fatal(err)
	}
	if got := d.StorageBytes() - base; got != 1004 {
		t.Fatalf("StorageBytes grew by %d, want 1004", got)
	}
	d.SetBudget(base + 4096)
	if n, src := d.Memory(); n != base+4096 || src != "--gpu-memory" {
		t.Errorf("Memory() = %d, %q; want the budget", n, src)
	}
	_, err = d.NewBuffer("b", 4000)
	if !errors.Is(err, gpu.ErrOutOfMemory) {
		t.Fatalf("over the budget: %v, want ErrOutOfMemory", err)
	}
	if d.Lost() != nil {
		t.Fatalf("out of memory lost the device: %v", d.Lost())
	}
	a.Release()
	a.Release() // twice: counted once
	if got := d.StorageBytes(); got != base {
		t.Fatalf("StorageBytes after release: %d, want %d", got, base)
	}
	b, err := d.NewBuffer("b", 4000)
	if err != nil {
		t.Fatalf("within the budget after a release: %v", err)
	}
	b.Release()
	d.SetBudget(0)
	if _, src := d.Memory(); src == "--gpu-memory" {
		t.Errorf("Memory still reports the cleared budget")
	}
}

// TestRealOutOfMemory fills a real GPU with 4 GiB buffers until the device refuses one: the
// refusal is ErrOutOfMemory (wgpu-native calls it a validation error; fault reads its words),
// the device is not lost, and after a release allocation works again. Software adapters
// allocate lazily and never refuse, so it runs only where WGPU_LLAMA_REAL_OOM is set, to the
// GiB at which it stops (a little above the card's memory, so that a driver spilling into host
// memory is caught without filling the host). An H200 refused the 35th buffer.
func TestRealOutOfMemory(t *testing.T) {
	limit, err := strconv.ParseUint(os.Getenv("WGPU_LLAMA_REAL_OOM"), 10, 32)
	if err != nil || limit == 0 {
		t.Skip("set WGPU_LLAMA_REAL_OOM to a GiB count a little above the GPU's memory to run it")
	}
	d, err := gpu.Open(-1)
	gputest.Check(t, err)
	defer d.Close()
	const chunk = 4 << 30
	size := min(uint64(chunk), d.Limits.MaxBufferSize&^3)
	var bufs []*gpu.Buffer
	defer func() {
		for _, b := range bufs {
			b.Release()
		}
	}()
	var refused error
	for total := uint64(0); total < limit<<30; total += size {
		b, err := d.NewBuffer("fill", size)
		if err != nil {
			refused = err
			break
		}
		bufs = append(bufs, b)
		// Touch both ends, so that a driver that commits memory on first use has to.
		if err := errors.Join(d.Write(b, 0, make([]byte, 4)), d.Write(b, size-4, make([]byte, 4))); err != nil {
			refused = err
			break
		}
	}
	t.Logf("%s: %d buffers of %d MiB before: %v", d.Info.Name, len(bufs), size>>20, refused)
	if !errors.Is(refused, gpu.ErrOutOfMemory) {
		t.Fatalf("the device took %d GiB or refused otherwise: %v", uint64(len(bufs))*size>>30, refused)
	}
	if d.Lost() != nil {
		t.Fatalf("out of memory lost the device: %v", d.Lost())
	}
	bufs[len(bufs)-1].Release()
	bufs = bufs[:len(bufs)-1]
	b, err := d.NewBuffer("after", 1<<20)
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	b.Release()
}
