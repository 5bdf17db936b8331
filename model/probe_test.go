package model

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestAttnProbe prefills 13 tokens of stories260K and probes one decode step, with an f32 and
// an f16 cache, in a contiguous region and in shuffled pages: the weights are a distribution
// over the 14 positions; the probe costs one dispatch and leaves the logits bit-identical;
// other heads and layers give other weights; ForwardTopK reads the same weights back; and in
// the last layer, whose rotated queries are still in the scratch after the pass, every probed
// head matches a Go recomputation from those queries and the cached keys.
func TestAttnProbe(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	dev := gputest.Device(t)
	for _, f32 := range []bool{true, false} {
		for _, paged := range []bool{false, true} {
			t.Run(fmt.Sprintf("kv-f32=%v/paged=%v", f32, paged), func(t *testing.T) { testAttnProbe(t, dev, path, f32, paged) })
		}
	}
}

func testAttnProbe(t *testing.T, dev *gpu.Device, path string, kvF32, paged bool) {
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := Load(dev, f, Options{MaxBatch: 16, KVF32: kvF32})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	kv, err := m.NewKVCache(64)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	c := m.Config
	// Sequence positions to cache rows: from row 5, or pages of 4 rows in no order.
	base, bits, pages := int32(5), 0, []int32(nil)
	row := func(j int) int { return 5 + j }
	if paged {
		base, bits, pages = 0, 2, []int32{9, 2, 14, 0}
		row = func(j int) int { return int(pages[j>>2])<<2 | j&3 }
	}
	prompt := []int32{1, 403, 407, 261, 378, 432, 383, 286, 261, 300, 301, 302, 303}
	pre := Batch{Tokens: prompt, Logits: []int{len(prompt) - 1}, PageBits: bits, Pages: pages}
	for p := range prompt {
		pre.Pos, pre.Base = append(pre.Pos, int32(p)), append(pre.Base, base)
	}
	logits, err := m.ForwardBatch(kv, pre)
	if err != nil {
		t.Fatal(err)
	}
	if w := m.ProbeWeights(); w != nil {
		t.Fatalf("a pass without a probe gave %d weights", len(w))
	}
	next := int32(slices.Index(logits[0], slices.Max(logits[0])))
	step := Batch{Tokens: []int32{next}, Pos: []int32{int32(len(prompt))}, Base: []int32{base}, Logits: []int{0}, PageBits: bits, Pages: pages}
	// probed runs the decode step (again: it rewrites the same cache row) with probe p.
	probed := func(p *AttnProbe) ([]float32, []float32) {
		t.Helper()
		b := step
		b.Probe = p
		out, err := m.ForwardBatch(kv, b)
		if err != nil {
			t.Fatal(err)
		}
		return out[0], m.ProbeWeights()
	}
	plain, none := probed(nil)
	if none != nil {
		t.Fatalf("a pass without a probe gave %d weights", len(none))
	}
	withProbe, w := probed(&AttnProbe{Row: 0, Layer: 2, Head: 1})
	if !slices.Equal(withProbe, plain) {
		t.Error("the probe changed the logits")
	}
	checkDistribution(t, "layer 2 head 1", w, len(prompt)+1)

	// One dispatch more with the probe, none without.
	var counts []int
	for _, p := range []*AttnProbe{nil, {Row: 0, Layer: 2, Head: 1}} {
		b := step
		b.Probe = p
		r, err := m.begin(kv, b)
		if err != nil {
			t.Fatal(err)
		}
		counts = append(counts, r.Dispatches())
		if err := r.Submit(); err != nil {
			t.Fatal(err)
		}
	}
	if counts[1] != counts[0]+1 {
		t.Errorf("dispatches without and with a probe: %v", counts)
	}

	for _, p := range []AttnProbe{{Row: 0, Layer: 2, Head: 2}, {Row: 0, Layer: 3, Head: 1}} {
		_, other := probed(&p)
		checkDistribution(t, fmt.Sprintf("%+v", p), other, len(prompt)+1)
		if slices.Equal(other, w) {
			t.Errorf("%+v gave the weights of layer 2 head 1", p)
		}
	}
	b := step
	b.Probe = &AttnProbe{Row: 0, Layer: 2, Head: 1}
	if _, err := m.ForwardTopK(kv, b, 4); err != nil {
		t.Fatal(err)
	}
	if got := m.ProbeWeights(); !slices.Equal(got, w) {
		t.Errorf("ForwardTopK's probe: %v, ForwardBatch's %v", got, w)
	}

	// The last layer's queries stay in scratch.qkv after the pass: recompute from them.
	last := c.NLayer - 1
	for _, h := range []int{1, 5, 7} {
		_, got := probed(&AttnProbe{Row: 0, Layer: last, Head: h})
		qRaw, err := dev.Read(m.scratch.qkv, 0, uint64(c.NHead*c.HeadDim)*4)
		if err != nil {
			t.Fatal(err)
		}
		kRow := c.NKVHead * c.HeadDim
		cache := readCache(t, m, kv.k[last])
		var k []float32
		for j := 0; j <= len(prompt); j++ {
			k = append(k, cache[row(j)*kRow:(row(j)+1)*kRow]...)
		}
		want := cpuref.AttentionWeights(gpu.Float32s(qRaw), k, step.Pos, 0, h, c.NHead, c.NKVHead, c.HeadDim, c.AttnScale, c.AttnSoftCap, 0)
		if e := cpuref.RelErr(got, want); len(got) != len(want) || e > 1e-5 {
			t.Errorf("layer %d head %d: weights %v, recomputed %v", last, h, got, want)
		}
	}
}

