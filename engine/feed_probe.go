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

// probeFor is the probe a pass should run for slot, nil when none is asked for it or the
// layer or head is outside the model (a request made before the model was known).
func (e *Engine) probeFor(slot int) *probeReq {
	f := e.obs.feed.Load()
	if f == nil || e.model == nil {
		return nil
	}
	q := f.probe.Load()
	c := e.model.Config
	if q == nil || q.slot != slot || q.layer < 0 || q.layer >= c.NLayer || q.head < 0 || q.head >= c.NHead || !f.probeArmed.Load() {
		return nil
	}
	return q
}

// probeBatch sets b's probe on the last of its rows that belong to the probed slot; the
// slots' rows come in order, counts[i] rows of slots[i].
func (e *Engine) probeBatch(b *model.Batch, slots, counts []int) {
	at := 0
	for i, s := range slots {
		at += counts[i]
		if q := e.probeFor(s); q != nil && e.obs.feed.Load().probeArmed.CompareAndSwap(true, false) {
			b.Probe = &model.AttnProbe{Row: at - 1, Layer: q.layer, Head: q.head}
			e.obs.probeSlot = s
		}
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
