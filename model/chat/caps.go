package chat

import (
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/model/chat/autoparse"
	"github.com/wgpu-llama/wgpu-llama/model/chat/jinja"
)

// Caps are what a template supports, as llama-server reports them in /props
// (chat_template_caps). llama.cpp finds them by watching which values a probe render reads;
// here each is found from what probe renders produce.
type Caps struct {
	StringContent     bool // renders a message whose content is a string
	TypedContent      bool // renders content given as an array of typed parts
	SystemRole        bool // renders a system message's content
	Tools             bool // renders the tool definitions
	ToolCalls         bool // renders an assistant message's tool calls
	ParallelToolCalls bool // renders every call of a message with several
	ObjectArguments   bool // renders tool-call arguments given as objects
	PreserveReasoning bool // renders an earlier assistant message's reasoning_content
	ReasoningEffort   bool // reacts to a reasoning_effort variable
}

// ForAnalysis is the part of c the autoparser's template analysis reads.
func (c Caps) ForAnalysis() autoparse.Caps {
	return autoparse.Caps{StringContent: c.StringContent, TypedContent: c.TypedContent,
		ToolCalls: c.ToolCalls, ParallelToolCalls: c.ParallelToolCalls}
}

// Caps probes t. It renders a few short conversations, so callers should keep the result.
func (t Template) Caps() Caps {
	if t.tmpl == nil { // ChatML written out, or a built-in formatter: roles and texts only
		return Caps{StringContent: true, SystemRole: true}
	}
	const needle = "caps-probe-needle"
	try := func(msgs []any, tools []any, kwargs *jinja.Dict) (string, bool) {
		out, err := t.render(msgs, tools, true, false, kwargs, time.Now())
		return out, err == nil
	}
	has := func(msgs []any, tools []any, kwargs *jinja.Dict, needles ...string) bool {
		out, ok := try(msgs, tools, kwargs)
		for _, n := range needles {
			ok = ok && strings.Contains(out, n)
		}
		return ok
	}
	user := Message{Role: "user", Content: "Hi"}
	c := Caps{
		SystemRole:      t.caps.systemRole,
		ObjectArguments: t.caps.objectArguments,
	}
	_, c.StringContent = try(t.messages([]Message{{Role: "user", Content: needle}}), nil, nil)

	part := jinja.NewDict()
	part.Set("type", "text")
	part.Set("text", needle)
	typed := jinja.NewDict()
	typed.Set("role", "user")
	typed.Set("content", []any{part})
	if out, ok := try([]any{typed}, nil, nil); ok && strings.Contains(out, needle) {
		// A template that prints the list as a whole (its repr) does not understand the parts.
		c.TypedContent = !strings.Contains(out, "'type'") && !strings.Contains(out, `"type"`)
	}

	fn := jinja.NewDict()
	fn.Set("name", needle+"-tool")
	fn.Set("description", "")
	fn.Set("parameters", jinja.NewDict())
	tool := jinja.NewDict()
	tool.Set("type", "function")
	tool.Set("function", fn)
	c.Tools = has(t.messages([]Message{user}), []any{tool}, nil, needle+"-tool")

	// Ids of nine letters and digits, as Mistral's templates demand of every call.
	call := func(name, id string) ToolCall { return ToolCall{ID: id, Name: name, Arguments: `{"a": 1}`} }
	one := Message{Role: "assistant", ToolCalls: []ToolCall{call(needle+"-a", "call00001")}}
	two := Message{Role: "assistant", ToolCalls: []ToolCall{call(needle+"-a", "call00001"), call(needle+"-b", "call00002")}}
	c.ToolCalls = has(t.messages([]Message{user, one}), nil, nil, needle+"-a")
	c.ParallelToolCalls = c.ToolCalls && has(t.messages([]Message{user, two}), nil, nil, needle+"-a", needle+"-b")

	reasoned := Message{Role: "assistant", Content: "Hello", ReasoningContent: needle}
	c.PreserveReasoning = has(t.messages([]Message{user, reasoned, user}), nil, nil, needle)

	effort := func(level string) string {
		kw := jinja.NewDict()
		kw.Set("reasoning_effort", level)
		out, _ := try(t.messages([]Message{user}), nil, kw)
		return out
	}
	c.ReasoningEffort = effort("low") != effort("high")
	return c
}
