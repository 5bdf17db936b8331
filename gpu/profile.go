package gpu

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// Profile collects per-kernel time while Device.Profile is set. With the timestamp-query
// feature each dispatch runs in a compute pass of its own whose start and end the GPU stamps,
// all in the pass's one submit (GPUTimed); without it every dispatch is submitted on its own and
// waited for, and its wall time (submit to completion, as the CPU sees it) is charged. Either
// way the time goes to the dispatch's kernel family.
type Profile struct {
	Kernels map[string]*KernelTime
	// GPUTimed says the times are GPU timestamps, not CPU-side timing.
	GPUTimed bool
}

// KernelTime is one kernel family's share of the profiled work.
type KernelTime struct {
	Family string
	Calls  int
	Time   time.Duration
	// Bytes is the traffic charged to the calls: the weight for the matrix kernels (what a
	// decode step streams), the sizes of all bound buffers for the others (an upper bound, as
	// scratch buffers are sized for the largest batch).
	Bytes uint64
}

// NewProfile returns an empty profile.
func NewProfile() *Profile { return &Profile{Kernels: map[string]*KernelTime{}} }

func (p *Profile) add(family string, d time.Duration, bytes uint64) {
	k := p.Kernels[family]
	if k == nil {
		k = &KernelTime{Family: family}
		p.Kernels[family] = k
	}
	k.Calls++
	k.Time += d
	k.Bytes += bytes
}

// Sorted lists the kernel families by time, the most first.
func (p *Profile) Sorted() []*KernelTime {
	out := make([]*KernelTime, 0, len(p.Kernels))
	for _, k := range p.Kernels {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Time != out[j].Time {
			return out[i].Time > out[j].Time
		}
		return out[i].Family < out[j].Family
	})
	return out
}

// Total is the time of all kernels.
func (p *Profile) Total() time.Duration {
	var t time.Duration
	for _, k := range p.Kernels {
		t += k.Time
	}
	return t
}

// Write prints the table: kernel family, calls, time, share of the total and achieved GB/s of
// the traffic charged (KernelTime.Bytes).
func (p *Profile) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, " kernel\t calls\t ms\t share\t GB/s")
	total := p.Total()
	for _, k := range p.Sorted() {
		share := 0.0
		if total > 0 {
			share = 100 * float64(k.Time) / float64(total)
		}
		gbs := 0.0
		if k.Time > 0 {
			gbs = float64(k.Bytes) / 1e9 / k.Time.Seconds()
		}
		fmt.Fprintf(tw, " %s\t %d\t %.3f\t %.1f%%\t %.2f\n", k.Family, k.Calls, float64(k.Time)/1e6, share, gbs)
	}
	fmt.Fprintf(tw, " total\t \t %.3f\t 100%%\t \n", float64(total)/1e6)
	return tw.Flush()
}

// profileDispatch submits the work recorded so far (ending with the dispatch just recorded),
// waits for it and charges its time to the kernel's family; recording goes on in a new pass.
func (r *Recorder) profileDispatch(p *Pipeline, bufs []*Buffer) {
	d := r.d
	if err := r.pass.TryEnd(); err != nil {
		r.err = fmt.Errorf("gpu: profile %s: %w", p.Key, err)
		return
	}
	r.pass.Release()
	// Recording goes on in a new encoder and pass, whatever happens here.
	defer func() {
		enc, err := d.dev.TryCreateCommandEncoder(nil)
		if err != nil {
			r.enc, r.pass = nil, nil
			if r.err == nil {
				r.err = fmt.Errorf("gpu: profile: create command encoder: %w", err)
			}
			return
		}
		r.enc, r.pass = enc, enc.BeginComputePass(&wgpu.ComputePassDescriptor{Label: "forward"})
	}()
	cmd, err := r.enc.TryFinish(nil)
	r.enc.Release()
	if err != nil {
		r.err = fmt.Errorf("gpu: profile %s: %w", p.Key, err)
		return
	}
	defer cmd.Release()
	if err := d.queue.TryWriteBuffer(d.uniform, 0, r.params); err != nil {
		r.err = fmt.Errorf("gpu: profile %s: %w", p.Key, err)
		return
	}
	start := time.Now()
	if err := d.submit(cmd); err != nil {
		r.err = fmt.Errorf("gpu: profile %s: %w", p.Key, err)
		return
	}
	d.dev.Poll(true, nil)
	elapsed := time.Since(start)
	d.Profile.add(p.Key.Kernel, elapsed, traffic(p, bufs))
}

