package server

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
)

// thinking applies llama-server's template defaults to in: the server's chat_template_kwargs
// (--chat-template-kwargs), then --reasoning on or off as an enable_thinking entry, each
// overridden by the request's own entries; with off the template's enable_thinking is false
// even without one. It returns the enable_thinking kwarg the template will see, nil when
// there is none.
func thinking(in *chat.Input, cfg Config) (*bool, error) {
	in.NoThinking = cfg.Reasoning == chat.ReasoningOff
	kw := map[string]json.RawMessage{}
	if len(cfg.ChatTemplateKwargs) > 0 {
		if err := json.Unmarshal(cfg.ChatTemplateKwargs, &kw); err != nil {
			return nil, fmt.Errorf("the server's chat_template_kwargs: %w", err)
		}
	}
	if def, set := cfg.Reasoning.DefaultThinking(); set {
		kw["enable_thinking"] = json.RawMessage(strconv.FormatBool(def))
	}
	if len(in.Kwargs) > 0 {
		var req map[string]json.RawMessage
		if err := json.Unmarshal(in.Kwargs, &req); err != nil {
			return nil, invalidRequest("'chat_template_kwargs' must be an object")
		}
		for k, v := range req {
			kw[k] = v
		}
	}
	if len(kw) > 0 {
		out, err := json.Marshal(kw) // keys sorted, as kwargsJSON writes them
		if err != nil {
			return nil, err
		}
		in.Kwargs = out
	}
	var b bool
	if v, ok := kw["enable_thinking"]; ok && json.Unmarshal(v, &b) == nil {
		return &b, nil
	}
	return nil, nil
}

// chatInput is a chat request's template input with llama-server's reasoning settings and
// assistant prefill applied.
type chatInput struct {
	chat.Input
	prefill   string // appended to the rendered prompt: the continued assistant message
	prefilled bool   // the request continues its final assistant message
	mayThink  bool   // an answer may start inside a <think> block the prompt leaves open
}

// chatInput prepares r for rendering, checking what llama-server checks first.
func (l *loaded) chatInput(r chatRequest, cfg Config) (chatInput, error) {
	var ci chatInput
	if tools, ok := r.tools.Get(); ok && len(tools) > 0 && cfg.NoJinja {
		return ci, invalidRequest("tools param requires --jinja flag")
	}
	var err error
	if ci.Input, err = r.input(); err != nil {
		return ci, err
	}
	kwarg, err := thinking(&ci.Input, cfg)
	if err != nil {
		return ci, err
	}
	// The template sees enable_thinking as llama-server's does: the kwarg, else thinking on
	// for a template that supports it; an open <think> block at the end of the prompt is left
	// open unless thinking is off.
	templateThinks := l.template.SupportsThinking() && !ci.NoThinking
	ci.mayThink = !ci.NoThinking
	if kwarg != nil {
		templateThinks, ci.mayThink = *kwarg, *kwarg
	}
	ci.prefill, ci.prefilled, err = prefill(r, &ci.Input, templateThinks, cfg)
	return ci, err
}

// reasoningBudget is a chat request's reasoning budget fields: reasoning_budget_tokens (or
// thinking_budget_tokens) and reasoning_budget_message.
type reasoningBudget struct {
	tokens  gen.OptNilInt
	alias   gen.OptNilInt // thinking_budget_tokens
	message gen.OptNilString
	control bool // reasoning_control: a control request may end the block
}

// reasoningBudget is the engine's reasoning budget for a chat request, as llama-server sets
// it: the request's reasoning_budget_tokens (else thinking_budget_tokens), where -1 or absent
// takes --reasoning-budget; nil when that is unbounded or the template's format has no
// reasoning markers. The budget watches the markers the template's analysis found; gp is the
// generation prompt, and when it leaves a reasoning block open, counting starts at once.
func (l *loaded) reasoningBudget(b reasoningBudget, cfg Config, gp string) *engine.ReasoningBudget {
	tokens := b.tokens.Or(b.alias.Or(-1))
	if tokens == -1 && cfg.ReasoningBudget != nil {
		tokens = *cfg.ReasoningBudget
	}
	if tokens < 0 && b.control {
		tokens = math.MaxInt32 // armed for reasoning_end only, as llama-server's INT_MAX budget
	}
	if tokens < 0 || l.format == nil {
		return nil
	}
	start, end := l.format.ReasoningTags()
	if end == "" {
		return nil
	}
	// Without an opening marker the output starts in reasoning (a delimiter-style format).
	open := start == ""
	if i := strings.LastIndex(gp, start); start != "" && i >= 0 {
		open = !strings.Contains(gp[i:], end)
	}
	encode := func(s string) []int32 { return l.tok.Encode(s, false, true) }
	return &engine.ReasoningBudget{
		Tokens: tokens,
		Start:  encode(start),
		End:    encode(end),
		Forced: encode(b.message.Or(cfg.ReasoningBudgetMessage) + end),
		Open:   open,
	}
}
