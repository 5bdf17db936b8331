package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/model/chat/jinja"
)

// Template renders conversations into prompts for one model, as llama-server's Jinja chat
// templates do.
type Template struct {
	// Source is the Jinja source rendered (what /props reports as chat_template).
	Source string
	// Name says where the template came from, for logs ("chatml", "gguf", a built-in name or
	// a file path).
	Name string
	// BOS and EOS are the model's BOS and EOS tokens as text, seen by the template as
	// bos_token and eos_token.
	BOS, EOS string

	tmpl   *jinja.Template
	legacy legacyFormat // set for llama.cpp's named built-in templates, which are not Jinja
	caps   caps
	// readsThinking: the template reads message.thinking (GPT-OSS, LFM2.5) rather than
	// reasoning_content.
	readsThinking bool
}

// caps are what probing found the template does (see common/jinja/caps.cpp in llama.cpp).
type caps struct {
	systemRole      bool // reads a system message's content
	objectArguments bool // renders tool-call arguments given as objects
	thinking        bool // reacts to enable_thinking
}

// Input is everything a template renders: the conversation and request options.
type Input struct {
	// Messages is the conversation in order, before llama-server's normalisation.
	Messages []Message
	// Tools is the request's "tools" JSON array, or nil.
	Tools json.RawMessage
	// AddGenerationPrompt ends the prompt with the assistant's turn opener.
	AddGenerationPrompt bool
	// Kwargs is the request's "chat_template_kwargs" JSON object, or nil: extra template
	// variables that override the defaults.
	Kwargs json.RawMessage
	// Now is the time strftime_now and date_string read; zero means the current time.
	Now time.Time
	// NoThinking makes enable_thinking false even for a template that supports thinking
	// (llama-server's --reasoning off); Kwargs may still set it.
	NoThinking bool
}

// RenderError is a template's refusal to render a conversation (raise_exception) or a failure
// while rendering; the server answers it with HTTP 400.
type RenderError struct {
	Err error // the Jinja error or *jinja.Exception, or the bad tools/kwargs JSON
}

// Error is the underlying error's message.
func (e *RenderError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *RenderError) Unwrap() error { return e.Err }

// New parses a Jinja chat template and probes what it supports.
func New(src, name string) (Template, error) {
	p, err := jinja.Parse(src)
	if err != nil {
		return Template{}, fmt.Errorf("parsing chat template %s: %w", name, err)
	}
	t := Template{Source: src, Name: name, tmpl: p, readsThinking: strings.Contains(src, "message.thinking")}
	t.caps = t.probe()
	return t, nil
}

// WithSpecialTokens returns t with bos_token and eos_token set to the given texts.
func (t Template) WithSpecialTokens(bos, eos string) Template {
	t.BOS, t.EOS = bos, eos
	return t
}

// Render renders msgs, ending with the assistant's turn opener when addGenerationPrompt is set.
func (t Template) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.Apply(Input{Messages: msgs, AddGenerationPrompt: addGenerationPrompt})
}

// Apply renders in as llama-server does for /apply-template and chat completions (before the
// BOS/EOS trimming that tokenization needs). Errors are *RenderError.
func (t Template) Apply(in Input) (string, error) {
	if t.legacy != nil {
		return t.legacy(in.Messages, in.AddGenerationPrompt), nil
	}
	if t.tmpl == nil {
		return ChatML(in.Messages, in.AddGenerationPrompt), nil
	}
	var tools []any
	if len(in.Tools) > 0 {
		v, err := jinja.DecodeJSON(in.Tools)
		if err != nil {
			return "", &RenderError{fmt.Errorf("tools: %w", err)}
		}
		if l, ok := v.([]any); ok {
			tools = normaliseTools(l)
		}
	}
	var kwargs *jinja.Dict
	if len(in.Kwargs) > 0 {
		v, err := jinja.DecodeJSON(in.Kwargs)
		if err != nil {
			return "", &RenderError{fmt.Errorf("chat_template_kwargs: %w", err)}
		}
		kwargs, _ = v.(*jinja.Dict)
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	return t.render(t.messages(in.Messages), tools, in.AddGenerationPrompt, t.caps.thinking && !in.NoThinking, kwargs, now)
}

// Builtin reports whether t renders with one of llama.cpp's built-in formats (a
// --chat-template name, or what --no-jinja detected), which render roles and texts only (no
// tools, no enable_thinking) and never write a BOS to trim.
func (t Template) Builtin() bool { return t.legacy != nil }

// IsJinja reports whether t is a Jinja template (not llama.cpp's built-in formats).
func (t Template) IsJinja() bool { return t.tmpl != nil && t.legacy == nil }

// SupportsThinking reports whether the template reacts to enable_thinking, which llama-server
// probes at load: only then does --reasoning auto render it true.
func (t Template) SupportsThinking() bool { return t.caps.thinking }

// render runs the template with llama-server's context variables.
func (t Template) render(msgs []any, tools []any, addGen, thinking bool, kwargs *jinja.Dict, now time.Time) (string, error) {
	vars := jinja.NewDict()
	vars.Set("messages", msgs)
	vars.Set("bos_token", t.BOS)
	vars.Set("eos_token", t.EOS)
	vars.Set("enable_thinking", thinking)
	if addGen {
		vars.Set("add_generation_prompt", true)
	}
	if len(tools) > 0 {
		vars.Set("tools", tools)
	}
	vars.Set("date_string", jinja.Strftime(now, "%d %b %Y"))
	vars.Set("datetime", jinja.Strftime(now, "%b %d %Y"))
	vars.Set("strftime_now", jinja.Func(func(args []any, _ *jinja.Dict) (any, error) {
		if len(args) != 1 {
			return nil, errors.New("strftime_now() takes one format argument")
		}
		f, _ := args[0].(string)
		return jinja.Strftime(now, f), nil
	}))
	for _, k := range kwargs.Keys() {
		v, _ := kwargs.Get(k)
		vars.Set(k, v)
	}
	out, err := t.tmpl.Render(vars)
	if err != nil {
		return "", &RenderError{err}
	}
	return out, nil
}

// messages normalises msgs as llama-server does before rendering: a developer role becomes
// system, a leading system message is merged into the next one when the template ignores
// system messages, and each message becomes a mapping with keys role, content and, when set,
// reasoning_content, name, tool_call_id and tool_calls.
func (t Template) messages(msgs []Message) []any {
	msgs = append([]Message(nil), msgs...)
	for i := range msgs {
		if msgs[i].Role == "developer" {
			msgs[i].Role = "system"
		}
	}
	if !t.caps.systemRole && len(msgs) > 0 && msgs[0].Role == "system" {
		if len(msgs) > 1 {
			msgs[1].Content = msgs[0].Content + "\n" + msgs[1].Content
		}
		msgs = msgs[1:]
	}
	out := make([]any, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		d.Set("role", m.Role)
		d.Set("content", m.Content)
		if m.ReasoningContent != "" {
			d.Set("reasoning_content", m.ReasoningContent)
			if t.readsThinking {
				// GPT-OSS's and LFM2.5's templates read an answer's reasoning from "thinking";
				// llama.cpp's handlers for them copy it there.
				d.Set("thinking", m.ReasoningContent)
			}
		}
		if m.Name != "" {
			d.Set("name", m.Name)
		}
		if m.ToolCallID != "" {
			d.Set("tool_call_id", m.ToolCallID)
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]any, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				var args any = c.Arguments
				if t.caps.objectArguments {
					if v, err := jinja.DecodeJSON([]byte(c.Arguments)); err == nil {
						args = v
					}
				}
				fn := jinja.NewDict()
				fn.Set("name", c.Name)
				fn.Set("arguments", args)
				call := jinja.NewDict()
				call.Set("type", "function")
				call.Set("function", fn)
				if c.ID != "" {
					call.Set("id", c.ID)
				}
				calls[j] = call
			}
			d.Set("tool_calls", calls)
		}
		out[i] = d
	}
	return out
}

