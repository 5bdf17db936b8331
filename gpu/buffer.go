package gpu

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// Buffer is a storage buffer on the device.
type Buffer struct {
	buf   *wgpu.Buffer
	size  uint64
	label string
	id    uint64        // identity for bind-group cache keys
	live  *atomic.Int64 // the device's count of storage bytes allocated, given back on release
}

var bufferIDs atomic.Uint64

// Size is the buffer's size in bytes.
func (b *Buffer) Size() uint64 { return b.size }

// Label is the name given at creation, used in error messages.
func (b *Buffer) Label() string { return b.label }

// Release frees the buffer's device memory now rather than when the garbage collector finds it.
func (b *Buffer) Release() {
	if b != nil && b.buf != nil {
		b.live.Add(-int64(b.size))
		b.buf.Destroy()
		b.buf.Release()
		b.buf = nil
	}
}

const storageUsage = wgpu.BufferUsageStorage | wgpu.BufferUsageCopySrc | wgpu.BufferUsageCopyDst

// roundUp4 pads sizes to what WebGPU copies and writes require.
func roundUp4(n uint64) uint64 { return (n + 3) &^ 3 }

// NewBuffer allocates a zero-filled storage buffer of at least size bytes.
func (d *Device) NewBuffer(label string, size uint64) (*Buffer, error) {
	size = roundUp4(max(size, 4))
	if size > d.Limits.MaxBufferSize {
		return nil, fmt.Errorf("gpu: buffer %q of %d bytes exceeds the adapter's maxBufferSize %d", label, size, d.Limits.MaxBufferSize)
	}
	if err := d.checkBudget(label, size); err != nil {
		return nil, err
	}
	buf, err := d.createBuffer(&wgpu.BufferDescriptor{Label: label, Size: size, Usage: storageUsage})
	if err != nil {
		return nil, fmt.Errorf("gpu: create buffer %q (%d bytes): %w", label, size, err)
	}
	d.live.Add(int64(size))
	return &Buffer{buf: buf, size: size, label: label, id: bufferIDs.Add(1), live: &d.live}, nil
}

// Upload allocates a storage buffer holding data.
func (d *Device) Upload(label string, data []byte) (*Buffer, error) {
	b, err := d.NewBuffer(label, uint64(len(data)))
	if err != nil {
		return nil, err
	}
	if err := d.Write(b, 0, data); err != nil {
		b.Release()
		return nil, err
	}
	return b, nil
}

// Write copies data into b at offset; it is ordered before the next submit.
func (d *Device) Write(b *Buffer, offset uint64, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if offset%4 != 0 {
		return fmt.Errorf("gpu: write to %q at offset %d: not a multiple of 4", b.label, offset)
	}
	if offset+uint64(len(data)) > b.size {
		return fmt.Errorf("gpu: write of %d bytes at %d overflows buffer %q (%d bytes)", len(data), offset, b.label, b.size)
	}
	if len(data)%4 != 0 {
		padded := make([]byte, roundUp4(uint64(len(data))))
		copy(padded, data)
		data = padded
	}
	if err := d.queue.TryWriteBuffer(b.buf, offset, data); err != nil {
		return d.fault(fmt.Errorf("gpu: write buffer %q: %w", b.label, err))
	}
	return nil
}

// Read copies size bytes at offset out of b, waiting for all submitted work.
func (d *Device) Read(b *Buffer, offset, size uint64) ([]byte, error) {
	enc, err := d.dev.TryCreateCommandEncoder(nil)
	if err != nil {
		return nil, d.fault(fmt.Errorf("gpu: read %q: %w", b.label, err))
	}
	defer enc.Release()
	staging, err := d.copyToStaging(enc, b, offset, size)
	if err != nil {
		return nil, err
	}
	cmd, err := enc.TryFinish(nil)
	if err != nil {
		return nil, d.fault(fmt.Errorf("gpu: read %q: %w", b.label, err))
	}
	err = d.submit(cmd)
	cmd.Release()
	if err != nil {
		return nil, fmt.Errorf("gpu: read %q: %w", b.label, err)
	}
	return d.mapStaging(staging, size)
}

// stagingBuffer returns the cached map-readable buffer of size bytes, made on first use.
func (d *Device) stagingBuffer(size uint64) (*wgpu.Buffer, error) {
	if b := d.staging[size]; b != nil {
		return b, nil
	}
	b, err := d.createBuffer(&wgpu.BufferDescriptor{
		Label: "staging", Size: size, Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst,
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: create staging buffer: %w", err)
	}
	d.staging[size] = b
	return b, nil
}

// copyToStaging records a copy of b[offset:offset+size] into a cached map-readable buffer.
func (d *Device) copyToStaging(enc *wgpu.CommandEncoder, b *Buffer, offset, size uint64) (*wgpu.Buffer, error) {
	if offset%4 != 0 || offset+size > b.size {
		return nil, fmt.Errorf("gpu: read of %d bytes at %d from %q (%d bytes): out of range or misaligned", size, offset, b.label, b.size)
	}
	padded := roundUp4(size)
	staging, err := d.stagingBuffer(padded)
	if err != nil {
		return nil, err
	}
	if err := enc.TryCopyBufferToBuffer(b.buf, offset, staging, 0, padded); err != nil {
		return nil, fmt.Errorf("gpu: copy %q to staging: %w", b.label, err)
	}
	return staging, nil
}

// mapStaging waits for the staging buffer's copy and returns its first size bytes.
func (d *Device) mapStaging(staging *wgpu.Buffer, size uint64) ([]byte, error) {
	padded := roundUp4(size)
	var status wgpu.MapAsyncStatus
	done := false
	if err := staging.TryMapAsync(wgpu.MapModeRead, 0, padded, func(s wgpu.MapAsyncStatus) {
		status, done = s, true
	}); err != nil {
		return nil, fmt.Errorf("gpu: map staging buffer: %w", err)
	}
	// A lost device may never complete the map: once the queue is empty, the callback is due
	// at the next poll at the latest.
	for idle := 0; !done; {
		if d.dev.Poll(true, nil) {
			if idle++; idle > 2 && !done {
				return nil, d.fault(fmt.Errorf("%w: a read back never completed", ErrDeviceLost))
			}
		}
	}
	if status != wgpu.MapAsyncStatusSuccess {
		return nil, d.fault(fmt.Errorf("gpu: map staging buffer: status %v", status))
	}
	out := make([]byte, size)
	copy(out, staging.GetMappedRange(0, uint(padded))[:size])
	if err := staging.TryUnmap(); err != nil {
		return nil, fmt.Errorf("gpu: unmap staging buffer: %w", err)
	}
	return out, nil
}

// Float32s reinterprets little-endian bytes as float32 values without copying.
func Float32s(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// Bytes reinterprets a slice of fixed-size values as bytes without copying.
func Bytes[E any](s []E) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero E
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}
