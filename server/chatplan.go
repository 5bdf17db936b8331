package server

import (
	"encoding/json"
	"strings"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
)

// chatPlan is a chat request made ready for the engine: the prompt, the sampling settings (with
// any grammar that forces a tool call) and how to read the output.
type chatPlan struct {
	prompt []int32
	params engine.Params
	syntax toolcall.Syntax
}

// chatGeneration is a chat request as the chat endpoints (OpenAI's and Anthropic's) share it.
type chatGeneration struct {
	chatRequest
	toolChoice      jx.Raw // OpenAI's tool_choice
	parallel        bool
	reasoningFormat gen.OptNilString
	stream          bool
	sampling        samplingFields
	budget          reasoningBudget
}

// toolChoice is how far the model must call tools.
type toolChoice int

const (
	choiceAuto toolChoice = iota
	choiceNone
	choiceRequired
)

// plan prepares a chat generation as llama-server's oaicompat_chat_params_parse and
// common_chat_templates_apply do: the output format comes from the template and the tools (a
// template that ignores the tools answers in free content); the generic format adds its
// instruction to the system message; with tools that must be called (or
// the generic format) the output is constrained by a grammar; a prompt that ends inside an open
// <think> block starts the output in reasoning, or is closed when thinking is off.
func (l *loaded) plan(g chatGeneration, cfg Config) (chatPlan, error) {
	var pl chatPlan
	ci, err := l.chatInput(g.chatRequest, cfg)
	if err != nil {
		return pl, err
	}
	tools, err := toolList(g.tools)
	if err != nil {
		return pl, err
	}
	choice, tools, err := parseToolChoice(g.toolChoice, tools)
	if err != nil {
		return pl, err
	}
	if cfg.NoJinja && !isNull(g.toolChoice) && !(g.toolChoice.Type() == jx.String && choice == choiceAuto) {
		return pl, invalidRequest("tool_choice param requires --jinja flag")
	}
	callable := len(tools) > 0 && choice != choiceNone
	if callable && strings.TrimSpace(g.sampling.grammar.Or("")) != "" {
		return pl, invalidRequest("Cannot use custom grammar constraints with tools.")
	}
	schema, field, err := g.sampling.schema()
	if err != nil {
		return pl, err
	}
	format := toolcall.Detect(l.template.Source, tools, choice == choiceNone, schema != nil)
	var text string // the rendered prompt, once rendered
	rendered := false
	if format == toolcall.Generic {
		with, ignored, err := l.toolsIgnored(ci.Input)
		if err != nil {
			return pl, err
		}
		if ignored {
			// llama-server's autoparser finds no tool syntax in such a template: the prompt is
			// the template's own and the output free content, whatever tool_choice says.
			format, callable = toolcall.ContentOnly, false
			text, rendered = with, true
		}
	}

	reasoning := cfg.ReasoningFormat
	if name, ok := g.reasoningFormat.Get(); ok {
		if reasoning, err = toolcall.ParseReasoningFormat(name); err != nil {
			return pl, invalidRequest("'reasoning_format': %v", err)
		}
	}
	if ci.prefilled {
		reasoning = toolcall.ReasoningNone // as llama-server, which leaves a continued answer whole
	}
	if format == toolcall.Generic {
		ci.Messages = withSystem(ci.Messages, toolcall.GenericInstruction)
	}
	if !rendered {
		if text, err = l.renderChat(ci.Input); err != nil {
			return pl, err
		}
	}
	forcedOpen := false
	if strings.HasSuffix(text, "<think>\n") || strings.HasSuffix(text, "<think>") {
		if ci.mayThink {
			forcedOpen = true
		} else {
			text += "</think>"
		}
	}
	text += ci.prefill

	if pl.params, err = g.sampling.params(); err != nil {
		return pl, err
	}
	if c, ok := toolcall.NewConstraint(format, tools, choice == choiceRequired, g.parallel, forcedOpen, json.RawMessage(schema)); ok {
		src, err := grammar.FromJSONSchema(c.Schema)
		if err != nil {
			if schema != nil {
				return pl, invalidRequest("%s: %v", quoteField(field), err)
			}
			return pl, invalidRequest("'tools': %v", err)
		}
		if pl.params.Grammar, err = grammar.Parse(c.Grammar(src)); err != nil {
			return pl, invalidRequest("'tools': %v", err)
		}
		for _, t := range c.Triggers {
			pl.params.GrammarTriggers = append(pl.params.GrammarTriggers, engine.GrammarTrigger{Word: t.Word, AtStart: t.AtStart})
		}
	}
	pl.params.ReasoningBudget = l.reasoningBudget(g.budget, cfg, forcedOpen)
	pl.params.ReasoningControl = g.budget.control
	pl.prompt = tokenize(l.tok, text)
	pl.syntax = toolcall.Syntax{
		Format:             format,
		Reasoning:          reasoning,
		ReasoningInContent: g.stream && reasoning == toolcall.ReasoningDeepseekLegacy,
		ThinkingForcedOpen: forcedOpen,
		ParseToolCalls:     callable,
	}
	return pl, nil
}

