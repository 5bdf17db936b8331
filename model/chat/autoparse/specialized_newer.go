package autoparse

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

// specializedNewer returns the dedicated format of llama.cpp's newer chat handlers
// (common/parsers/*.cpp) that matches the template source, or nil. The checks are
// common_chat_try_specialized_template's, in its order.
func specializedNewer(src string) Builder {
	has := func(s string) bool { return strings.Contains(src, s) }
	switch {
	case has("<atem:function_calls>") && has("<|eom|>"):
		return museGlimmer{}
	case has("<|open|>") && has("<|close|>") && has("<|end_of_msg|>"):
		return kimiK3{}
	case has("<|START_TEXT|>") && has("<|START_ACTION|>"):
		return cohere2MoE{}
	case has("]<]minimax[>[") && has("<tool_call>") && has("<invoke name="):
		return miniMaxM3{}
	case has("dsml_token") && has("DSML") && (has("function_calls") || has("tool_calls")):
		// V3.2 names the call block function_calls, V4 tool_calls.
		return deepSeekDSML{v4: !has("function_calls")}
	case has("'<|tool_call>call:'"):
		return gemma4{}
	case has("Tool usage guidelines:") && has(`<function name="`) && has(`<param name="`):
		return miniCPM5{}
	case has("<tool_call>") && has("<function=") && has("<parameter="):
		// Qwen3-Coder's XML calls, also Nemotron Nano 3, Qwen3.5 and StepFun-3.5-Flash; the
		// thinking ones are told apart by <think>.
		return qwen3Coder{reasoning: has("<think>")}
	}
	return nil
}

// callRequest is what the dedicated formats derive from Params, as llama.cpp's handlers do.
type callRequest struct {
	Params
	hasTools, hasResponse, callTools, required bool
}

func newRequest(p Params) callRequest {
	r := callRequest{Params: p, hasTools: len(p.Tools) > 0, hasResponse: isObject(p.ResponseSchema)}
	r.callTools = r.hasTools && p.Choice != ChoiceNone
	r.required = r.callTools && p.Choice == ChoiceRequired
	return r
}

// spaced is llama.cpp's `a << b`: the parts with any whitespace between them.
func spaced(parts ...*peg.P) *peg.P {
	var out []*peg.P
	for i, p := range parts {
		if i > 0 {
			out = append(out, peg.Space())
		}
		out = append(out, p)
	}
	return peg.Seq(out...)
}

// argElements reads a tool's arguments written as elements, any number in any order, each
// followed by whitespace: the opener open(name) makes (its ToolArgOpen), then the value, raw
// text (str) where the parameter's schema allows a string, else JSON by the schema followed by
// closeValue.
func argElements(t Tool, open func(name string) *peg.P, str, closeValue *peg.P) *peg.P {
	var args []*peg.P
	props, _ := properties(parameters(t))
	for _, pr := range props {
		value := str
		if !mayBeString(pr.schema) {
			value = peg.Seq(peg.ToolArgJSON(peg.Schema(peg.JSON(), "tool-"+t.Name+"-arg-"+pr.name+"-schema", pr.schema)), closeValue)
		}
		args = append(args, peg.ToolArg(peg.Seq(peg.ToolArgOpen(open(pr.name)), value)))
	}
	if len(args) == 0 {
		return peg.Eps()
	}
	return peg.Star(peg.Seq(peg.Choice(args...), peg.Space()))
}

// generationLiteral reads the part of the generation prompt a handler spells out (its fixed
// assistant opener). The server prepends the rendered generation prompt to the output; where
// that does not start with the opener (a template variant), its text before the reasoning
// opener is read instead, as the autoparser does.
func generationLiteral(gp, opener, reasoningStart string) *peg.P {
	if strings.HasPrefix(gp, opener) {
		return peg.Lit(opener)
	}
	return peg.Prefix(gp, reasoningStart)
}

// lazyGrammar fills in an Output's grammar: constrained when there is a response format or a
// call is possible, lazy (from the triggers) when calls are optional. A response format's
// parser has no trigger rule, so it never gets a lazy grammar.
func lazyGrammar(out *Output, r callRequest, triggers ...string) {
	out.Grammar = r.hasResponse || r.callTools
	out.Lazy = out.Grammar && !r.hasResponse && !r.required
	if out.Lazy {
		out.Triggers = triggers
	}
}

