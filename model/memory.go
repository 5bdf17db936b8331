package model

import (
	"strconv"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// Device memory by use, for the engine's debug view: what a model's buffers take, told apart
// without the view knowing the model's layout.

// WeightBytesByType is the base model's weights on the device by ggml type name ("F32" for the
// norm and bias vectors): WeightBytes less the LoRA adapters' tensors (AdapterBytes).
// A split model's figures sum its stages'.
func (m *Model) WeightBytesByType() map[string]uint64 {
	out := map[string]uint64{}
	for st := m; st != nil; st = st.next {
		skip := st.adapterBuffers()
		for _, b := range st.vectors {
			if !skip[b] {
				out[gpu.F32.String()] += b.Size()
			}
		}
		for _, w := range st.weights {
			if len(w.Chunks) > 0 && !skip[w.Chunks[0].Buf] {
				out[w.Type.String()] += w.Bytes()
			}
		}
	}
	return out
}

// sumStages sums f over a split model's stages (the model alone when it is not split).
func (m *Model) sumStages(f func(st *Model) uint64) uint64 {
	var n uint64
	for st := m; st != nil; st = st.next {
		n += f(st)
	}
	return n
}

// AdapterBytes is the device memory the loaded LoRA adapters' tensors take.
func (m *Model) AdapterBytes() uint64 {
	return m.sumStages(func(st *Model) uint64 {
		var n uint64
		st.eachLoraTerm(func(t *loraTerm) {
			n += t.a.Bytes() + t.b.Bytes() + bufSize(t.fa) + bufSize(t.fb)
		})
		return n
	})
}

// ScratchBytes is the device memory of the forward pass's activations and outputs as they are
// now (some buffers grow on first use).
func (m *Model) ScratchBytes() uint64 {
	return m.sumStages(func(st *Model) uint64 {
		s := &st.scratch
		var n uint64
		for _, b := range s.buffers(st.Config) {
			n += bufSize(*b)
		}
		for _, b := range []*gpu.Buffer{s.attnPos, s.mpos, s.loraT, s.attnScores, st.draft.out, st.draft.plan, st.cand.out, st.cand.part} {
			n += bufSize(b)
		}
		return n
	})
}

// Bytes is the device memory the cache takes: keys, values, attention partials and recurrent
// states, over every stage of a split model.
func (kv *KVCache) Bytes() uint64 {
	var n uint64
	for ; kv != nil; kv = kv.next {
		for _, b := range kv.buffers() {
			n += bufSize(b)
		}
	}
	return n
}

// adapterBuffers are the first buffers of the adapters' tensors, to tell them from the base
// model's in m.weights and m.vectors, where loading put them too.
func (m *Model) adapterBuffers() map[*gpu.Buffer]bool {
	out := map[*gpu.Buffer]bool{}
	m.eachLoraTerm(func(t *loraTerm) {
		for _, w := range []gpu.Weight{t.a, t.b} {
			if len(w.Chunks) > 0 {
				out[w.Chunks[0].Buf] = true
			}
		}
		for _, b := range []*gpu.Buffer{t.fa, t.fb} {
			if b != nil {
				out[b] = true
			}
		}
	})
	return out
}

func (m *Model) eachLoraTerm(fn func(*loraTerm)) {
	each := func(ts []loraTerm) {
		for i := range ts {
			fn(&ts[i])
		}
	}
	for _, l := range m.layerLora {
		each(l.qkv)
		each(l.wo)
		each(l.gateUp)
		each(l.down)
	}
	each(m.loraOut)
}

func bufSize(b *gpu.Buffer) uint64 {
	if b == nil {
		return 0
	}
	return b.Size()
}

// Footprint is the device memory a model takes by use, estimated before it loads: engine.Load
// checks it against the adapter's memory and names the biggest part when it does not fit.
type Footprint struct {
	Weights uint64 // the tensors, as the device holds them (Config.DeviceSize)
	KV      uint64 // keys and values of every attention layer for the cache's rows
	State   uint64 // a hybrid model's recurrent state for the cache's sequences (StateBytes each)
	Scratch uint64 // the forward pass's activations and logits
}

// Total is the sum of the parts.
func (f Footprint) Total() uint64 { return f.Weights + f.KV + f.State + f.Scratch }

// EstimateFootprint is the footprint of the model configured by c (ReadConfig, with NVocab
// known) loaded with opts and a cache of kvRows rows and states recurrent state slots
// (NewKVCacheFor); barrierFree as the device's.
func EstimateFootprint(c Config, opts Options, kvRows, states int, barrierFree bool) Footprint {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 512
	}
	outputs := min(max(opts.MaxOutputs, 1), opts.MaxBatch)
	var words uint64
	for _, s := range scratchSizes(c, opts.MaxBatch, outputs, barrierFree) {
		words += uint64(s.n)
	}
	return Footprint{
		Weights: max(c.DeviceSize, c.TensorSize),
		KV:      uint64(kvRows) * kvTokenBytes(c, opts, 0, c.NLayer),
		State:   uint64(max(states, 1)) * uint64(StateBytes(c)),
		Scratch: 4 * words,
	}
}

// kvTokenBytes is a token's keys and values over layers [lo, hi) with a cache of their own.
func kvTokenBytes(c Config, opts Options, lo, hi int) uint64 {
	var n uint64
	for il := lo; il < hi; il++ {
		if (c.Recurrent == nil || !c.Recurrent[il]) && c.kvSource(il) == il {
			row := uint64(c.NKVHead * c.attnShape(il).headDim * 4)
			if !opts.KVF32 {
				row /= 2
			}
			n += 2 * row
		}
	}
	return n
}

// EstimateStageFootprint is EstimateFootprint for the stage of a split model holding layers
// [lo, hi) (LoadSplit): its layers' tensors in f, the token embeddings on the first stage (and
// the last when they are the output matrix too), the output on the last, its layers' cache and
// state, and a whole pass's activations, which every stage has.
func EstimateStageFootprint(c Config, f *gguf.File, opts Options, kvRows, states int, barrierFree bool, lo, hi int) Footprint {
	full := EstimateFootprint(c, opts, kvRows, states, barrierFree)
	_, hasOutput := f.Tensor("output.weight")
	var weights uint64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		mine := lo == 0 // tensors of no layer go with the first stage, but for the output's
		if rest, ok := strings.CutPrefix(t.Name, "blk."); ok {
			layer, _, _ := strings.Cut(rest, ".")
			il, err := strconv.Atoi(layer)
			mine = err == nil && il >= lo && il < hi
		}
		switch {
		case t.Name == "rope_freqs.weight":
			mine = true
		case strings.HasPrefix(t.Name, "output"):
			mine = hi == c.NLayer
		case t.Name == "token_embd.weight":
			mine = lo == 0 || hi == c.NLayer && !hasOutput
		}
		if mine {
			weights += max(deviceSize(t), t.Size)
		}
	}
	return Footprint{
		Weights: weights,
		KV:      uint64(kvRows) * kvTokenBytes(c, opts, lo, hi),
		State:   uint64(max(states, 1)) * uint64(stateBytesOf(c, lo, hi)),
		Scratch: full.Scratch,
	}
}
