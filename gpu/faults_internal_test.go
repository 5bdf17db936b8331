package gpu

import (
	"errors"
	"os"
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