// checkDistribution checks probe weights: n of them, none negative, summing to 1.
func checkDistribution(t *testing.T, name string, w []float32, n int) {
	t.Helper()
	if len(w) != n {
		t.Fatalf("%s: %d weights, want %d", name, len(w), n)
	}
	var sum float64
	for j, v := range w {
		if !(v >= 0) {
			t.Fatalf("%s: weight %g at %d", name, v, j)
		}
		sum += float64(v)
	}
	if math.Abs(sum-1) > 1e-4 {
		t.Errorf("%s: weights sum to %.6f", name, sum)
	}
}

// readCache reads a layer's key cache as floats, in either format.
func readCache(t *testing.T, m *Model, b *gpu.Buffer) []float32 {
	t.Helper()
	raw, err := m.dev.Read(b, 0, b.Size())
	if err != nil {
		t.Fatal(err)
	}
	if !m.kvF16 {
		return gpu.Float32s(raw)
	}
	out := make([]float32, len(raw)/2)
	for i := range out {
		out[i] = gguf.F16ToF32(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
	}
	return out
}

// TestAttnProbeChecked checks that a probe outside the batch or the model is refused before
// any work.
func TestAttnProbeChecked(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	dev := gputest.Device(t)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := Load(dev, f, Options{MaxBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	kv, err := m.NewKVCache(16)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	c := m.Config
	for _, p := range []AttnProbe{{Row: 1}, {Row: -1}, {Layer: c.NLayer}, {Layer: -1}, {Head: c.NHead}, {Head: -1}} {
		b := Batch{Tokens: []int32{1}, Pos: []int32{0}, Base: []int32{0}, Logits: []int{0}, Probe: &p}
		if _, err := m.ForwardBatch(kv, b); err == nil || !strings.Contains(err.Error(), "attention probe") {
			t.Errorf("probe %+v: error %v", p, err)
		}
	}
}

// TestAttnProbeGemma4 probes Gemma 4's layers of each kind after a 12-token prompt: a sliding
// layer (heads of 32, window 8), the global one (heads of 64) and a layer reading layer 2's
// cache. Each gives a distribution over the 13 positions, zero before a sliding window.
func TestAttnProbeGemma4(t *testing.T) {
	f, err := gguf.Open(shareddata.Path(t, "models", "gemma4", "gemma4-F32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := Load(gputest.Device(t), f, Options{MaxBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	kv, err := m.NewKVCache(32)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	prompt := []int32{1, 403, 407, 261, 378, 432, 383, 286, 261, 300, 301, 302, 303}
	b := Batch{Tokens: prompt, Logits: []int{len(prompt) - 1}}
	for p := range prompt {
		b.Pos, b.Base = append(b.Pos, int32(p)), append(b.Base, 0)
	}
	for _, layer := range []int{1, 3, 5} {
		b.Probe = &AttnProbe{Row: len(prompt) - 1, Layer: layer, Head: 2}
		if _, err := m.ForwardBatch(kv, b); err != nil {
			t.Fatal(err)
		}
		w := m.ProbeWeights()
		if len(w) != len(prompt) {
			t.Fatalf("layer %d: %d weights, want %d", layer, len(w), len(prompt))
		}
		var sum float64
		for j, v := range w {
			sum += float64(v)
			if m.Config.SlidingLayer(layer) && j < len(prompt)-8 && v != 0 {
				t.Errorf("layer %d: weight %g at position %d, before the window", layer, v, j)
			}
		}
		if math.Abs(sum-1) > 1e-4 {
			t.Errorf("layer %d: weights sum to %g", layer, sum)
		}
	}
}