// normaliseTools rebuilds OpenAI tools as {type, function: {name, description, parameters}}.
func normaliseTools(tools []any) []any {
	out := make([]any, 0, len(tools))
	for _, tool := range tools {
		td, ok := tool.(*jinja.Dict)
		if !ok {
			continue
		}
		typ, _ := td.Get("type")
		fv, _ := td.Get("function")
		f, ok := fv.(*jinja.Dict)
		if !ok {
			out = append(out, tool)
			continue
		}
		fn := jinja.NewDict()
		name, _ := f.Get("name")
		fn.Set("name", name)
		desc, ok := f.Get("description")
		if !ok || desc == nil {
			desc = ""
		}
		fn.Set("description", desc)
		params, ok := f.Get("parameters")
		if !ok {
			params = jinja.NewDict()
		}
		fn.Set("parameters", params)
		d := jinja.NewDict()
		if typ == nil {
			typ = "function"
		}
		d.Set("type", typ)
		d.Set("function", fn)
		out = append(out, d)
	}
	return out
}

// probe renders probe conversations to find what the template supports.
func (t Template) probe() caps {
	const sysNeedle, argNeedle = "<system-probe-needle>", "arg_probe_needle"
	t.caps = caps{systemRole: true, objectArguments: true}
	var c caps
	try := func(msgs []Message, addGen, thinking bool) string {
		out, err := t.render(t.messages(msgs), nil, addGen, thinking, nil, time.Now())
		if err != nil {
			return ""
		}
		return out
	}
	user := Message{Role: "user", Content: "Hi"}
	c.systemRole = strings.Contains(try([]Message{{Role: "system", Content: sysNeedle}, user}, false, false), sysNeedle)
	call := Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "call00001", Name: "probe_fn",
		Arguments: `{"` + argNeedle + `": 1}`}}}
	c.objectArguments = strings.Contains(try([]Message{user, call}, false, false), argNeedle)
	c.thinking = try([]Message{user}, true, true) != try([]Message{user}, true, false)
	return c
}

// RenderJSON renders messages and tools given as JSON arrays (tool-call arguments as objects,
// content possibly null), as llama.cpp's autoparser renders its probe conversations: no date
// variables, no role fix-ups, add_generation_prompt set only when true and tools only when
// non-empty. The caller shapes the contents for the template's caps.
func (t Template) RenderJSON(messages, tools json.RawMessage, addGenerationPrompt, enableThinking bool) (string, error) {
	if t.tmpl == nil {
		return "", errors.New("not a Jinja template")
	}
	mv, err := jinja.DecodeJSON(messages)
	if err != nil {
		return "", fmt.Errorf("messages: %w", err)
	}
	msgs, _ := mv.([]any)
	vars := jinja.NewDict()
	vars.Set("messages", msgs)
	vars.Set("bos_token", t.BOS)
	vars.Set("eos_token", t.EOS)
	vars.Set("enable_thinking", enableThinking)
	if len(tools) > 0 {
		tv, err := jinja.DecodeJSON(tools)
		if err != nil {
			return "", fmt.Errorf("tools: %w", err)
		}
		if l, ok := tv.([]any); ok && len(l) > 0 {
			vars.Set("tools", l)
		}
	}
	if addGenerationPrompt {
		vars.Set("add_generation_prompt", true)
	}
	return t.tmpl.Render(vars)
}
