package autoparse

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

// specializedClassic returns the dedicated format llama.cpp picks for the templates it has
// long read by hand (common_chat_try_specialized_template, tried in this order), or nil.
func specializedClassic(src string) Builder {
	has := func(s string) bool { return strings.Contains(src, s) }
	switch {
	case has("[SYSTEM_PROMPT]") && has("[TOOL_CALLS]") && has("[ARGS]") && !has("[CALL_ID]"):
		return ministral3{}
	case has("<|channel|>"):
		return gptOSS{}
	case has(">>>all") && has(">>>${recipient}"):
		return functionaryV32{}
	case has("<|tool_calls_section_begin|>") && has("<|tool_call_begin|>"):
		return kimiK2{}
	case has("<|tool_list_start|>") && has("<|tool_list_end|>"),
		has("List of tools: [") && !has("<|tool_list_start|>"):
		// LFM2 and LFM2.5 read the same; reasoning only where the template knows <think>.
		return lfm2{think: has("<think>")}
	case has("<|role_sep|>") && has("<|message_sep|>") && !has("<|function_call|>"):
		return gigaChatV3{}
	}
	return nil
}

// request sums up what the dedicated formats check of a request.
type request struct {
	tools    bool // tools are given and tool_choice is not none
	required bool
	response bool // response_format has a schema
	min, max int  // how many calls (max < 0: any number)
}

func readRequest(p Params) request {
	r := request{tools: len(p.Tools) > 0 && p.Choice != ChoiceNone, required: p.Choice == ChoiceRequired,
		response: isObject(p.ResponseSchema), max: 1}
	if r.required {
		r.min = 1
	}
	if p.Parallel {
		r.max = -1
	}
	return r
}

// argsSchema reads a tool's arguments as JSON constrained by its schema.
func argsSchema(t Tool) *peg.P {
	return peg.ToolArgs(peg.Schema(peg.JSON(), "tool-"+t.Name+"-schema", parameters(t)))
}

// ministral3 is Ministral 3 / Magistral (and Devstral): [THINK]…[/THINK] reasoning, then
// content, then [TOOL_CALLS]name[ARGS]{json} calls (common_chat_params_init_ministral_3).
type ministral3 struct{}

func (ministral3) ReasoningTags() (string, string) { return "[THINK]", "[/THINK]" }

func (ministral3) Build(p Params) Output {
	r := readRequest(p)
	reasoning := peg.Eps()
	if p.ExtractReasoning {
		reasoning = peg.Opt(peg.Seq(peg.Lit("[THINK]"), peg.Reasoning(peg.Until("[/THINK]")), peg.Lit("[/THINK]")))
	}
	prefix := peg.Prefix(p.GenerationPrompt, "")
	out := Output{}
	switch {
	case r.response:
		// The model writes the JSON in a ```json fence.
		out.Parser = peg.Seq(prefix, reasoning, peg.Space(), peg.Lit("```json"), peg.Space(),
			peg.Content(peg.Schema(peg.JSON(), "response-format", p.ResponseSchema)), peg.Space(), peg.Lit("```"))
		out.Grammar = true
	case r.tools:
		var alts []*peg.P
		for _, t := range p.Tools {
			alts = append(alts, peg.Rule("tool-"+t.Name, peg.Seq(
				peg.ToolOpen(peg.Seq(peg.ToolName(peg.Lit(t.Name)), peg.Lit("[ARGS]"))), argsSchema(t))))
		}
		calls := peg.TriggerRule("tool-call", peg.Repeat(peg.Seq(peg.Lit("[TOOL_CALLS]"), peg.Choice(alts...)), r.min, r.max))
		out.Parser = peg.Seq(prefix, reasoning, peg.Space(), peg.Content(peg.Until("[TOOL_CALLS]")), peg.Space(), calls)
		out.Grammar = true
		out.Lazy = !r.required
		out.Triggers = []string{"[TOOL_CALLS]"}
	default:
		out.Parser = peg.Seq(prefix, reasoning, peg.Space(), peg.Content(peg.Rest()))
	}
	if !out.Lazy {
		out.Triggers = nil
	}
	return out
}

// gptOSS is OpenAI's harmony format: messages in channels (analysis is reasoning, commentary
// and final are content), each "<|start|>assistant" … "<|end|>", and calls addressed
// " to=functions.NAME" in the role or the channel header (common_chat_params_init_gpt_oss).
type gptOSS struct{}

