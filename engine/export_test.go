package engine

import (
	"context"
	"slices"
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
