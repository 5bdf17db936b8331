package gpu

// Unchecked shader modules. wgpu compiles every WGSL module with runtime checks: each storage
// access clamped to its buffer and each loop bounded, which costs GPU kernels their vector
// loads and unrolled loops. wgpu-native exports wgpuDeviceCreateShaderModuleTrusted to turn
// them off; the binding does not wrap it, so it is called here (its descriptor declared as
// webgpu.h lays it out). The kernels must then never read or write out of bounds: the kernel
// tests run in both modes (WGPU_LLAMA_CHECKED_SHADERS), and --checked-shaders keeps the
// checks for diagnosis.

/*
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

typedef struct WGPUDeviceImpl* trustedDevice;
typedef struct WGPUShaderModuleImpl* trustedModule;
typedef struct { const char* data; size_t length; } trustedString;
typedef struct trustedChain { struct trustedChain* next; uint32_t sType; } trustedChain;
typedef struct { trustedChain chain; trustedString code; } trustedWGSL;
typedef struct { trustedChain* nextInChain; trustedString label; } trustedDescriptor;

trustedModule wgpuDeviceCreateShaderModuleTrusted(trustedDevice device, trustedDescriptor const* descriptor, uint64_t runtimeChecks);
void wgpuShaderModuleRelease(trustedModule module);

// trustedCompile compiles WGSL code (n bytes) with the runtime checks given (a
// WGPUShaderRuntimeChecks); 2 is WGPUSType_ShaderSourceWGSL.
static trustedModule trustedCompile(trustedDevice d, const char* label, const char* code, size_t n, uint64_t checks) {
	trustedWGSL wgsl = {{0, 2}, {code, n}};
	trustedDescriptor desc = {&wgsl.chain, {label, SIZE_MAX}};
	return wgpuDeviceCreateShaderModuleTrusted(d, &desc, checks);
}
*/
import "C"

import (
	"errors"
	"os"
	"unsafe"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// CheckedShadersEnv, when set to a non-empty value, has devices open with Device.Checked: their
// kernels compiled with wgpu's runtime checks. The tests run once with it, once without.
const CheckedShadersEnv = "WGPU_LLAMA_CHECKED_SHADERS"

// checkedByDefault is Device.Checked for a device Open makes.
func checkedByDefault() bool { return os.Getenv(CheckedShadersEnv) != "" }

// scopeValidation is WGPUErrorFilter_Validation.
const scopeValidation = 1

// Runtime checks of an unchecked module (WGPUShaderRuntimeChecks): none, or loops bounded.
const (
	checksNone       = 0
	checksBoundLoops = 2
)

// compileModule compiles a kernel's WGSL source: without runtime checks unless the device
// keeps them (Device.Checked), but for loop bounding when boundLoops. Compilation errors come
// back as errors either way.
func (d *Device) compileModule(label, src string, boundLoops bool) (*wgpu.ShaderModule, error) {
	if d.Checked {
		return d.dev.TryCreateShaderModule(&wgpu.ShaderModuleDescriptor{Label: label, WGSLSource: &wgpu.ShaderSourceWGSL{Code: src}})
	}
	cLabel, cSrc := C.CString(label), C.CString(src)
	defer C.free(unsafe.Pointer(cLabel))
	defer C.free(unsafe.Pointer(cSrc))
	checks := checksNone
	if boundLoops {
		checks = checksBoundLoops
	}
	var ref C.trustedModule
	err := d.scoped([]uint32{scopeValidation, scopeOutOfMemory}, func() {
		ref = C.trustedCompile(C.trustedDevice(unsafe.Pointer(d.handle())), cLabel, cSrc, C.size_t(len(src)), C.uint64_t(checks))
	})
	if err != nil {
		if ref != nil {
			C.wgpuShaderModuleRelease(ref)
		}
		return nil, err
	}
	if ref == nil {
		return nil, errors.New("the device made no module")
	}
	// The binding's ShaderModule is its native handle and a flag (shared: false), which
	// Release then frees as it frees its own modules.
	mod := new(wgpu.ShaderModule)
	*(*C.trustedModule)(unsafe.Pointer(mod)) = ref
	return mod, nil
}