// jsonTypes are the JSON types a schema allows (llama.cpp's value_types): from type, enum and
// const values, and anyOf/oneOf alternatives; a schema that says nothing allows every type.
func jsonTypes(schema json.RawMessage) map[string]bool {
	var s struct {
		Type  json.RawMessage   `json:"type"`
		AnyOf []json.RawMessage `json:"anyOf"`
		OneOf []json.RawMessage `json:"oneOf"`
		Enum  []json.RawMessage `json:"enum"`
		Const json.RawMessage   `json:"const"`
	}
	all := map[string]bool{"string": true, "object": true, "array": true, "number": true, "integer": true, "boolean": true, "null": true}
	if json.Unmarshal(schema, &s) != nil {
		return all
	}
	out := map[string]bool{}
	var one string
	var many []string
	switch {
	case json.Unmarshal(s.Type, &one) == nil:
		out[one] = true
	case json.Unmarshal(s.Type, &many) == nil:
		for _, t := range many {
			out[t] = true
		}
	}
	values := s.Enum
	if len(s.Const) > 0 {
		values = append(values, s.Const)
	}
	for _, v := range values {
		out[valueType(v)] = true
	}
	for _, alt := range append(s.AnyOf, s.OneOf...) {
		for t := range jsonTypes(alt) {
			out[t] = true
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}

// valueType is the JSON type of a value.
func valueType(v json.RawMessage) string {
	t := strings.TrimSpace(string(v))
	switch {
	case t == "":
		return "null"
	case t[0] == '"':
		return "string"
	case t[0] == '{':
		return "object"
	case t[0] == '[':
		return "array"
	case t == "true" || t == "false":
		return "boolean"
	case t == "null":
		return "null"
	}
	return "number"
}

// onlyString reports whether a schema allows strings and nothing else (resolves_to_string).
func onlyString(schema json.RawMessage) bool {
	ts := jsonTypes(schema)
	return len(ts) == 1 && ts["string"]
}

// typedJSON reads a JSON value of one of the types (json_object, json_array, json_number,
// json_bool, json_null as alternatives), or fails.
func typedJSON(types map[string]bool) *peg.P {
	var alts []*peg.P
	if types["object"] {
		alts = append(alts, peg.Seq(peg.Peek(peg.Lit("{")), peg.JSON()))
	}
	if types["array"] {
		alts = append(alts, peg.Seq(peg.Peek(peg.Lit("[")), peg.JSON()))
	}
	if types["number"] || types["integer"] {
		alts = append(alts, peg.Seq(peg.Peek(peg.Chars("-0-9", 1, 1)), peg.JSON()))
	}
	if types["boolean"] {
		alts = append(alts, peg.Lit("true"), peg.Lit("false"))
	}
	if types["null"] {
		alts = append(alts, peg.Lit("null"))
	}
	return peg.Choice(alts...)
}

// permute reads each of parts exactly once, in any order (llama.cpp's permute): a rule per
// set of parts still to read, so the grammar stays as large as the number of subsets. Past
// eight parts that is too many rules; any order of that many reads is accepted instead (a
// repeated argument is still refused by the mapper).
func permute(name string, parts []*peg.P) *peg.P {
	n := len(parts)
	if n == 0 {
		return peg.Eps()
	}
	if n > 8 {
		return peg.Repeat(peg.Choice(parts...), n, n)
	}
	memo := map[int]*peg.P{}
	var build func(mask int) *peg.P
	build = func(mask int) *peg.P {
		if p, ok := memo[mask]; ok {
			return p
		}
		var alts []*peg.P
		for i := 0; i < n; i++ {
			if mask&(1<<i) == 0 {
				continue
			}
			rest := mask &^ (1 << i)
			if rest == 0 {
				alts = append(alts, parts[i])
			} else {
				alts = append(alts, peg.Seq(parts[i], build(rest)))
			}
		}
		p := peg.Rule(fmt.Sprintf("%s-%d", name, mask), peg.Choice(alts...))
		memo[mask] = p
		return p
	}
	return build(1<<n - 1)
}

// requiredAndOptional splits a tool's properties into the required ones (in schema order)
// and the optional ones, each made into a parser by arg.
func requiredAndOptional(t Tool, arg func(property) *peg.P) (req, opt []*peg.P) {
	props, required := properties(parameters(t))
	for _, pr := range props {
		if required[pr.name] {
			req = append(req, arg(pr))
		} else {
			opt = append(opt, arg(pr))
		}
	}
	return req, opt
}

// requiredThenOptional reads the required arguments in order (whitespace between), then any
// number of optional ones in any order, each after whitespace.
func requiredThenOptional(req, opt []*peg.P) *peg.P {
	var parts []*peg.P
	for i, r := range req {
		if i > 0 {
			parts = append(parts, peg.Space())
		}
		parts = append(parts, r)
	}
	if len(opt) > 0 {
		parts = append(parts, peg.Star(peg.Seq(peg.Space(), peg.Choice(opt...))))
	}
	return peg.Seq(parts...)
}
