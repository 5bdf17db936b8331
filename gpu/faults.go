package gpu

// GPU faults: a device lost (a driver reset, a GPU hang the OS recovered from, an eGPU
// unplugged) and memory the device refuses. The binding marks its calls "nocallback" while
// wgpu-native calls the device-lost callback from inside them, so Go cannot take that callback:
// a loss shows as the errors of every later call instead ("Parent device is lost"), which
// fault recognises. The binding's calls capture validation errors only; buffer creation here
// also opens an out-of-memory error scope, so that a refused allocation is an error returned
// rather than one no scope catches. (A queue submit is beyond help: wgpu-native aborts the
// process on any error of one, scopes or not; see submit.)

/*
#include <stdint.h>
#include <stddef.h>
#include <string.h>

typedef struct WGPUDeviceImpl* faultDevice;
typedef struct { const char* data; size_t length; } faultMessage;
typedef void (*faultScopeCallback)(uint32_t status, uint32_t type, faultMessage message, void* u1, void* u2);
typedef struct { void* next; uint32_t mode; faultScopeCallback callback; void* u1; void* u2; } faultScopeInfo;
typedef struct { uint64_t id; } faultFuture;

void wgpuDeviceDestroy(faultDevice device);
void wgpuDevicePushErrorScope(faultDevice device, uint32_t filter);
faultFuture wgpuDevicePopErrorScope(faultDevice device, faultScopeInfo info);

// faultCatch keeps the first error a run of popped scopes caught: its WGPUErrorType and message.
typedef struct { uint32_t type; char* buf; size_t cap; } faultCatch;

static void faultScopeDone(uint32_t status, uint32_t type, faultMessage message, void* u1, void* u2) {
	faultCatch* c = (faultCatch*)u1;
	if (type <= 1 || c->type != 0) { // WGPUErrorType_NoError, or one caught already
		return;
	}
	c->type = type;
	size_t n = 0;
	if (message.data != NULL) {
		n = message.length == SIZE_MAX ? strlen(message.data) : message.length; // WGPU_STRLEN
	}
	if (n >= c->cap) {
		n = c->cap - 1;
	}
	if (n > 0) {
		memcpy(c->buf, message.data, n);
	}
	c->buf[n] = 0;
}

// filter: a WGPUErrorFilter.
static void faultPush(faultDevice d, uint32_t filter) { wgpuDevicePushErrorScope(d, filter); }

// The callback runs before wgpu-native's pop returns (WGPUCallbackMode_AllowSpontaneous).
static uint32_t faultPop(faultDevice d, int n, char* buf, size_t cap) {
	faultCatch c = {0, buf, cap};
	for (int i = 0; i < n; i++) {
		faultScopeInfo info = {0, 3, faultScopeDone, &c, 0};
		wgpuDevicePopErrorScope(d, info);
	}
	return c.type;
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
	if !errors.Is(err, ErrOutOfMemory) && strings.Contains(err.Error(), refusedForMemory) {
		return fmt.Errorf("%w: %s. (%w)", ErrOutOfMemory, refusedForMemory, err) // the words on the first line, which clients see
	}
	return err
}

// refusedForMemory is how wgpu-core words a device's out-of-memory refusal (DeviceError's
// OutOfMemory). wgpu-native reports it as a validation error, not as the out-of-memory type the
// scope filters on: an NVIDIA H200 refused its 35th 4 GiB buffer with "Validation Error ...
// Not enough memory left." So the words are what mark it.
const refusedForMemory = "Not enough memory left"

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

// createBuffer makes a buffer inside an out-of-memory error scope (the binding captures
// validation errors itself).
func (d *Device) createBuffer(desc *wgpu.BufferDescriptor) (*wgpu.Buffer, error) {
	if lost := d.Lost(); lost != nil {
		return nil, lost
	}
	var buf *wgpu.Buffer
	var err error
	scoped := d.scoped([]uint32{scopeOutOfMemory}, func() { buf, err = d.dev.TryCreateBuffer(desc) })
	d.created[0].Add(1)
	err = d.fault(errors.Join(err, scoped))
	if errors.Is(err, ErrOutOfMemory) {
		if buf != nil {
			buf.Release()
		}
		return nil, fmt.Errorf("%w (%d bytes in use)", err, d.StorageBytes()) // the callers name the buffer
	}
	return buf, err
}

// submit hands a command buffer to the queue. wgpu-native aborts the process on a submit it
// refuses (a fatal error whatever scopes are open), so a pass reaches it only after every call
// that could fail has: on a device known lost it stops here.
func (d *Device) submit(cmd *wgpu.CommandBuffer) error {
	if lost := d.Lost(); lost != nil {
		return lost
	}
	d.submits.Add(1)
	d.queue.Submit(cmd)
	return nil
}

// scopeOutOfMemory is WGPUErrorFilter_OutOfMemory, for scoped (the binding scopes validation
// errors itself; wgpu-native aborts on a scope for internal ones).
const scopeOutOfMemory = 2

// scoped runs fn inside error scopes of the filters (outermost first) and returns the first
// error they caught, wrapping ErrOutOfMemory for that type. The thread stays locked because
// wgpu-native keeps error scopes per thread.
func (d *Device) scoped(filters []uint32, fn func()) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h := d.handle()
	for _, f := range filters {
		C.faultPush(h, C.uint32_t(f))
	}
	fn()
	var buf [512]C.char
	switch C.faultPop(h, C.int(len(filters)), &buf[0], C.size_t(len(buf))) {
	case 0:
		return nil
	case 3: // WGPUErrorType_OutOfMemory
		return fmt.Errorf("%w: %s", ErrOutOfMemory, firstLine(C.GoString(&buf[0])))
	}
	return errors.New(firstLine(C.GoString(&buf[0])))
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
