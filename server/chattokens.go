package server

import (
	"context"

	"github.com/wgpu-llama/wgpu-llama/gen"
)

// chatGenerationOf reads an OpenAI chat request as the chat endpoints do.
func (m *loaded) chatGenerationOf(req *gen.ChatCompletionRequest, stream bool) chatGeneration {
	return chatGeneration{
		chatRequest: chatRequest{
			messages:            req.Messages,
			tools:               req.Tools,
			kwargs:              req.ChatTemplateKwargs,
			addGenerationPrompt: req.AddGenerationPrompt.Or(true),
			continueFinal:       req.ContinueFinalMessage.Or(false),
			marker:              m.marker(),
		},
		toolChoice:      req.ToolChoice,
		parallel:        req.ParallelToolCalls.Or(false),
		reasoningFormat: req.ReasoningFormat,
		stream:          stream,
		budget:          reasoningBudget{tokens: req.ReasoningBudgetTokens, alias: req.ThinkingBudgetTokens, message: req.ReasoningBudgetMessage, control: req.ReasoningControl.Or(false)},
		sampling:        m.samplingFields(req, firstSet(req.NPredict, req.MaxCompletionTokens, req.MaxTokens)),
	}
}

// CountChatTokens implements POST /v1/chat/completions/input_tokens, llama-server's token
// count of a chat request: its prompt as the chat endpoint would build it, with nothing run.
func (s *Server) CountChatTokens(ctx context.Context, req *gen.ChatCompletionRequest) (*gen.ChatTokenCount, error) {
	m := s.model()
	if m == nil {
		return nil, errLoading
	}
	if len(req.Messages) == 0 {
		return nil, invalidRequest("'messages' must hold at least one message")
	}
	pl, err := s.chatPlan(ctx, m, req, req.Stream.Or(false))
	if err != nil {
		return nil, err
	}
	return &gen.ChatTokenCount{InputTokens: len(pl.prompt)}, nil
}

// CountChatTokensAlias implements POST /chat/completions/input_tokens, an alias of
// POST /v1/chat/completions/input_tokens.
func (s *Server) CountChatTokensAlias(ctx context.Context, req *gen.ChatCompletionRequest) (*gen.ChatTokenCount, error) {
	return s.CountChatTokens(ctx, req)
}

// chatPlan prepares an OpenAI chat request for the engine: its images encoded (media.go), then
// planned as the chat endpoints plan.
func (s *Server) chatPlan(ctx context.Context, m *loaded, req *gen.ChatCompletionRequest, stream bool) (chatPlan, error) {
	g := m.chatGenerationOf(req, stream)
	var err error
	if g.media, err = s.encodeImages(ctx, m, imageURLs(req.Messages)); err != nil {
		return chatPlan{}, err
	}
	return m.plan(g, s.cfg)
}

// marker is the media marker prompts render images as, "" when the model takes no images.
func (m *loaded) marker() string { return m.imageMarker }
