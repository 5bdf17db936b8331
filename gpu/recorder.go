package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// maxBindings bounds the storage bindings of one kernel (and the bind-group cache key).
const maxBindings = 8

type bindKey struct {
	layout  *layout
	uniform *wgpu.Buffer
	ids     [maxBindings]uint64
}

// Recorder records one batch of GPU work (a forward pass) into a single compute pass of a
// single command buffer, submitted once. Dispatch parameters go to one uniform buffer, each in
// its own ParamsSize slot selected by a dynamic offset, so bind groups are reusable across passes.
type Recorder struct {
	d      *Device
	enc    *wgpu.CommandEncoder
	pass   *wgpu.ComputePassEncoder
	params []byte
	n      int // dispatches recorded
	err    error
	timed  []timed     // profiled dispatches with GPU timestamps, in order
	reads  []*Readback // regions read back at the submit besides SubmitAndRead's (ReadAlso)
	// orderTokens, when positive, is the token count llama.cpp's products see (SetOrderTokens).
	orderTokens int
}

// SetOrderTokens has the products recorded next sum as llama.cpp's CPU backend sums a product
// of n tokens (with CPUMath: F32's vec_dot or tinyBLAS order), where llama.cpp computes fewer
// rows than the pass: its graphs keep only the output rows for the last block's feed-forward.
// The other rows are computed as well and not used. 0 restores the pass's own count.
func (r *Recorder) SetOrderTokens(n int) { r.orderTokens = n }

// Begin starts recording. Only one Recorder may be open on a device at a time.
func (d *Device) Begin() (*Recorder, error) {
	enc, err := d.dev.TryCreateCommandEncoder(nil)
	if err != nil {
		return nil, d.fault(fmt.Errorf("gpu: create command encoder: %w", err))
	}
	pass := enc.BeginComputePass(&wgpu.ComputePassDescriptor{Label: "forward"})
	params := d.paramsScratch[:0]
	d.paramsScratch = nil // owned by this recorder until it finishes
	return &Recorder{d: d, enc: enc, pass: pass, params: params}, nil
}

// Dispatches is the number of kernels recorded so far.
func (r *Recorder) Dispatches() int { return r.n }

// Params packs kernel parameters: u32 values as they are, float32 values as their bits.
func Params(vals ...any) []uint32 {
	out := make([]uint32, len(vals))
	for i, v := range vals {
		switch x := v.(type) {
		case uint32:
			out[i] = x
		case int:
			out[i] = uint32(x)
		case int32:
			out[i] = uint32(x)
		case float32:
			out[i] = math.Float32bits(x)
		case float64:
			out[i] = math.Float32bits(float32(x))
		default:
			panic(fmt.Sprintf("gpu.Params: unsupported type %T", v))
		}
	}
	return out
}

// Dispatch records one kernel launch with its parameters (binding 0) and storage buffers
// (bindings 1..n, in the order of the pipeline's spec), over the given workgroup grid.
// Errors are kept and reported by Submit, so a forward pass can be recorded without checks.
func (r *Recorder) Dispatch(p *Pipeline, params []uint32, groups [3]uint32, bufs ...*Buffer) {
	if r.err != nil {
		return
	}
	if len(bufs) != p.nbind {
		r.err = fmt.Errorf("gpu: dispatch %s: %d buffers given, kernel binds %d", p.Key, len(bufs), p.nbind)
		return
	}
	if r.n >= uniformSlots {
		r.err = fmt.Errorf("gpu: dispatch %s: more than %d dispatches in one submit", p.Key, uniformSlots)
		return
	}
	if len(params)*4 > ParamsSize {
		r.err = fmt.Errorf("gpu: dispatch %s: %d parameter words exceed %d bytes", p.Key, len(params), ParamsSize)
		return
	}
	maxG := r.d.Limits.MaxComputeWorkgroupsPerDimension
	for _, g := range groups {
		if g == 0 || g > maxG {
			r.err = fmt.Errorf("gpu: dispatch %s: workgroup grid %v outside 1..%d", p.Key, groups, maxG)
			return
		}
	}
	for _, b := range bufs {
		if b == nil || b.buf == nil {
			r.err = fmt.Errorf("gpu: dispatch %s: nil or released buffer", p.Key)
			return
		}
		if b.size > r.d.Limits.MaxStorageBufferBindingSize {
			r.err = fmt.Errorf("gpu: dispatch %s: buffer %q (%d bytes) exceeds maxStorageBufferBindingSize %d", p.Key, b.label, b.size, r.d.Limits.MaxStorageBufferBindingSize)
			return
		}
	}
	offset := uint32(len(r.params))
	for _, v := range params {
		r.params = binary.LittleEndian.AppendUint32(r.params, v)
	}
	r.params = append(r.params, make([]byte, ParamsSize-len(params)*4)...)

	bg, err := r.d.bindGroup(p, bufs)
	if err != nil {
		r.err = fmt.Errorf("gpu: dispatch %s: %w", p.Key, err)
		return
	}
	stamped := r.d.Profile != nil && r.d.Features.TimestampQuery && r.beginTimed()
	if r.err != nil {
		return
	}
	r.pass.SetPipeline(p.pipeline)
	r.pass.SetBindGroup(0, bg, []uint32{offset})
	r.pass.DispatchWorkgroups(groups[0], groups[1], groups[2])
	r.n++
	switch {
	case stamped:
		r.endTimed(p, bufs)
	case r.d.Profile != nil && !r.d.Features.TimestampQuery:
		r.profileDispatch(p, bufs)
	case r.d.Profile != nil: // past maxTimedDispatches: counted, not timed
		r.d.Profile.add(p.Key.Kernel, 0, 0)
	}
}

