package gpu

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestSubmitAfterLoss finishes a command buffer, loses the device, then submits it: submit
// answers ErrDeviceLost instead of handing it to wgpu-native, which would abort the process.
func TestSubmitAfterLoss(t *testing.T) {
	d, err := Open(-1)
	if errors.Is(err, ErrNoAdapter) && os.Getenv("WGPU_LLAMA_REQUIRE_GPU") == "" { // gputest.Check's rule
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	enc, err := d.dev.TryCreateCommandEncoder(nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := enc.TryFinish(nil)
	enc.Release()
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Release()
	before := d.Submits()
	d.Destroy()
	if err := d.submit(cmd); !errors.Is(err, ErrDeviceLost) {
		t.Fatalf("submit after the loss: %v, want ErrDeviceLost", err)
	}
	if d.Submits() != before {
		t.Errorf("the refused submit was counted")
	}
}

// TestFaultReadsOutOfMemoryWords: wgpu-native reports a device's refusal for want of memory as
// a validation error; fault must still call it ErrOutOfMemory, and nothing else. The message is
// the one an NVIDIA H200 gave (TestRealOutOfMemory, driver 580.159.04).
func TestFaultReadsOutOfMemoryWords(t *testing.T) {
	refused := errors.New("wgpu.(*Device).TryCreateBuffer: Validation Error\n\nCaused by:\n  In wgpuDeviceCreateBuffer, label = 'fill'\n    Not enough memory left.\n")
	d := &Device{}
	err := d.fault(refused)
	if !errors.Is(err, ErrOutOfMemory) || !errors.Is(err, refused) {
		t.Errorf("fault(%q) = %v, want ErrOutOfMemory wrapping it", refused, err)
	}
	if line := firstLine(err.Error()); !strings.Contains(line, "out of device memory: Not enough memory left") {
		t.Errorf("first line %q lacks the driver's words (clients see only that line)", line)
	}
	if errors.Is(err, ErrDeviceLost) || d.Lost() != nil {
		t.Errorf("out of memory lost the device: %v", err)
	}
	other := errors.New("wgpu.(*Device).TryCreateBuffer: Validation Error\n\nCaused by:\n  Buffer size 7 is not a multiple of 4\n")
	if err := d.fault(other); errors.Is(err, ErrOutOfMemory) {
		t.Errorf("fault(%q) = %v: a validation error taken for out of memory", other, err)
	}
}
