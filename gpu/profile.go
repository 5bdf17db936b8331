package gpu

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// Profile collects per-kernel time while Device.Profile is set: every dispatch is submitted on
// its own and waited for, and its wall time (submit to completion, as the CPU sees it) is added
// to its kernel family. The total is slower than one submit per pass, but each kernel's share
// is what the pass spends on it.
type Profile struct {
	Kernels map[string]*KernelTime
}

// KernelTime is one kernel family's share of the profiled work.
type KernelTime struct {
	Family string
	Calls  int
	Time   time.Duration
	// Bytes sums the sizes of the buffers bound to each call: for the matrix-vector kernels
	// that is the weight they read, for others an upper bound of the traffic.
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
// the bound buffers.
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
	d.submit(cmd)
	d.dev.Poll(true, nil)
	elapsed := time.Since(start)
	var bytes uint64
	for _, b := range bufs {
		bytes += b.size
	}
	d.Profile.add(p.Key.Kernel, elapsed, bytes)
}

// CopyBandwidth measures the device's plain buffer-to-buffer copy rate in GB/s (bytes copied
// per second, the best of reps copies of size bytes): the ceiling a kernel that streams its
// weights once can reach on this device.
func (d *Device) CopyBandwidth(size uint64, reps int) (float64, error) {
	src, err := d.NewBuffer("bandwidth-src", size)
	if err != nil {
		return 0, err
	}
	defer src.Release()
	dst, err := d.NewBuffer("bandwidth-dst", size)
	if err != nil {
		return 0, err
	}
	defer dst.Release()
	best := time.Duration(0)
	for i := 0; i <= reps; i++ { // the first copy warms up
		start := time.Now()
		if err := d.Copy(src, dst, size); err != nil {
			return 0, err
		}
		if el := time.Since(start); i > 0 && (best == 0 || el < best) {
			best = el
		}
	}
	return float64(size) / 1e9 / best.Seconds(), nil
}
