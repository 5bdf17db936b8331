package autoparse

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

// ToolChoice is how far the model must call tools.
type ToolChoice int

// Tool choices, as OpenAI's tool_choice.
const (
	ChoiceAuto ToolChoice = iota
	ChoiceNone
	ChoiceRequired
)

// Tool is a function the model may call.
type Tool struct {
	Name       string
	Parameters json.RawMessage // JSON schema; nil or {} is an object without properties
}

// Params are the options of one request that shape its parser (llama.cpp's generation_params).
type Params struct {
	Tools            []Tool
	Choice           ToolChoice
	Parallel         bool
	ExtractReasoning bool            // reasoning_format is not "none"
	ResponseSchema   json.RawMessage // response_format's schema, or nil
	// GenerationPrompt is what add_generation_prompt appended to the prompt; it is parsed in
	// front of the output, so the output may continue a block it opened.
	GenerationPrompt string
}

// Builder builds a request's parser: an Analysis (the autoparser's outcome) or one of
// llama.cpp's dedicated formats (Specialized).
type Builder interface {
	// Build makes the parser, and says which grammar, for one request.
	Build(p Params) Output
	// ReasoningTags are the markers that open and close reasoning ("" when the format has
	// none): what deepseek-legacy writes back around reasoning kept in the content.
	ReasoningTags() (start, end string)
}

// ReasoningTags are the analysed reasoning markers without surrounding whitespace.
func (a *Analysis) ReasoningTags() (string, string) {
	return strings.TrimSpace(a.Reasoning.Start), strings.TrimSpace(a.Reasoning.End)
}

// Output is how a request's output is read and constrained (llama.cpp's common_chat_params).
type Output struct {
	Parser *peg.P
	// Grammar is set when the output is constrained: Lazy grammars start at a trigger word.
	Grammar  bool
	Lazy     bool
	Triggers []string
}

// Build makes the parser (and says which grammar) for one request, as llama.cpp's
// peg_generator::generate_parser does with an analysis.
func (a *Analysis) Build(p Params) Output {
	extract := p.ExtractReasoning && a.Reasoning.Mode != ReasoningNone
	reasoning := a.reasoningParser(extract)
	hasTools := len(p.Tools) > 0 && a.Tools.Format.Mode != FormatNone
	hasResponse := isObject(p.ResponseSchema)
	pure := a.Reasoning.Mode == ReasoningNone
	var body *peg.P
	switch {
	case hasResponse:
		rf := peg.Rule("response-format", peg.Content(peg.Schema(peg.JSON(), "response-format-schema", p.ResponseSchema)))
		body = peg.Seq(reasoning, peg.Space(), peg.Choice(
			peg.Seq(peg.Lit("```json"), peg.Space(), rf, peg.Space(), peg.Lit("```")),
			peg.Seq(peg.Space(), rf, peg.Space()),
		), peg.End())
		pure = false
	case hasTools && p.Choice != ChoiceNone:
		body = a.toolsParser(p, reasoning, extract)
		pure = false
	default:
		body = a.contentParser(reasoning, extract)
	}
	prefix := peg.Prefix(p.GenerationPrompt, strings.TrimSpace(a.Reasoning.Start))
	out := Output{}
	if pure {
		out.Parser = peg.Seq(prefix, body)
	} else {
		out.Parser = peg.Seq(prefix, peg.Space(), body)
	}
	marker := a.Tools.Format.SectionStart
	if marker == "" {
		marker = a.Tools.Format.PerCallStart
	}
	out.Grammar = hasResponse || hasTools && (p.Choice == ChoiceAuto && marker != "" || p.Choice == ChoiceRequired)
	if out.Grammar {
		out.Lazy = !hasResponse && p.Choice == ChoiceAuto
		if out.Lazy {
			out.Triggers = []string{marker}
			if a.Tools.Format.OpenAIWrapperTrigger {
				out.Triggers = append(out.Triggers, `{"type": "function",`)
			}
		}
	}
	return out
}

func isObject(s json.RawMessage) bool {
	s = bytes.TrimSpace(s)
	if len(s) < 2 || s[0] != '{' {
		return false
	}
	var m map[string]json.RawMessage
	return json.Unmarshal(s, &m) == nil && len(m) > 0
}

// reasoningParser reads an optional reasoning block.
func (a *Analysis) reasoningParser(extract bool) *peg.P {
	r := a.Reasoning
	if !extract || r.End == "" || r.Mode != ReasoningTagBased && r.Mode != ReasoningToolsOnly {
		return peg.Eps()
	}
	block := peg.Seq(peg.Reasoning(peg.Until(strings.TrimSpace(r.End))), peg.OptSpace(r.End))
	if r.Start != "" {
		block = peg.Seq(peg.OptSpace(r.Start), block)
	}
	return peg.Opt(block)
}

