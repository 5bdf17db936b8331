package engine

// Sleeping, llama-server's --sleep-idle-seconds: after Config.SleepIdle with no request running
// or queued, the engine goroutine drops what the slots and the prompt cache hold and frees the
// device with everything on it (weights, KV cache, the draft model, cached pipelines). The next
// request or control message finds the engine asleep and loads it all again before it runs, so
// clients only wait; requests arriving meanwhile queue behind the load. Everything happens on
// the engine goroutine, so no request ever sees a half-freed model.
//
// The counters Stats reports stay as they were on falling asleep (llama-server's snapshot taken
// right before sleeping), the device memory too, and the gauges are refreshed on waking.

import (
	"context"
	"fmt"
	"time"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// Sleeping reports whether the engine has freed the model (see Config.SleepIdle).
func (e *Engine) Sleeping() bool { return e.sleeping.Load() }

// Wake loads the model again if the engine sleeps and returns once it is loaded, or the error
// that kept it from loading; awake, it returns at once. Submitting a task wakes the engine too:
// Wake is for work that needs the model awake without running on it (llama-server wakes for
// every request but its read-only ones).
func (e *Engine) Wake(ctx context.Context) error {
	if !e.sleeping.Load() {
		return nil
	}
	return e.do(ctx, nil, func() error { return nil })
}

// idleTimer returns a channel that fires once the engine has been idle for Config.SleepIdle,
// and the function that stops it; the channel is nil when the engine never sleeps or already
// does.
func (e *Engine) idleTimer() (<-chan time.Time, func()) {
	if e.cfg.SleepIdle <= 0 || e.sleeping.Load() {
		return nil, func() {}
	}
	t := time.NewTimer(e.cfg.SleepIdle)
	return t.C, func() { t.Stop() }
}

// sleep frees the device and everything on it. It runs on the engine goroutine with every slot
// idle.
func (e *Engine) sleep() {
	e.dropCaches()
	gpuMemory := storageBytes(e.devs)
	e.stats.update(func(st *Stats) { st.GPUMemory = gpuMemory }) // what Stats reports asleep, as the counters
	e.freeDevice()
	e.sleeping.Store(true)
	e.log.Info("sleeping: the model and its device memory are freed", "idle", e.cfg.SleepIdle)
	if e.cfg.OnSleep != nil {
		e.cfg.OnSleep(true)
	}
}

// dropCaches empties every slot's cache, the prompt cache and the draft model's record of
// what it holds, before the KV cache they index is freed.
func (e *Engine) dropCaches() {
	for _, s := range e.slots {
		e.truncate(s, 0)
	}
	if e.cache != nil { // its entries hold pages of the KV cache being freed
		for _, c := range e.cache.entries {
			e.truncate(c, 0)
		}
		clear(e.cache.entries)
		e.cache.entries = e.cache.entries[:0]
	}
	if e.spec != nil {
		clear(e.spec.cached)
	}
}

// freeDevice releases the draft model, the KV cache, the model and the device, those not yet
// released.
func (e *Engine) freeDevice() {
	if e.vision != nil {
		e.vision.Close()
		e.vision = nil
	}
	if e.spec != nil && e.spec.draft != nil {
		e.spec.kv.Release()
		e.spec.draft.Close()
		e.spec.draft, e.spec.kv = nil, nil
	}
	if e.kv != nil {
		e.kv.Release()
		e.kv = nil
	}
	if e.model != nil {
		e.model.Close()
		e.model = nil
	}
	if e.dev != nil {
		e.liveDevs.Store(nil)
		closeDevices(e.devs)
		e.dev, e.devs = nil, nil
	}
}

// wakeUp loads the model again if the engine sleeps; on failure the engine stays asleep and
// the next request tries again. It runs on the engine goroutine.
func (e *Engine) wakeUp() error {
	if !e.sleeping.Load() {
		return nil
	}
	start := time.Now()
	e.log.Info("waking up: loading the model again", "path", e.cfg.ModelPath)
	if err := e.reload(); err != nil {
		e.freeDevice()
		e.log.Error("waking up failed; the model stays unloaded", "err", err)
		return fmt.Errorf("engine: waking up: %w", err)
	}
	e.sleeping.Store(false)
	e.setFault(nil) // a reload after a device loss that had failed (recover.go)
	e.noteSlots()
	e.log.Info("awake", "took", time.Since(start).Round(time.Millisecond))
	if e.cfg.OnSleep != nil {
		e.cfg.OnSleep(false)
	}
	return nil
}

// reload opens the device and loads the model, its KV cache and the draft model as Load did,
// setting the engine's fields as each is made (freeDevice undoes a partial reload).
func (e *Engine) reload() error {
	devs, _, err := openDevices(e.cfg)
	if err != nil {
		return err
	}
	dev := devs[0]
	e.dev, e.devs = dev, devs
	e.liveDevs.Store(&devs)
	f, err := gguf.Open(e.cfg.ModelPath)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := loadWeights(devs, e.layers, f, e.cfg.ModelPath, e.modelOpts, e.cfg.LoadProgress, e.log)
	if err != nil {
		return err
	}
	e.model = m
	if _, err := loadAdapters(m, e.cfg.Lora, false); err != nil { // the global scales stay as set
		return err
	}
	if c := m.Config; c.NVocab != e.info.NVocab || c.NEmbd != e.info.NEmbd || c.NCtxTrain != e.info.NCtxTrain || c.TensorSize != e.info.Size {
		return fmt.Errorf("%s is not the model that was loaded before (it changed on disk)", e.cfg.ModelPath)
	}
	if e.kv, err = m.NewKVCacheFor(len(e.pool.refs)<<pageBits, stateSlots(len(e.slots), e.recurrent && e.spec != nil)); err != nil {
		return err
	}
	if e.visionH != nil {
		if e.vision, err = loadVision(dev, e.cfg, e.info.NEmbd, e.batch, m.Config.MRoped()); err != nil {
			return err
		}
	}
	if e.spec != nil && e.spec.cfg.Type == SpecDraft {
		sp, err := loadDraft(dev, e.spec.cfg, m, draftOptions(e.cfg, e.batch), len(e.slots), e.slotCtx, e.log)
		if err != nil {
			return err
		}
		e.spec.draft, e.spec.kv, e.spec.cached, e.spec.saved = sp.draft, sp.kv, sp.cached, sp.saved
	}
	return nil
}