func (gptOSS) ReasoningTags() (string, string) { return "<|channel|>analysis<|message|>", "<|end|>" }

func (gptOSS) Build(p Params) Output {
	r := readRequest(p)
	start := peg.Rule("start", peg.Lit("<|start|>assistant"))
	end := peg.Rule("end", peg.Lit("<|end|>"))
	content := peg.Rule("message-content", peg.Until("<|end|>"))
	channel := peg.Seq(peg.Lit("<|channel|>"), peg.Choice(peg.Lit("commentary"), peg.Lit("analysis")))
	constrainType := peg.Chars("A-Za-z0-9_-", 1, -1)
	// gpt-oss-20b sometimes opens a message with a stray commentary channel.
	stray := peg.Opt(peg.Seq(peg.Lit("<|channel|>commentary"), peg.Opt(peg.Lit(" to=assistant"))))
	startAnalysis := peg.Seq(stray, peg.Lit("<|channel|>analysis<|message|>"))
	var analysis *peg.P
	if p.ExtractReasoning {
		analysis = peg.Rule("analysis", peg.Seq(startAnalysis, peg.Reasoning(content), end))
	} else {
		analysis = peg.Rule("analysis", peg.Content(peg.Seq(startAnalysis, content, end)))
	}
	preamble := peg.Rule("preamble", peg.Seq(peg.Lit("<|channel|>commentary<|message|>"), peg.Content(content), end))
	final := peg.Rule("final", peg.Seq(stray, peg.Lit("<|channel|>final<|message|>"), peg.Content(content)))
	// Calls nobody asked for (built-in tools) are read and dropped.
	unsolicited := peg.Rule("unsolicited", peg.Atomic(peg.Seq(peg.Opt(channel), peg.Lit(" to="), content, end)))
	anyMsg := peg.Rule("any", peg.Choice(preamble, analysis))

	// llama.cpp reads zero_or_more(start + message) + start + last. The generation prompt is
	// the first start, so this reads it as prompt + zero_or_more(message + start) + last: the
	// same text, and without a generation prompt (the grammar of the output) it starts where
	// the model does.
	lead := peg.Prefix(p.GenerationPrompt, "")
	messages := func(msg *peg.P) *peg.P { return peg.Seq(lead, peg.Star(peg.Seq(msg, start))) }

	out := Output{}
	switch {
	case r.response:
		constraint := peg.Opt(peg.Seq(peg.Space(), peg.Opt(peg.Lit("<|constrain|>")), constrainType))
		rf := peg.Rule("response-format", peg.Seq(peg.Lit("<|channel|>final"), constraint, peg.Lit("<|message|>"),
			peg.Content(peg.Schema(peg.JSON(), "response-format-schema", p.ResponseSchema))))
		out.Parser = peg.Seq(messages(analysis), rf)
	case r.tools:
		var alts []*peg.P
		for _, t := range p.Tools {
			name := peg.Seq(peg.Lit(" to=functions."), peg.ToolName(peg.Lit(t.Name)))
			constraint := peg.Opt(peg.Seq(peg.Space(), peg.Opt(peg.Lit("<|constrain|>")), constrainType))
			inRole := peg.Tool(peg.Seq(peg.ToolOpen(peg.Seq(name, channel, constraint, peg.Lit("<|message|>"))), argsSchema(t)))
			inChannel := peg.Tool(peg.Seq(peg.ToolOpen(peg.Seq(channel, name, constraint, peg.Lit("<|message|>"))), argsSchema(t)))
			alts = append(alts, peg.Rule("tool-"+t.Name, peg.Choice(inRole, inChannel)))
		}
		call := peg.TriggerRule("tool-call", peg.Choice(alts...))
		if r.required {
			out.Parser = peg.Seq(messages(anyMsg), call)
		} else {
			out.Parser = peg.Seq(messages(anyMsg), peg.Choice(call, final))
		}
	default:
		out.Parser = peg.Seq(messages(anyMsg), peg.Choice(final, unsolicited))
	}
	out.Grammar = r.response || r.tools
	out.Lazy = out.Grammar && !r.response && !r.required
	if out.Lazy {
		// llama.cpp triggers on patterns: the recipient " to=functions" after the role (at the
		// start of the output or after <|start|>assistant) or in a commentary/analysis channel
		// header. These are the literal words those patterns start a call with.
		out.Triggers = []string{" to=functions.", "<|channel|>commentary to=functions.", "<|channel|>analysis to=functions."}
	}
	return out
}