// CopyBandwidth measures the device's plain copy rate in GB/s, counting the bytes read and the
// bytes written (as a memory roofline does): the ceiling a kernel that streams its weights
// once can reach on this device. It is the better of two copies of size bytes, the best of
// reps each after one that warms up: buffer-to-buffer copies, copyBatch of them in one
// submission timed from the CPU (memcpy on CPU adapters, the faster there), and a kernel
// (copy_within, one word an invocation) timed as bench --profile times kernels, by GPU
// timestamps where the adapter has them (on an H100 the buffer copies read 0.4 to 0.8 TB/s).
func (d *Device) CopyBandwidth(size uint64, reps int) (float64, error) {
	words := int(size / 4)
	size = 4 * uint64(words)
	var bufs [3]*Buffer // src and dst of the buffer copy; the kernel's, both halves in one
	for i, n := range []uint64{size, size, 2 * size} {
		b, err := d.NewBuffer("bandwidth", n)
		if err != nil {
			return 0, err
		}
		defer b.Release()
		bufs[i] = b
	}
	saved := d.Profile
	defer func() { d.Profile = saved }()
	best := 0.0
	for i := 0; i <= reps; i++ {
		enc, err := d.dev.TryCreateCommandEncoder(nil)
		if err != nil {
			return 0, fmt.Errorf("gpu: copy: %w", err)
		}
		for range copyBatch {
			if err := enc.TryCopyBufferToBuffer(bufs[0].buf, 0, bufs[1].buf, 0, size); err != nil {
				enc.Release()
				return 0, fmt.Errorf("gpu: copy: %w", err)
			}
		}
		cmd, err := enc.TryFinish(nil)
		enc.Release()
		if err != nil {
			return 0, fmt.Errorf("gpu: copy: %w", err)
		}
		start := time.Now()
		err = d.submit(cmd)
		d.dev.Poll(true, nil)
		copied := time.Since(start) / copyBatch
		cmd.Release()
		if err != nil {
			return 0, fmt.Errorf("gpu: copy: %w", err)
		}

		d.Profile = NewProfile()
		r, err := d.Begin()
		if err != nil {
			return 0, err
		}
		r.CopyWithin(bufs[2], 0, words, words)
		if err := r.Submit(); err != nil {
			return 0, err
		}
		for _, el := range []time.Duration{copied, d.Profile.Total()} {
			if i > 0 && el > 0 {
				best = max(best, 2*float64(size)/1e9/el.Seconds())
			}
		}
	}
	return best, nil
}

// copyBatch is how many buffer copies CopyBandwidth submits at once.
const copyBatch = 8

// maxTimedDispatches is how many dispatches of one pass get GPU timestamps (two queries each,
// within WebGPU's 4096 queries of a query set); any more are counted but not timed.
const maxTimedDispatches = 2048

// timed is a dispatch whose pass carries timestamps: queries 2i and 2i + 1 of the query set.
type timed struct {
	family string
	bytes  uint64
}

