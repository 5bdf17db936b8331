package engine

import (
	"context"
	"slices"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// SlotTokens returns the tokens slot id holds in the KV cache, read between turns.
func (e *Engine) SlotTokens(ctx context.Context, id int) ([]int32, error) {
	var out []int32
	err := e.do(ctx, nil, func() error {
		out = slices.Clone(e.slots[id].cached)
		return nil
	})
	return out, err
}

// DeviceFreed reports whether the engine holds no device, model or KV cache and no slot holds
// a page; read only while the engine sleeps (Sleeping's atomic orders it after the freeing).
func (e *Engine) DeviceFreed() bool {
	return e.dev == nil && e.model == nil && e.kv == nil && e.pool.used() == 0
}

// LoseDevice destroys the engine's device between two passes, as a driver reset would.
func (e *Engine) LoseDevice(ctx context.Context) error { return e.LoseDeviceAt(ctx, 0) }

// LoseDeviceAt destroys the i-th device of a split model (0: the main one) between two passes.
func (e *Engine) LoseDeviceAt(ctx context.Context, i int) error {
	return e.do(ctx, nil, func() error {
		e.devs[i].Destroy()
		return nil
	})
}

// CapMemory caps the device's storage memory at what it holds now plus extra bytes (0 after
// a negative extra: no cap), between two passes.
func (e *Engine) CapMemory(ctx context.Context, extra int64) error {
	return e.do(ctx, nil, func() error {
		if extra < 0 {
			e.dev.SetBudget(0)
		} else {
			e.dev.SetBudget(e.dev.StorageBytes() + uint64(extra))
		}
		return nil
	})
}

// StorageBytes is the device's storage memory in use, read between two passes.
func (e *Engine) StorageBytes(ctx context.Context) (n uint64, err error) {
	err = e.do(ctx, nil, func() error {
		n = e.dev.StorageBytes()
		return nil
	})
	return n, err
}

// Creations is what the device has made so far (gpu.Device.Creations), read between two
// passes.
func (e *Engine) Creations(ctx context.Context) (c gpu.Creations, err error) {
	err = e.do(ctx, nil, func() error {
		c = e.dev.Creations()
		return nil
	})
	return c, err
}
