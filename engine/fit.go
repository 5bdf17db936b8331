package engine

import (
	"errors"
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// kvPlan is how the context is split into the KV cache's pages.
type kvPlan struct {
	nCtx      int // the context (-c), all slots together
	slotCtx   int // most tokens one slot holds
	cellLimit int // with a unified cache, the most token rows all slots hold; else 0
	nPages    int // pages of the KV cache
	nSlots    int // sequences run at once
	// states are a hybrid's recurrent state slots: one a slot, and with speculative decoding
	// one more a slot, for its state before its drafted tokens (speculative.go).
	states int
}

// planKV splits cfg's context (nCtxTrain when unset) over nSlots slots.
func planKV(cfg Config, nCtxTrain, nSlots int) (kvPlan, error) {
	p := kvPlan{nCtx: cfg.CtxSize, nSlots: nSlots, states: nSlots}
	if p.nCtx <= 0 {
		p.nCtx = nCtxTrain
	}
	p.slotCtx = p.nCtx / nSlots
	if cfg.KVUnified {
		p.slotCtx = p.nCtx
	}
	if p.slotCtx < 2 {
		return p, fmt.Errorf("engine: a context of %d tokens cannot be split over %d slots", p.nCtx, nSlots)
	}
	if cfg.KVUnified {
		// llama.cpp's unified cache counts cells (token rows), not pages: the slots together hold
		// at most nCtx of them (cellLimit), and each slot's last page may be partly empty, so
		// there is a page more per slot than the cells need.
		p.cellLimit = p.nCtx
		p.nPages = pagesFor(p.nCtx) + nSlots
	} else {
		p.nPages = nSlots * pagesFor(p.slotCtx) // each slot's share, in whole pages
	}
	return p, nil
}

// ErrTooBig fails a load whose model, KV cache and activations need more memory than the
// device has (checkFits).
var ErrTooBig = errors.New("engine: the model does not fit in the GPU's memory")

// checkFits refuses, before anything is uploaded, a model whose estimated footprint exceeds the
// memory the device reports (gpu.Device.Memory; unknown memory is not checked), with the parts'
// sizes and the flags that shrink each. Allocations beyond it would fail one by one, or on some
// drivers spill into system memory and crawl.
func checkFits(dev *gpu.Device, f *gguf.File, c model.Config, opts model.Options, kp kvPlan, cfg Config) error {
	have, source := dev.Memory()
	if have == 0 {
		return nil
	}
	need := footprint(dev, f, c, opts, kp)
	if need.Total() <= have {
		return nil
	}
	return tooBig(need, opts, kp, cfg, fmt.Sprintf("%s has %s (%s)", dev.Info.Name, mib(have), source), nil)
}

// refusedAtLoad turns an allocation the device refused while loading (gpu.ErrOutOfMemory) into
// checkFits' message, for the drivers that do not tell their memory (NVIDIA's): the sizes and
// what to lower, then the refusal (which says what was in use). Other errors pass unchanged.
func refusedAtLoad(err error, dev *gpu.Device, f *gguf.File, c model.Config, opts model.Options, kp kvPlan, cfg Config) error {
	if !errors.Is(err, gpu.ErrOutOfMemory) || errors.Is(err, ErrTooBig) {
		return err
	}
	need := footprint(dev, f, c, opts, kp)
	return tooBig(need, opts, kp, cfg, dev.Info.Name+" refused it", err)
}

// footprint is model.EstimateFootprint for this load.
func footprint(dev *gpu.Device, f *gguf.File, c model.Config, opts model.Options, kp kvPlan) model.Footprint {
	return model.EstimateFootprint(withVocab(f, c), opts, kp.nPages<<pageBits, kp.states, dev.BarrierFree)
}

// withVocab is c with the vocabulary read from the token embedding where the metadata leaves
// it out, as the estimates need it.
func withVocab(f *gguf.File, c model.Config) model.Config {
	if c.NVocab == 0 {
		if emb, ok := f.Tensor("token_embd.weight"); ok && len(emb.Shape) == 2 {
			c.NVocab = int(emb.Shape[1])
		}
	}
	return c
}

// tooBig is ErrTooBig with the parts' sizes, what the device has (has), the flags that shrink
// the largest part, and the refusal behind it where there was one.
func tooBig(need model.Footprint, opts model.Options, kp kvPlan, cfg Config, has string, refusal error) error {
	cacheType := "f16"
	if cfg.KVF32 {
		cacheType = "f32"
	}
	var lower string
	switch {
	case need.KV+need.State >= need.Weights && need.KV+need.State >= need.Scratch:
		lower = fmt.Sprintf("lower the context (-c %d) or the slots (-np %d)", kp.nCtx, max(cfg.Slots, 1))
		if cfg.KVF32 {
			lower += ", or keep the cache in f16 (-ctk f16)"
		}
	case need.Scratch >= need.Weights:
		lower = fmt.Sprintf("lower the batch (-ub %d)", opts.MaxBatch)
	default:
		lower = "use a smaller model or a smaller quantization"
	}
	state := ""
	if need.State > 0 {
		state = fmt.Sprintf(", recurrent state %s in %d slots", mib(need.State), kp.states)
	}
	err := fmt.Errorf("%w: it needs about %s (weights %s, KV cache %s for %d tokens in %s%s, scratch %s for batches of %d), %s; %s",
		ErrTooBig, mib(need.Total()), mib(need.Weights), mib(need.KV), kp.nPages<<pageBits, cacheType, state,
		mib(need.Scratch), opts.MaxBatch, has, lower)
	if refusal != nil {
		err = fmt.Errorf("%w (%w)", err, refusal)
	}
	return err
}

// mib writes a byte count in MiB, or GiB from 10 GiB up.
func mib(n uint64) string {
	if n >= 10<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
