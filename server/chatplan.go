package server

import (
	"encoding/json"
	"strings"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat/autoparse"
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
	// media are the conversation's images, in order, encoded (Server.encodeImages).
	media []engine.MediaImage
}

// toolChoice is how far the model must call tools.
type toolChoice int

const (
	choiceAuto toolChoice = iota
	choiceNone
	choiceRequired
)

// plan prepares a chat generation as llama-server's oaicompat_chat_params_parse and
// common_chat_templates_apply do: the prompt is the template's own rendering; the output is
// read by the parser built from the template's analysis (planOutput), and constrained by a
// grammar where tools must be called, after a trigger where they may be, or by a response
// format; a prompt that ends inside an open <think> block starts the output in reasoning, or is
// closed when thinking is off.
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
	reasoning := cfg.ReasoningFormat
	if name, ok := g.reasoningFormat.Get(); ok {
		if reasoning, err = toolcall.ParseReasoningFormat(name); err != nil {
			return pl, invalidRequest("'reasoning_format': %v", err)
		}
	}
	if ci.prefilled {
		reasoning = toolcall.ReasoningNone // as llama-server, which leaves a continued answer whole
	}
	text, err := l.renderChat(ci.Input)
	if err != nil {
		return pl, err
	}
	if !ci.mayThink && (strings.HasSuffix(text, "<think>\n") || strings.HasSuffix(text, "<think>")) {
		text += "</think>" // thinking is off: the block the template opened is closed
	}
	pl.syntax = toolcall.Syntax{
		Reasoning:          reasoning,
		ReasoningInContent: g.stream && reasoning == toolcall.ReasoningDeepseekLegacy,
	}
	if pl.params, err = g.sampling.params(); err != nil {
		return pl, err
	}
	gp := ""
	if l.format != nil {
		gp = l.generationPrompt(ci.Input, text)
		if err := l.planOutput(&pl, tools, choice, g.parallel, schema, field, gp); err != nil {
			return pl, err
		}
	}
	text += ci.prefill
	if schema != nil {
		// A response format constrains the whole answer to the schema's JSON.
		src, err := grammar.FromJSONSchema(schema)
		if err != nil {
			return pl, invalidRequest("%s: %v", quoteField(field), err)
		}
		if pl.params.Grammar, err = grammar.Parse(src); err != nil {
			return pl, invalidRequest("%s: %v", quoteField(field), err)
		}
	}
	pl.params.ReasoningBudget = l.reasoningBudget(g.budget, cfg, gp)
	pl.params.ReasoningControl = g.budget.control
	if g.marker == "" {
		pl.prompt = tokenize(l.tok, text)
	} else if pl.prompt, err = l.mediaTokens(text, g.marker, g.media); err != nil {
		return pl, err
	}
	return pl, nil
}

// toolList reads the request's tools for the parsers and grammars.
func toolList(tools gen.OptNilChatTools) ([]autoparse.Tool, error) {
	list, _ := tools.Get()
	out := make([]autoparse.Tool, 0, len(list))
	for i, t := range list {
		if t.Type != "function" {
			return nil, invalidRequest("tools[%d]: tool type %q is not supported (only \"function\")", i, t.Type)
		}
		var params json.RawMessage
		if !isNull(t.Function.Parameters) {
			params = json.RawMessage(t.Function.Parameters)
		}
		out = append(out, autoparse.Tool{Name: t.Function.Name, Parameters: params})
	}
	return out, nil
}

// parseToolChoice reads OpenAI's tool_choice: "auto", "none", "required", or
// {"type": "function", "function": {"name": NAME}}, which requires that tool (only it is
// offered to the grammar; llama-server takes such an object as "auto").
func parseToolChoice(raw jx.Raw, tools []autoparse.Tool) (toolChoice, []autoparse.Tool, error) {
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
				return choiceRequired, []autoparse.Tool{t}, nil
			}
		}
		return 0, nil, invalidRequest("'tool_choice' names the function %q, which is not in 'tools'", obj.Function.Name)
	}
	return 0, nil, invalidRequest(`'tool_choice' must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}`)
}