// Submit ends the pass and submits the command buffer without reading anything back.
func (r *Recorder) Submit() error {
	_, err := r.finish(nil, 0, 0)
	return err
}

// SubmitAndRead ends the pass, copies size bytes of b at offset to host memory in the same
// command buffer, submits once and waits for the bytes.
func (r *Recorder) SubmitAndRead(b *Buffer, offset, size uint64) ([]byte, error) {
	return r.finish(b, offset, size)
}

// finish submits the pass; errors after a device loss wrap ErrDeviceLost.
func (r *Recorder) finish(b *Buffer, offset, size uint64) ([]byte, error) {
	out, err := r.submit(b, offset, size)
	return out, r.d.fault(err)
}

func (r *Recorder) submit(b *Buffer, offset, size uint64) ([]byte, error) {
	d := r.d
	if r.pass == nil { // a profiled pass that could not go on
		d.paramsScratch = r.params[:0]
		return nil, r.err
	}
	endErr := r.pass.TryEnd()
	r.pass.Release()
	defer r.enc.Release()
	if r.err != nil {
		return nil, r.err
	}
	if endErr != nil {
		return nil, fmt.Errorf("gpu: end compute pass: %w", endErr)
	}
	var staging, stamps *wgpu.Buffer
	var stampBytes uint64
	if len(r.timed) > 0 {
		var err error
		if stamps, stampBytes, err = r.resolveTimed(); err != nil {
			return nil, err
		}
	}
	reads, total := r.reads, uint64(0)
	if b != nil {
		reads = append([]*Readback{{b: b, offset: offset, size: size}}, reads...)
	}
	if len(reads) > 0 {
		var err error
		if staging, total, err = d.stageReads(r.enc, reads); err != nil {
			return nil, err
		}
	}
	cmd, err := r.enc.TryFinish(nil)
	if err != nil {
		return nil, fmt.Errorf("gpu: finish command buffer: %w", err)
	}
	defer cmd.Release()
	if len(r.params) > 0 {
		if err := d.queue.TryWriteBuffer(d.uniform, 0, r.params); err != nil {
			return nil, fmt.Errorf("gpu: write parameters: %w", err)
		}
	}
	d.paramsScratch = r.params[:0]
	if err := d.submit(cmd); err != nil {
		return nil, err
	}
	if stamps != nil {
		if err := r.chargeTimed(stamps, stampBytes); err != nil {
			return nil, err
		}
		d.Profile.GPUTimed = true
	}
	if staging == nil {
		return nil, nil
	}
	all, err := d.mapStaging(staging, total)
	if err != nil {
		return nil, err
	}
	for _, rb := range reads {
		rb.data = all[rb.at : rb.at+rb.size]
	}
	if b == nil {
		return nil, nil
	}
	return reads[0].data, nil
}