// contentParser reads an answer without tool calls.
func (a *Analysis) contentParser(reasoning *peg.P, extract bool) *peg.P {
	c := a.Content
	if !a.ContentAlwaysWrapped() {
		return peg.Seq(reasoning, peg.Content(peg.Rest()), peg.End())
	}
	wrapped := peg.Seq(peg.Lit(c.Start), peg.Content(peg.Until(c.End)), peg.Lit(c.End), peg.End())
	if extract {
		return peg.Seq(reasoning, wrapped)
	}
	return peg.Seq(peg.Content(peg.Until(c.Start)), wrapped)
}

// optionalWrapped reads content in its wrapper when the template always wraps it.
func (a *Analysis) optionalWrapped() *peg.P {
	if !a.ContentAlwaysWrapped() {
		return peg.Eps()
	}
	c := a.Content
	return peg.Opt(peg.Seq(peg.Lit(c.Start), peg.Content(peg.Until(c.End)), peg.Lit(c.End)))
}

// parameters is a tool's schema as llama.cpp's common_chat_tool_parameters gives it.
func parameters(t Tool) json.RawMessage {
	s := bytes.TrimSpace(t.Parameters)
	if len(s) == 0 || string(s) == "null" || !isObject(s) {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return s
}

func (a *Analysis) toolsParser(p Params, reasoning *peg.P, extract bool) *peg.P {
	switch a.Tools.Format.Mode {
	case FormatJSONNative:
		return a.jsonNativeParser(p, reasoning)
	case FormatTagWithJSON:
		return a.tagParser(p, reasoning, false)
	}
	return a.tagParser(p, reasoning, true)
}

// jsonNativeParser reads calls written as JSON objects between the section (or per-call)
// markers.
func (a *Analysis) jsonNativeParser(p Params, reasoning *peg.P) *peg.P {
	f := a.Tools.Format
	nameKey, argsKey := f.NameField, f.ArgsField
	if f.FunctionField != "" && f.FunctionField != "function" && !strings.Contains(nameKey, ".") {
		nameKey = f.FunctionField + "." + nameKey
		argsKey = f.FunctionField + "." + argsKey
	}
	std := jsonTools{
		tools: p.Tools, parallel: p.Parallel, force: p.Choice == ChoiceRequired,
		nameKey: nameKey, argsKey: argsKey, arrayWrapped: f.ToolsArrayWrapped, functionIsKey: f.FunNameIsKey,
		idKey: f.IDField, genIDKey: f.GenIDField, order: f.ParameterOrder, openAIWrapper: f.OpenAIWrapperTrigger,
	}
	var tools *peg.P
	if f.SectionStart == "" && f.PerCallStart != "" {
		// Each per-call block holds a call; the run of blocks is what may be left out.
		one := std
		one.force = true
		tools = peg.TriggerRule("tool-calls", peg.Plus(peg.Seq(one.section(f.PerCallStart, f.PerCallEnd), peg.Space())))
		if !std.force {
			tools = peg.Opt(tools)
		}
	} else {
		tools = std.section(f.SectionStart, f.SectionEnd)
	}
	if a.ContentAlwaysWrapped() {
		return peg.Seq(reasoning, a.optionalWrapped(), tools, peg.End())
	}
	start := f.SectionStart
	if start == "" {
		start = f.PerCallStart
	}
	if start == "" {
		start = "{"
	}
	return peg.Seq(reasoning, peg.Opt(peg.Content(peg.Until(start))), tools, peg.End())
}

// jsonTools is llama.cpp's standard_json_tools: calls as JSON objects, one or (parallel) a
// comma-separated list, optionally in an array, between start and end markers.
type jsonTools struct {
	tools                                      []Tool
	parallel, force                            bool
	nameKey, argsKey, idKey, genIDKey          string
	order                                      []string
	arrayWrapped, functionIsKey, openAIWrapper bool
}

func (j jsonTools) section(start, end string) *peg.P {
	if len(j.tools) == 0 {
		return peg.Eps()
	}
	var alts []*peg.P
	for _, t := range j.tools {
		alts = append(alts, peg.Rule("tool-"+t.Name, j.call(t)))
	}
	choice := peg.Choice(alts...)
	calls := choice
	if j.parallel {
		calls = peg.Seq(choice, peg.Star(peg.Seq(peg.Space(), peg.Lit(","), peg.Space(), choice)))
	}
	if j.arrayWrapped {
		calls = peg.Seq(peg.Lit("["), peg.Space(), calls, peg.Space(), peg.Lit("]"))
	}
	sec := peg.TriggerRule("tool-call", peg.Seq(peg.Lit(start), peg.Space(), calls, peg.Space(), peg.Lit(end)))
	if j.force {
		return sec
	}
	return peg.Opt(sec)
}

// field matches `"key" : value`.
func keyValue(key string, value *peg.P) *peg.P {
	return peg.Seq(peg.Lit(`"`+key+`"`), peg.Space(), peg.Lit(":"), peg.Space(), value)
}

func (j jsonTools) idParser(key string, numbers bool) *peg.P {
	v := peg.Seq(peg.Lit(`"`), peg.ToolID(peg.StringContent('"')), peg.Lit(`"`))
	if numbers {
		v = peg.Choice(v, peg.ToolID(peg.Chars("0-9", 1, -1)))
	}
	return peg.Atomic(keyValue(key, v))
}

func (j jsonTools) call(t Tool) *peg.P {
	args := peg.ToolArgs(peg.Schema(peg.JSON(), "tool-"+t.Name+"-schema", parameters(t)))
	name := peg.Atomic(peg.Seq(peg.Lit(`"`), peg.ToolName(peg.Lit(t.Name)), peg.Lit(`"`)))
	sep := peg.Seq(peg.Space(), peg.Lit(","), peg.Space())
	if j.functionIsKey {
		inner := args
		if j.argsKey != "" || j.idKey != "" {
			var parts []*peg.P
			parts = append(parts, peg.Lit("{"), peg.Space())
			if j.idKey != "" {
				parts = append(parts, peg.Opt(peg.Seq(j.idParser(j.idKey, false), peg.Space(), peg.Opt(peg.Seq(peg.Lit(","), peg.Space())))))
			}
			if j.genIDKey != "" {
				parts = append(parts, peg.Opt(peg.Seq(j.idParser(j.genIDKey, true), peg.Space(), peg.Opt(peg.Seq(peg.Lit(","), peg.Space())))))
			}
			if j.argsKey != "" {
				parts = append(parts, peg.Lit(`"args"`), peg.Space(), peg.Lit(":"), peg.Space())
			}
			parts = append(parts, args, peg.Space(), peg.Lit("}"))
			inner = peg.Seq(parts...)
		}
		return peg.Tool(peg.Seq(peg.ToolOpen(peg.Lit("{")), peg.Space(), name, peg.Space(), peg.Lit(":"), peg.Space(), inner, peg.Space(), peg.ToolClose(peg.Lit("}"))))
	}
	if strings.Contains(j.nameKey, ".") || strings.Contains(j.argsKey, ".") {
		outer, nk, _ := strings.Cut(j.nameKey, ".")
		_, ak, _ := strings.Cut(j.argsKey, ".")
		if nk == "" {
			nk = "name"
		}
		if ak == "" {
			ak = "arguments"
		}
		parts := []*peg.P{peg.ToolOpen(peg.Lit("{")), peg.Space()}
		if j.idKey != "" && !strings.Contains(j.idKey, ".") {
			parts = append(parts, peg.Opt(peg.Seq(j.idParser(j.idKey, false), sep)))
		}
		if j.genIDKey != "" && !strings.Contains(j.genIDKey, ".") {
			parts = append(parts, peg.Opt(peg.Seq(j.idParser(j.genIDKey, true), sep)))
		}
		parts = append(parts, keyValue(outer, peg.Seq(peg.Lit("{"), peg.Space(), keyValue(nk, name), sep, keyValue(ak, args), peg.Space(), peg.Lit("}"))),
			peg.Space(), peg.ToolClose(peg.Lit("}")))
		return peg.Tool(peg.Seq(parts...))
	}
	type keyed struct {
		key      string
		p        *peg.P
		optional bool
	}
	fields := []keyed{{j.nameKey, keyValue(j.nameKey, name), false}, {j.argsKey, keyValue(j.argsKey, args), false}}
	if j.idKey != "" {
		fields = append(fields, keyed{j.idKey, j.idParser(j.idKey, true), true})
	}
	if j.genIDKey != "" {
		fields = append(fields, keyed{j.genIDKey, j.idParser(j.genIDKey, true), true})
	}
	rank := func(k string) int {
		for i, o := range j.order {
			if o == k {
				return i
			}
		}
		return len(j.order)
	}
	sort.SliceStable(fields, func(x, y int) bool { return rank(fields[x].key) < rank(fields[y].key) })
	parts := []*peg.P{peg.ToolOpen(peg.Lit("{")), peg.Space()}
	if j.openAIWrapper {
		parts = append(parts, peg.Opt(peg.Seq(peg.Lit(`"type"`), peg.Space(), peg.Lit(":"), peg.Space(), peg.Lit(`"function"`), sep)))
	}
	// An optional field (an id) carries its separator, so the object reads the same without it.
	required := false // a required field has been written
	for _, f := range fields {
		switch {
		case f.optional && !required:
			parts = append(parts, peg.Opt(peg.Seq(f.p, sep)))
		case f.optional:
			parts = append(parts, peg.Opt(peg.Seq(sep, f.p)))
		case required:
			parts = append(parts, sep, f.p)
		default:
			parts = append(parts, f.p)
			required = true
		}
	}
	parts = append(parts, peg.Space(), peg.ToolClose(peg.Lit("}")))
	return peg.Tool(peg.Seq(parts...))
}
