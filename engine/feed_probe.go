package engine

import "github.com/wgpu-llama/wgpu-llama/model"

// probeReq is a Feed's attention probe: whose weights, in which layer and head.
type probeReq struct{ slot, layer, head int }

// Probe asks for the attention weights of slot's last row, for one layer and head, in the
// next pass slot takes part in, and again in the first after each Latest (slot < 0: off, the
// default). So the engine probes once per snapshot a reader takes, not every pass: the weights
// are computed in the pass and copied back with its logits. Snapshots carry the latest as
// Attention.
func (f *Feed) Probe(slot, layer, head int) {
	if slot < 0 {
		f.probe.Store(nil)
	} else {
		f.probe.Store(&probeReq{slot, layer, head})
		f.probeArmed.Store(true)
	}
	f.wake()
}

// armedProbe is the probe the next pass of its slot should run: nil when no feed asks for
// one, it is not armed, or its layer or head is outside the model (asked before the model was
// known).
func (e *Engine) armedProbe() *probeReq {
	f := e.obs.feed.Load()
	if f == nil || e.model == nil || !f.probeArmed.Load() {
		return nil
	}
	q, c := f.probe.Load(), e.model.Config
	if q == nil || q.layer < 0 || q.layer >= c.NLayer || q.head < 0 || q.head >= c.NHead {
		return nil
	}
	return q
}

// setProbe puts q on b's row and disarms it until a reader takes the next snapshot.
func (e *Engine) setProbe(b *model.Batch, q *probeReq, row int) {
	if e.obs.feed.Load().probeArmed.CompareAndSwap(true, false) {
		b.Probe = &model.AttnProbe{Row: row, Layer: q.layer, Head: q.head}
		e.obs.probeSlot = q.slot
	}
}

// probeDone keeps the weights a pass's probe read back, for the next snapshot.
func (e *Engine) probeDone(b model.Batch) {
	if b.Probe == nil {
		return
	}
	if w := e.model.ProbeWeights(); w != nil {
		e.obs.attention = &Attention{Slot: e.obs.probeSlot, Layer: b.Probe.Layer, Head: b.Probe.Head, Pass: e.obs.passes, Weights: w}
		e.obs.dirty = true
	}
}