// beginTimed ends the current pass and opens one for the next dispatch alone, with
// timestamps at its start and end; it reports false when this dispatch goes untimed.
func (r *Recorder) beginTimed() bool {
	d := r.d
	if len(r.timed) >= maxTimedDispatches {
		return false
	}
	if d.queries == nil {
		qs, err := d.dev.TryCreateQuerySet(&wgpu.QuerySetDescriptor{Label: "profile", Type: wgpu.QueryTypeTimestamp, Count: 2 * maxTimedDispatches})
		if err != nil {
			r.err = fmt.Errorf("gpu: profile: create query set: %w", err)
			return false
		}
		d.queries = qs
	}
	i := uint32(2 * len(r.timed))
	if err := r.pass.TryEnd(); err != nil {
		r.err = fmt.Errorf("gpu: profile: %w", err)
		return false
	}
	r.pass.Release()
	r.pass = r.enc.BeginComputePass(&wgpu.ComputePassDescriptor{Label: "profiled", TimestampWrites: &wgpu.PassTimestampWrites{
		QuerySet: d.queries, BeginningOfPassWriteIndex: i, EndOfPassWriteIndex: i + 1,
	}})
	return true
}

// endTimed closes the timed pass of the dispatch just recorded and opens a plain one.
func (r *Recorder) endTimed(p *Pipeline, bufs []*Buffer) {
	if err := r.pass.TryEnd(); err != nil {
		r.err = fmt.Errorf("gpu: profile: %w", err)
		return
	}
	r.pass.Release()
	r.timed = append(r.timed, timed{p.Key.Kernel, traffic(p, bufs)})
	r.pass = r.enc.BeginComputePass(&wgpu.ComputePassDescriptor{Label: "forward"})
}

// resolveTimed records, after the pass, the copy of the timestamps into a readable buffer.
func (r *Recorder) resolveTimed() (*wgpu.Buffer, uint64, error) {
	d := r.d
	n := uint64(2 * len(r.timed))
	resolve, err := d.createBuffer(&wgpu.BufferDescriptor{Label: "profile-resolve", Size: 8 * n, Usage: wgpu.BufferUsageQueryResolve | wgpu.BufferUsageCopySrc})
	if err != nil {
		return nil, 0, fmt.Errorf("gpu: profile: %w", err)
	}
	defer resolve.Release()
	staging, err := d.createBuffer(&wgpu.BufferDescriptor{Label: "profile-read", Size: 8 * n, Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst})
	if err != nil {
		return nil, 0, fmt.Errorf("gpu: profile: %w", err)
	}
	if err := r.enc.TryResolveQuerySet(d.queries, 0, uint32(n), resolve, 0); err != nil {
		staging.Release()
		return nil, 0, fmt.Errorf("gpu: profile: resolve timestamps: %w", err)
	}
	if err := r.enc.TryCopyBufferToBuffer(resolve, 0, staging, 0, 8*n); err != nil {
		staging.Release()
		return nil, 0, fmt.Errorf("gpu: profile: %w", err)
	}
	return staging, 8 * n, nil
}

// chargeTimed reads the resolved timestamps (after the submit) into the profile.
func (r *Recorder) chargeTimed(staging *wgpu.Buffer, size uint64) error {
	defer staging.Release()
	raw, err := r.d.mapStaging(staging, size)
	if r.d.Profile == nil {
		return err
	}
	if err != nil {
		return err
	}
	period := float64(r.d.queue.GetTimestampPeriod()) // nanoseconds per tick
	for i, t := range r.timed {
		begin := binary.LittleEndian.Uint64(raw[16*i:])
		end := binary.LittleEndian.Uint64(raw[16*i+8:])
		var ns float64
		if end > begin {
			ns = float64(end-begin) * period
		}
		r.d.Profile.add(t.family, time.Duration(ns), t.bytes)
	}
	return nil
}

// traffic is the bytes a dispatch is charged: its weight (binding 1) for the matrix kernels,
// else every bound buffer.
func traffic(p *Pipeline, bufs []*Buffer) uint64 {
	if (p.Key.Kernel == "matvec" || p.Key.Kernel == "matmul" || p.Key.Kernel == "matmul_rows") && len(bufs) > 0 {
		return bufs[0].size
	}
	var n uint64
	for _, b := range bufs {
		n += b.size
	}
	return n
}
