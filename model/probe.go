package model

import (
	"slices"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// AttnProbe asks a forward pass for the attention weights of one batch row's query head in
// one layer, as a debug view shows them: computed on the GPU inside the pass and read back in
// its submit (Model.ProbeWeights), so looking costs one dispatch and no pass of its own.
type AttnProbe struct {
	Row   int // batch row whose query is probed
	Layer int // layer whose attention is probed, 0..NLayer-1
	Head  int // query head, 0..NHead-1 (grouped-query models share kv heads between several)
}

// probeState carries Batch.Probe from upload to the layer that records it, and the last
// pass's weights to ProbeWeights.
type probeState struct {
	want *AttnProbe    // the probe of the pass being recorded; nil once recorded, or none
	keys int           // the probed row's keys: its attention end (position) + 1
	buf  *gpu.Buffer   // the weights on the device, grown as contexts grow
	read *gpu.Readback // the last pass's weights; nil when it had no probe
}

func (p *probeState) release() {
	p.buf.Release()
	*p = probeState{}
}

// startProbe takes a checked batch's probe for the pass about to be recorded, and forgets the
// last pass's weights either way.
func (m *Model) startProbe(b Batch) error {
	ps := &m.probe
	ps.want, ps.read = b.Probe, nil
	if b.Probe == nil {
		return nil
	}
	end := b.Pos[b.Probe.Row]
	if b.AttnEnds != nil {
		end = b.AttnEnds[b.Probe.Row]
	}
	ps.keys = int(end) + 1
	return ensureWords(m.dev, &ps.buf, "attn_probe", ps.keys)
}

// recordProbe records the pass's probe right after layer il's attention when it looks at that
// layer: q is then the layer's rotated queries in scratch.qkv and its keys are in the cache,
// read through attnPos and ap exactly as the attention read them. Otherwise it records nothing.
func (m *Model) recordProbe(r *gpu.Recorder, kv *KVCache, il, n int, attnPos *gpu.Buffer, ap gpu.AttnParams) {
	p := m.probe.want
	if p == nil || p.Layer != il {
		return
	}
	c := m.Config
	sh := c.attnShape(il) // Gemma 4: the layer's own heads, and the cache it reads
	r.AttentionProbe(m.scratch.qkv, kv.k[c.kvSource(il)], attnPos, m.probe.buf, m.kvF16, sh.qkvWidth(), n, sh.heads, c.NKVHead, sh.headDim, p.Row, p.Head, ap)
	m.probe.read = r.ReadAlso(m.probe.buf, 0, uint64(m.probe.keys)*4)
	m.probe.want = nil // a draft's later passes are not the batch's
}

// ProbeWeights returns the attention weights the last forward pass's Batch.Probe asked for:
// one per position the row attends to (its position + 1 of them, or its attention end + 1),
// summing to 1, 0 before a sliding window. It is nil when the last pass had no probe or failed.
func (m *Model) ProbeWeights() []float32 {
	if m.next != nil && m.probe.read == nil { // a split model's stage holding the layer read it
		return m.next.ProbeWeights()
	}
	if m.probe.read == nil || m.probe.read.Bytes() == nil {
		return nil
	}
	return slices.Clone(gpu.Float32s(m.probe.read.Bytes()))
}
