package server

import (
	"context"
	"errors"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// ReasoningBackend is a Backend whose running generations can be told to end their thinking
// block (POST /v1/chat/completions/control); the engine satisfies it.
type ReasoningBackend interface {
	// EndReasoning acts on the running generation whose Params.ControlID is id; it fails with
	// engine.ErrNoActiveCompletion or engine.ErrReasoningControlOff when it cannot.
	EndReasoning(ctx context.Context, id string) error
}

// ControlChatCompletion implements POST /v1/chat/completions/control as llama-server's
// post_control: {"id": "chatcmpl-...", "action": "reasoning_end"} ends the thinking block of
// the running chat completion with that id. The checks and messages are llama-server's: the id
// first, then the action (both 400s); a completion it cannot act on answers 200 with
// "success": false and why.
func (s *Server) ControlChatCompletion(ctx context.Context, req *gen.ChatControlRequest) (*gen.ChatControlResponse, error) {
	m := s.model()
	if m == nil {
		return nil, errLoading
	}
	id := req.ID.Or("")
	if id == "" {
		return nil, invalidRequest("missing completion id")
	}
	if req.Action.Or("") != "reasoning_end" {
		return nil, invalidRequest("unknown control action")
	}
	err := engine.ErrNoActiveCompletion // a backend that cannot be controlled runs none
	if rb, ok := m.backend.(ReasoningBackend); ok {
		err = rb.EndReasoning(ctx, id)
	}
	switch {
	case err == nil:
		return &gen.ChatControlResponse{Success: true}, nil
	case errors.Is(err, engine.ErrNoActiveCompletion), errors.Is(err, engine.ErrReasoningControlOff):
		return &gen.ChatControlResponse{Success: false, Message: gen.NewOptString(err.Error())}, nil
	}
	return nil, toAPIError(err)
}
