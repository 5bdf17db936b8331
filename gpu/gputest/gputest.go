// Package gputest opens a GPU device for tests: it skips with a message when no adapter
// exists, unless RequireEnv is set (as CI sets it), which turns the skip into a failure so a
// run without a working Vulkan driver can never pass by skipping.
package gputest

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// RequireEnv, when set to a non-empty value, makes a missing adapter a test failure.
const RequireEnv = "WGPU_LLAMA_REQUIRE_GPU"

var (
	once   sync.Once
	shared *gpu.Device
	err    error
)

// Device returns a device shared by the tests of one package, opened on first use.
func Device(tb testing.TB) *gpu.Device {
	tb.Helper()
	once.Do(func() { shared, err = gpu.Open(-1) })
	Check(tb, err)
	return shared
}

// AdapterIndex is the index (gpu.Adapters') of the adapter Device opens, for tests that open
// it again by index (two devices on one adapter stand in for two GPUs).
func AdapterIndex(tb testing.TB) int {
	tb.Helper()
	name := Device(tb).Info.Name
	list, err := gpu.Adapters()
	Check(tb, err)
	for _, a := range list {
		if a.Name == name {
			return a.Index
		}
	}
	tb.Fatalf("the test adapter %q is not in the adapters' list", name)
	return 0
}

// Check handles an error from opening a GPU resource: no adapter skips (or fails under
// RequireEnv), anything else fails.
func Check(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, gpu.ErrNoAdapter) {
		if os.Getenv(RequireEnv) != "" {
			tb.Fatalf("%s is set but no GPU adapter is available: %v", RequireEnv, err)
		}
		tb.Skipf("no GPU adapter (set up software Vulkan: apt-get install mesa-vulkan-drivers libvulkan1): %v", err)
	}
	tb.Fatalf("open GPU device: %v", err)
}