// functionaryV32 is Functionary v3.2: the generation prompt ends in ">>>", after which the
// model names a recipient: "all\n" then content, or a function name, "\n" and JSON arguments
// (common_chat_params_init_functionary_v3_2).
type functionaryV32 struct{}

func (functionaryV32) ReasoningTags() (string, string) { return "", "" }

func (functionaryV32) Build(p Params) Output {
	r := readRequest(p)
	prefix := peg.Prefix(p.GenerationPrompt, "")
	untilTool := peg.Seq(peg.Lit("all\n"), peg.Content(peg.Until(">>>")))
	untilEnd := peg.Seq(peg.Lit("all\n"), peg.Content(peg.Rest()))
	out := Output{}
	if !r.tools {
		out.Parser = peg.Seq(prefix, untilEnd, peg.End())
		return out
	}
	var alts []*peg.P
	var names []string
	for _, t := range p.Tools {
		alts = append(alts, peg.Rule("tool-"+t.Name, peg.Tool(peg.Seq(
			peg.ToolOpen(peg.Seq(peg.ToolName(peg.Lit(t.Name)), peg.Lit("\n"))), argsSchema(t)))))
		names = append(names, t.Name)
	}
	choice := peg.Choice(alts...)
	toolsOnly := peg.TriggerRule("tools", peg.Plus(choice))
	var body *peg.P
	switch {
	case r.required && p.Parallel:
		body = peg.Choice(peg.Seq(untilTool, toolsOnly), toolsOnly)
	case r.required:
		body = peg.Choice(peg.Seq(untilTool, choice), toolsOnly)
	case p.Parallel:
		body = peg.Choice(peg.Seq(untilTool, toolsOnly), untilEnd, toolsOnly)
	default:
		body = peg.Choice(peg.Seq(untilTool, choice), untilEnd, choice)
	}
	out.Parser = peg.Seq(prefix, body, peg.End())
	out.Grammar = true
	out.Lazy = !r.required
	if out.Lazy {
		// llama.cpp's pattern is ">>>(?!all)": a recipient other than all. The generation
		// prompt already holds ">>>", so a call starts with the function's name.
		out.Triggers = names
	}
	return out
}

// kimiK2 is Kimi K2: <think> reasoning, content, then a section of
// <|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{json}<|tool_call_end|>
// calls whose id is "functions.NAME:IDX" (common_chat_params_init_kimi_k2). The model may drop
// the section markers, the call end, or the </think> before a call.
type kimiK2 struct{}

const (
	kimiSectionBegin = "<|tool_calls_section_begin|>"
	kimiSectionEnd   = "<|tool_calls_section_end|>"
	kimiCallBegin    = "<|tool_call_begin|>"
	kimiArgsBegin    = "<|tool_call_argument_begin|>"
	kimiCallEnd      = "<|tool_call_end|>"
)

func (kimiK2) ReasoningTags() (string, string) { return "<think>", "</think>" }

func (kimiK2) Build(p Params) Output {
	r := readRequest(p)
	prefix := peg.Prefix(p.GenerationPrompt, "")
	reasoning := peg.Eps()
	if p.ExtractReasoning {
		reasoning = peg.Opt(peg.Seq(peg.Lit("<think>"),
			peg.Reasoning(peg.Until("</think>", kimiSectionBegin, kimiCallBegin)), peg.Opt(peg.Lit("</think>"))))
	}
	out := Output{}
	if !r.tools {
		out.Parser = peg.Seq(prefix, reasoning, peg.Content(peg.Rest()), peg.End())
		return out
	}
	var alts []*peg.P
	for _, t := range p.Tools {
		id := peg.ToolID(peg.Seq(peg.Lit("functions."), peg.ToolName(peg.Lit(t.Name)), peg.Lit(":"), peg.Chars("0-9", 1, -1)))
		alts = append(alts, peg.Rule("tool-"+t.Name, peg.Tool(peg.Seq(
			peg.ToolOpen(peg.Seq(id, peg.Lit(kimiArgsBegin))), argsSchema(t), peg.ToolClose(peg.Opt(peg.Lit(kimiCallEnd)))))))
	}
	calls := peg.Rule("tool-calls", peg.Seq(peg.Opt(peg.Lit(kimiSectionBegin)), peg.TriggerRule("tool-call", peg.Seq(
		peg.Repeat(peg.Seq(peg.Lit(kimiCallBegin), peg.Choice(alts...)), r.min, r.max), peg.Opt(peg.Lit(kimiSectionEnd))))))
	out.Parser = peg.Seq(prefix, reasoning, peg.Content(peg.Until(kimiSectionBegin, kimiCallBegin)), calls, peg.End())
	out.Grammar = true
	out.Lazy = !r.required
	if out.Lazy {
		out.Triggers = []string{kimiCallBegin}
	}
	return out
}

