package gpu_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// TestShaderChecksMode: devices compile kernels unchecked unless WGPU_LLAMA_CHECKED_SHADERS
// says otherwise, and a kernel that does not compile is an error naming it in either mode (not
// the abort of an uncaught error).
func TestShaderChecksMode(t *testing.T) {
	d := gputest.Device(t)
	if want := os.Getenv(gpu.CheckedShadersEnv) != ""; d.Checked != want {
		t.Errorf("Checked %v with %s=%q", d.Checked, gpu.CheckedShadersEnv, os.Getenv(gpu.CheckedShadersEnv))
	}
	t.Logf("kernels compiled checked: %v", d.Checked)
	for _, bound := range []bool{false, true} {
		_, err := d.Pipeline(gpu.PipelineKey{Kernel: "broken", Variant: fmt.Sprint(bound)}, gpu.PipelineSpec{
			Source:        func() (string, error) { return "@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }", nil },
			Entry:         "main",
			WorkgroupSize: 1,
			BoundLoops:    bound,
		})
		if err == nil || !strings.Contains(err.Error(), "compile kernel broken") {
			t.Errorf("a kernel that does not compile (loops bounded %v): %v", bound, err)
		}
	}
}