// toolList reads the request's tools for the parsers and grammars.
func toolList(tools gen.OptNilChatTools) ([]toolcall.Tool, error) {
	list, _ := tools.Get()
	out := make([]toolcall.Tool, 0, len(list))
	for i, t := range list {
		if t.Type != "function" {
			return nil, invalidRequest("tools[%d]: tool type %q is not supported (only \"function\")", i, t.Type)
		}
		var params json.RawMessage
		if !isNull(t.Function.Parameters) {
			params = json.RawMessage(t.Function.Parameters)
		}
		out = append(out, toolcall.Tool{Name: t.Function.Name, Description: t.Function.Description.Or(""), Parameters: params})
	}
	return out, nil
}

// parseToolChoice reads OpenAI's tool_choice: "auto", "none", "required", or
// {"type": "function", "function": {"name": NAME}}, which requires that tool (only it is
// offered to the grammar; llama-server takes such an object as "auto").
func parseToolChoice(raw jx.Raw, tools []toolcall.Tool) (toolChoice, []toolcall.Tool, error) {
	if isNull(raw) {
		return choiceAuto, tools, nil
	}
	switch raw.Type() {
	case jx.String:
		s, _ := jx.DecodeBytes(raw).Str()
		switch s {
		case "auto":
			return choiceAuto, tools, nil
		case "none":
			return choiceNone, tools, nil
		case "required":
			return choiceRequired, tools, nil
		}
		return 0, nil, invalidRequest("Invalid tool_choice: %s", s)
	case jx.Object:
		var obj struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" || obj.Function.Name == "" {
			return 0, nil, invalidRequest(`'tool_choice' must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}`)
		}
		for _, t := range tools {
			if t.Name == obj.Function.Name {
				return choiceRequired, []toolcall.Tool{t}, nil
			}
		}
		return 0, nil, invalidRequest("'tool_choice' names the function %q, which is not in 'tools'", obj.Function.Name)
	}
	return 0, nil, invalidRequest(`'tool_choice' must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}`)
}

// toolsIgnored reports whether the template renders the conversation the same with the
// request's tools as without them, and returns the rendering with them (the prompt, when they
// are ignored). llama-server (b10587) no longer has the generic JSON fallback: a template
// without a specialized format goes to its differential autoparser, and one that shows no
// trace of tools there gets no tool-call syntax, no grammar (not even for tool_choice
// "required") and a content-only parser.
func (l *loaded) toolsIgnored(in chat.Input) (with string, ignored bool, err error) {
	if len(in.Tools) == 0 {
		return "", false, nil
	}
	if with, err = l.renderChat(in); err != nil {
		return "", false, err
	}
	in.Tools = nil
	without, err := l.renderChat(in)
	if err != nil {
		return "", false, err
	}
	return with, with == without, nil
}

// withSystem adds text to the system message, or starts the conversation with one (minja's
// add_system, which llama.cpp's generic format uses).
func withSystem(msgs []chat.Message, text string) []chat.Message {
	out := append([]chat.Message(nil), msgs...)
	if len(out) > 0 && out[0].Role == "system" {
		out[0].Content += "\n\n" + text
		return out
	}
	return append([]chat.Message{{Role: "system", Content: text}}, out...)
}