// lfm2 is LFM2 and LFM2.5: optional <think> reasoning, content, then
// <|tool_call_start|>[name(arg=value, …), …]<|tool_call_end|> with Python-style arguments
// (common_chat_params_init_lfm2).
type lfm2 struct {
	think bool // the template knows <think>, so reasoning is read
}

const (
	lfmCallStart = "<|tool_call_start|>"
	lfmCallEnd   = "<|tool_call_end|>"
)

func (lfm2) ReasoningTags() (string, string) { return "<think>", "</think>" }

func (f lfm2) Build(p Params) Output {
	r := readRequest(p)
	prefix := peg.Prefix(p.GenerationPrompt, "")
	reasoning := peg.Eps()
	if p.ExtractReasoning && f.think {
		reasoning = peg.Opt(peg.Seq(peg.Lit("<think>"), peg.Reasoning(peg.Until("</think>")), peg.Lit("</think>")))
	}
	out := Output{Grammar: r.response || r.tools}
	switch {
	case !r.tools && r.response:
		out.Parser = peg.Seq(prefix, reasoning, peg.Content(peg.Schema(peg.JSON(), "response-format-schema", p.ResponseSchema)), peg.End())
	case !r.tools:
		out.Parser = peg.Seq(prefix, reasoning, peg.Content(peg.Rest()), peg.End())
	default:
		calls := peg.Rule("tool-calls", peg.TriggerRule("tool-call",
			peg.Seq(peg.Lit(lfmCallStart), pythonCalls(p.Tools, p.Parallel), peg.Lit(lfmCallEnd))))
		out.Parser = peg.Seq(prefix, reasoning, peg.Content(peg.Until(lfmCallStart)), calls, peg.End())
	}
	out.Lazy = out.Grammar && !r.response && !r.required
	if out.Lazy {
		out.Triggers = []string{lfmCallStart}
	}
	return out
}

// pythonCalls reads "[name(arg=value, …), …]" (llama.cpp's python_style_tool_calls with JSON
// literals allowed): a string-typed argument is a quoted string, any other a Python or JSON
// value; the arguments come in any order.
func pythonCalls(tools []Tool, parallel bool) *peg.P {
	value := pythonValue(pythonValueDepth)
	var alts []*peg.P
	for _, t := range tools {
		props, _ := properties(parameters(t))
		args := peg.Eps()
		if len(props) > 0 {
			var argAlts []*peg.P
			for _, pr := range props {
				v := value
				if isStringType(pr.schema) {
					v = pythonString()
				}
				argAlts = append(argAlts, peg.ToolArg(peg.Seq(peg.ToolArgOpen(peg.Eps()), peg.ToolArgName(peg.Lit(pr.name)),
					peg.Lit("="), peg.ToolArgJSON(v), peg.ToolArgClose(peg.Eps()))))
			}
			arg := peg.Choice(argAlts...)
			args = peg.Seq(arg, peg.Star(peg.Seq(peg.Lit(","), peg.Space(), arg)))
		}
		alts = append(alts, peg.Rule("tool-"+t.Name, peg.Tool(peg.Seq(
			peg.ToolOpen(peg.Seq(peg.ToolName(peg.Lit(t.Name)), peg.Lit("("))),
			peg.Space(), peg.ToolArgs(args), peg.Space(), peg.ToolClose(peg.Lit(")"))))))
	}
	choice := peg.Choice(alts...)
	if parallel {
		return peg.Seq(peg.Lit("["), peg.Space(), choice, peg.Star(peg.Seq(peg.Lit(","), peg.Space(), choice)), peg.Space(), peg.Lit("]"))
	}
	return peg.Seq(peg.Lit("["), peg.Space(), choice, peg.Space(), peg.Lit("]"))
}

