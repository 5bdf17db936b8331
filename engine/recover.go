package engine

// Surviving a lost device (a driver reset, a GPU hang the OS recovered from): the pass that
// met the loss fails its requests; at the top of its next round the engine goroutine fails
// every other request holding a slot (their KV cache went with the device), drops what the
// slots and the prompt cache hold, reopens the device and loads everything again, as waking
// from sleep does (sleep.go). Queued requests wait through the reload and then run. Health
// reports the fault meanwhile; when the reload fails, the engine stays unloaded as if asleep,
// Health says why, and the next request tries again.

import (
	"errors"
	"fmt"
	"time"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// ErrDeviceLost wraps the error of a request that was running when the GPU device was lost.
var ErrDeviceLost = gpu.ErrDeviceLost

// ErrOutOfMemory wraps the error of a request whose work needed device memory the GPU refused
// (or beyond Config.GPUMemory); the engine goes on with the others.
var ErrOutOfMemory = gpu.ErrOutOfMemory

// Health is nil while the engine can run requests; after a device loss, until the model is
// loaded again, it is why it cannot.
func (e *Engine) Health() error {
	if p := e.fault.Load(); p != nil {
		return *p
	}
	return nil
}

// Recoveries counts the device losses the engine has reloaded after.
func (e *Engine) Recoveries() int { return int(e.recoveries.Load()) }

// setFault sets what Health reports (nil: healthy).
func (e *Engine) setFault(err error) {
	if err == nil {
		e.fault.Store(nil)
		return
	}
	e.fault.Store(&err)
}

// checkDevice recovers from a loss of a device (any of a split's), if one was lost. It runs
// on the engine goroutine between rounds.
func (e *Engine) checkDevice() {
	if lost := e.lostDevice(); lost != nil {
		e.recoverDevice(lost)
	}
}

// lostDevice is the first of the engine's devices' losses, nil while all are usable.
func (e *Engine) lostDevice() error {
	for _, d := range e.devs {
		if lost := d.Lost(); lost != nil {
			return lost
		}
	}
	return nil
}

// clientError is the error the requests of a failed pass get: after a device loss, a short
// one saying to retry instead of wgpu's account of the call that met it (the log has that).
func (e *Engine) clientError(err error) error {
	if errors.Is(err, ErrDeviceLost) {
		if lost := e.lostDevice(); lost != nil {
			return lostError(lost)
		}
	}
	return err
}

// lostError is what a request running when the device was lost ends with; lost is the
// device's Lost, which wraps ErrDeviceLost.
func lostError(lost error) error {
	return fmt.Errorf("%w: the request was running when it happened; the model is being loaded again, retry", lost)
}

// recoverDevice fails the requests holding slots, frees what is left of the lost device and
// loads the model on a new one.
func (e *Engine) recoverDevice(lost error) {
	start := time.Now()
	e.setFault(fmt.Errorf("the GPU device was lost (%v); the model is being loaded again", lost))
	e.log.Error("GPU device lost: failing the requests running, reopening the device and loading the model again", "err", lost)
	e.failRunning(lostError(lost))
	e.dropCaches()
	e.freeDevice()
	if err := e.reload(); err != nil {
		e.freeDevice()
		e.sleeping.Store(true) // the next request tries again (wakeUp)
		e.setFault(fmt.Errorf("the GPU device was lost and loading the model again failed: %w; the next request tries again", err))
		e.log.Error("loading the model again after the device loss failed; the next request retries", "err", err)
		return
	}
	e.recoveries.Add(1)
	e.setFault(nil)
	e.noteSlots()
	e.log.Info("device reopened and model loaded again", "adapter", e.dev.Info.Name, "took", time.Since(start).Round(time.Millisecond))
}
