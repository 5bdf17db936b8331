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