// pythonValueDepth bounds how deeply pythonValue nests dicts and lists: llama.cpp's value rule
// is recursive, which these immutable parsers cannot express.
const pythonValueDepth = 8

// pythonString is a single- or double-quoted string.
func pythonString() *peg.P {
	return peg.Choice(
		peg.Seq(peg.Lit(`"`), peg.StringContent('"'), peg.Lit(`"`)),
		peg.Seq(peg.Lit("'"), peg.StringContent('\''), peg.Lit("'")))
}

// pythonValue is a Python literal or JSON value: a dict, list, string, number, True, False,
// None, true, false or null (llama.cpp's python_or_json_value), nested up to depth levels.
func pythonValue(depth int) *peg.P {
	number := peg.Seq(peg.Opt(peg.Lit("-")), peg.Chars("0-9", 1, -1), peg.Opt(peg.Seq(peg.Lit("."), peg.Chars("0-9", 1, -1))),
		peg.Opt(peg.Seq(peg.Choice(peg.Lit("e"), peg.Lit("E")), peg.Opt(peg.Choice(peg.Lit("+"), peg.Lit("-"))), peg.Chars("0-9", 1, -1))))
	words := peg.Choice(peg.Lit("True"), peg.Lit("False"), peg.Lit("None"), peg.Lit("true"), peg.Lit("false"), peg.Lit("null"))
	alts := []*peg.P{pythonString(), number, words}
	if depth > 0 {
		inner := pythonValue(depth - 1)
		ws := peg.Space()
		member := peg.Seq(pythonString(), ws, peg.Lit(":"), ws, inner)
		members := peg.Seq(member, peg.Star(peg.Seq(ws, peg.Lit(","), ws, member)))
		dict := peg.Seq(peg.Lit("{"), ws, peg.Choice(peg.Lit("}"), peg.Seq(members, ws, peg.Lit("}"))), ws)
		elements := peg.Seq(inner, peg.Star(peg.Seq(peg.Lit(","), ws, inner)))
		list := peg.Seq(peg.Lit("["), ws, peg.Choice(peg.Lit("]"), peg.Seq(elements, ws, peg.Lit("]"))), ws)
		alts = append([]*peg.P{dict, list}, alts...)
	}
	return peg.Rule("python-or-json-value-"+strconv.Itoa(depth), peg.Choice(alts...))
}

// isStringType reports whether a property's schema says "type": "string".
func isStringType(schema json.RawMessage) bool {
	var s struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(schema, &s) == nil && s.Type == "string"
}

// gigaChatV3 is GigaChat 3: content, then a call written as a new message,
// "<|message_sep|>\n\nfunction call<|role_sep|>\n" and {"name": …, "arguments": {…}}; one call
// at most (common_chat_params_init_gigachat_v3).
type gigaChatV3 struct{}

const gigaCallStart = "<|message_sep|>\n\nfunction call<|role_sep|>\n"

func (gigaChatV3) ReasoningTags() (string, string) { return "", "" }

func (gigaChatV3) Build(p Params) Output {
	r := readRequest(p)
	prefix := peg.Prefix(p.GenerationPrompt, "")
	out := Output{}
	if !r.tools {
		out.Parser = peg.Seq(prefix, peg.Content(peg.Rest()))
		return out
	}
	var alts []*peg.P
	for _, t := range p.Tools {
		name := keyValue("name", peg.Seq(peg.Lit(`"`), peg.ToolName(peg.Lit(t.Name)), peg.Lit(`"`)))
		args := keyValue("arguments", argsSchema(t))
		alts = append(alts, peg.Rule("tool-"+t.Name, peg.Seq(peg.ToolOpen(peg.Seq(peg.Lit("{"), peg.Space(), name)),
			peg.Space(), peg.Lit(","), peg.Space(), args, peg.Space(), peg.Lit("}"))))
	}
	call := peg.Rule("tool-call", peg.Seq(peg.Lit(gigaCallStart), peg.Choice(alts...)))
	// Parallel calls are not supported: one call at most.
	calls := peg.TriggerRule("tool-call-root", peg.Repeat(call, r.min, 1))
	out.Parser = peg.Seq(prefix, peg.Content(peg.Until("<|message_sep|>\n\n")), peg.Space(), calls)
	out.Grammar = true
	out.Lazy = !r.required
	if out.Lazy {
		out.Triggers = []string{gigaCallStart}
	}
	return out
}
