package gpu

// GPU faults: a device lost (a driver reset, a GPU hang the OS recovered from, an eGPU
// unplugged) and memory the device refuses. The binding marks its calls "nocallback" while
// wgpu-native calls the device-lost callback from inside them, so Go cannot take that callback:
// a loss shows as the errors of every later call instead ("Parent device is lost"), which
// fault recognises. The binding's calls capture validation errors only; buffer creation here
// also opens an out-of-memory error scope, so that a refused allocation is an error returned,
// not one wgpu-native reports to nobody.

/*
#include <stdint.h>
#include <stddef.h>

typedef struct WGPUDeviceImpl* faultDevice;
typedef struct { const char* data; size_t length; } faultMessage;
typedef void (*faultScopeCallback)(uint32_t status, uint32_t type, faultMessage message, void* u1, void* u2);
typedef struct { void* next; uint32_t mode; faultScopeCallback callback; void* u1; void* u2; } faultScopeInfo;
typedef struct { uint64_t id; } faultFuture;

void wgpuDeviceDestroy(faultDevice device);
void wgpuDevicePushErrorScope(faultDevice device, uint32_t filter);
faultFuture wgpuDevicePopErrorScope(faultDevice device, faultScopeInfo info);

static void faultScopeDone(uint32_t status, uint32_t type, faultMessage message, void* u1, void* u2) {
	*(uint32_t*)u1 = type;
}

// WGPUErrorFilter_OutOfMemory
static void faultPushOOM(faultDevice d) { wgpuDevicePushErrorScope(d, 2); }

// The error type the scope caught (WGPUErrorType_OutOfMemory is 3); the callback runs before
// wgpu-native's pop returns (WGPUCallbackMode_AllowSpontaneous).
static uint32_t faultPopOOM(faultDevice d) {
	uint32_t type = 0;
	faultScopeInfo info = {0, 3, faultScopeDone, &type, 0};
	wgpuDevicePopErrorScope(d, info);
	return type;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// ErrDeviceLost wraps every error of a device that was lost: nothing more can run on it, and
// only a new device (Open) with everything loaded again can go on.
var ErrDeviceLost = errors.New("gpu: device lost")

// ErrOutOfMemory wraps an allocation the device refused for want of memory (or beyond
// SetBudget's limit): the work that needed it fails, the device and what is on it stay usable.
var ErrOutOfMemory = errors.New("gpu: out of device memory")

// Lost reports the device's loss (wrapping ErrDeviceLost), or nil while it is usable.
func (d *Device) Lost() error {
	if p := d.lost.Load(); p != nil {
		return *p
	}
	return nil
}

// fault classifies an error of a call on the device: after a loss (Destroy's, or one an error
// reports) it wraps ErrDeviceLost, whatever else the call said.
func (d *Device) fault(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrDeviceLost) {
		d.lost.CompareAndSwap(nil, &err)
		return err
	}
	if d.Lost() == nil && strings.Contains(strings.ToLower(err.Error()), "device is lost") {
		lost := fmt.Errorf("%w: %s", ErrDeviceLost, firstLine(err.Error()))
		d.lost.CompareAndSwap(nil, &lost)
	}
	if lost := d.Lost(); lost != nil {
		return fmt.Errorf("%w (%w)", lost, err)
	}
	return err
}

// firstLine is an error message's first line (wgpu's run on with their causes).
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

// handle is the native device the binding wraps: wgpu.Device's first field (the binding has
// neither destroy nor error scopes).
func (d *Device) handle() C.faultDevice {
	return *(*C.faultDevice)(unsafe.Pointer(d.dev))
}

// createBuffer makes a buffer inside an out-of-memory error scope. The thread stays locked
// because wgpu-native keeps error scopes per thread.
func (d *Device) createBuffer(desc *wgpu.BufferDescriptor) (*wgpu.Buffer, error) {
	if lost := d.Lost(); lost != nil {
		return nil, lost
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h := d.handle()
	C.faultPushOOM(h)
	buf, err := d.dev.TryCreateBuffer(desc)
	if C.faultPopOOM(h) == 3 {
		if buf != nil {
			buf.Release()
		}
		return nil, fmt.Errorf("%w: buffer %q of %d bytes (%d in use)", ErrOutOfMemory, desc.Label, desc.Size, d.StorageBytes())
	}
	return buf, d.fault(err)
}

// Destroy loses the device at once, as a driver reset would (wgpu's destroy call): every later
// operation fails with ErrDeviceLost. Tests of recovery use it; nothing else should.
func (d *Device) Destroy() {
	if d == nil || d.dev == nil {
		return
	}
	C.wgpuDeviceDestroy(d.handle())
	lost := fmt.Errorf("%w: destroyed", ErrDeviceLost)
	d.lost.CompareAndSwap(nil, &lost)
}