// Readback is a region of a buffer that the submit ending a Recorder copies to host memory
// beside what SubmitAndRead returns, in the same command buffer: a second result of a pass
// (an attention probe's weights next to the logits) without a second submit.
type Readback struct {
	b                *Buffer
	offset, size, at uint64 // at: the region's offset in the staging buffer
	data             []byte
}

// Bytes are the region's bytes once the submit has completed; nil before, or if it failed.
func (rb *Readback) Bytes() []byte { return rb.data }

// ReadAlso asks for size bytes of b at offset to be read back by this Recorder's submit
// (Submit or SubmitAndRead), after every dispatch recorded.
func (r *Recorder) ReadAlso(b *Buffer, offset, size uint64) *Readback {
	rb := &Readback{b: b, offset: offset, size: size}
	if size == 0 || b == nil {
		r.fail("gpu: read back of %d bytes: empty or no buffer", size)
		return rb
	}
	r.reads = append(r.reads, rb)
	return rb
}

// stageReads records the copies of reads into one map-readable buffer, each region at a
// 4-byte aligned offset, and returns it with the bytes to map. A lone read takes a staging
// buffer of its own size, as always; several share one of a power-of-two size, so regions that
// grow every pass (a probe's keys) leave few cached staging buffers behind.
func (d *Device) stageReads(enc *wgpu.CommandEncoder, reads []*Readback) (*wgpu.Buffer, uint64, error) {
	if len(reads) == 1 {
		staging, err := d.copyToStaging(enc, reads[0].b, reads[0].offset, reads[0].size)
		return staging, reads[0].size, err
	}
	var total uint64
	for _, rb := range reads {
		if rb.offset%4 != 0 || rb.offset+rb.size > rb.b.size {
			return nil, 0, fmt.Errorf("gpu: read of %d bytes at %d from %q (%d bytes): out of range or misaligned", rb.size, rb.offset, rb.b.label, rb.b.size)
		}
		rb.at = total
		total += roundUp4(rb.size)
	}
	staging, err := d.stagingBuffer(uint64(1) << bits.Len64(total-1))
	if err != nil {
		return nil, 0, err
	}
	for _, rb := range reads {
		if err := enc.TryCopyBufferToBuffer(rb.b.buf, rb.offset, staging, rb.at, roundUp4(rb.size)); err != nil {
			return nil, 0, fmt.Errorf("gpu: copy %q to staging: %w", rb.b.label, err)
		}
	}
	return staging, total, nil
}

// bindGroup returns a cached bind group for the pipeline's layout and these buffers.
func (d *Device) bindGroup(p *Pipeline, bufs []*Buffer) (*wgpu.BindGroup, error) {
	if err := d.ensureUniform(); err != nil {
		return nil, err
	}
	key := bindKey{layout: p.layout, uniform: d.uniform}
	for i, b := range bufs {
		key.ids[i] = b.id
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if bg := d.bindGroups[key]; bg != nil {
		return bg, nil
	}
	entries := []wgpu.BindGroupEntry{{Binding: 0, Buffer: d.uniform, Offset: 0, Size: ParamsSize}}
	for i, b := range bufs {
		entries = append(entries, wgpu.BindGroupEntry{Binding: uint32(i + 1), Buffer: b.buf, Size: b.size})
	}
	bg, err := d.dev.TryCreateBindGroup(&wgpu.BindGroupDescriptor{Label: p.Key.String(), Layout: p.layout.group, Entries: entries})
	d.created[1].Add(1)
	if err != nil {
		return nil, err
	}
	if len(d.bindGroups) > 4096 { // buffers come and go; keep the cache bounded
		for k, v := range d.bindGroups {
			v.Release()
			delete(d.bindGroups, k)
		}
	}
	d.bindGroups[key] = bg
	return bg, nil
}

// uniformSlots is how many dispatches one submit can parameterise.
const uniformSlots = 4096

// MaxDispatches is the most kernels one Recorder can record; work beyond it goes in another.
const MaxDispatches = uniformSlots

func (d *Device) ensureUniform() error {
	if d.uniform != nil {
		return nil
	}
	buf, err := d.createBuffer(&wgpu.BufferDescriptor{
		Label: "params", Size: uniformSlots * ParamsSize, Usage: wgpu.BufferUsageUniform | wgpu.BufferUsageCopyDst,
	})
	if err != nil {
		return fmt.Errorf("gpu: create parameter buffer: %w", err)
	}
	d.uniform = buf
	return nil
}
