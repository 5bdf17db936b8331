package engine

import (
	"context"
	"errors"
)

// Why a reasoning_end control request did nothing, as llama-server answers it (its messages).
var (
	// ErrNoActiveCompletion: no generation running in a slot has the control id.
	ErrNoActiveCompletion = errors.New("no active completion for this id")
	// ErrReasoningControlOff: the generation did not ask for reasoning control.
	ErrReasoningControlOff = errors.New("reasoning control not enabled for this completion")
)

// EndReasoning ends the thinking block of the running generation whose Params.ControlID is id,
// as llama-server's POST /v1/chat/completions/control (action reasoning_end) does: the
// generation's reasoning budget forces its closing tokens (the budget message, then the end
// tag) from the next token on. It runs on the engine goroutine between turns. A generation
// outside a thinking block (or without one) is left as it is and the call still succeeds, as
// llama-server's does. The first slot that runs id is the one controlled.
func (e *Engine) EndReasoning(ctx context.Context, id string) error {
	return e.do(ctx, nil, func() error {
		for _, s := range e.slots {
			g := s.gen
			if g == nil || id == "" || g.p.ControlID != id {
				continue
			}
			if !g.p.ReasoningControl {
				return ErrReasoningControlOff
			}
			g.budget.forceEnd()
			return nil
		}
		return ErrNoActiveCompletion
	})
}
