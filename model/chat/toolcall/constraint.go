package toolcall

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Tool is one function the model may call.
type Tool struct {
	Name        string // the function name a call must use
	Description string // the request's description, "" when none; constraints ignore it
	// Parameters is the JSON schema of the arguments; empty means any object.
	Parameters json.RawMessage
}

// Constraint forces the output into a format's tool-call shape, as llama.cpp's grammars for
// tool_choice "required" and for the generic format: a JSON schema for the call(s) (converted to
// GBNF by the caller) and the GBNF that goes around it.
type Constraint struct {
	// Schema is the JSON schema of the JSON part of the output.
	Schema []byte
	// Triggers, when any, make the grammar lazy (tool_choice "auto"): the output is free until
	// one of them appears, and the grammar, which starts with it, holds from there on.
	Triggers []Trigger
	before   string // GBNF before the JSON
	after    string // GBNF after it
	repeat   bool   // the wrapped call may be repeated (parallel calls)
}

// Trigger is a text that starts a lazy grammar: anywhere in the output, or with AtStart only
// at its beginning (after whitespace).
type Trigger struct {
	Word    string // literal text, e.g. "<tool_call>"; the grammar's output starts with it
	AtStart bool   // trigger only at the start of the output (after whitespace)
}

// NewConstraint returns the constraint for a request, and false when the format generates
// freely: the generic format is always constrained (to a tool call, or with required unset
// also to {"response": ...}, whose schema is response or a string); the others force a tool
// call when one is required, and otherwise constrain lazily, from the format's tool-call
// opener on, as llama.cpp's lazy grammars do. forcedOpen lets a required call first close an
// open <think> block.
func NewConstraint(f Format, tools []Tool, required, parallel, forcedOpen bool, response json.RawMessage) (Constraint, bool) {
	if len(tools) == 0 {
		return Constraint{}, false
	}
	switch f {
	case Generic:
		return Constraint{Schema: genericSchema(tools, required, parallel, response)}, true
	case ContentOnly:
		return Constraint{}, false
	}
	c, ok := callConstraint(f, tools, required, parallel, forcedOpen)
	if !ok || required {
		return c, ok
	}
	switch f {
	case Hermes2Pro:
		c.Triggers = []Trigger{{Word: "<tool_call>"}}
	case Llama3:
		c.Triggers = []Trigger{{Word: `{"`, AtStart: true}, {Word: `{ "`, AtStart: true}}
	case MistralNemo:
		c.Triggers = []Trigger{{Word: "[TOOL_CALLS]"}}
	default:
		return Constraint{}, false
	}
	return c, true
}

// callConstraint is the constraint that makes the output a tool call in format f (forcedOpen:
// after an optional "</think>" when the call is required).
func callConstraint(f Format, tools []Tool, required, parallel, forcedOpen bool) (Constraint, bool) {
	switch f {
	case Hermes2Pro:
		c := Constraint{
			Schema: oneOrAnyOf(callSchemas(tools, "arguments", "")),
			before: `"<tool_call>" space`,
			after:  `space "</tool_call>" space`,
			repeat: parallel,
		}
		if forcedOpen && required {
			c.before = `( "</think>" space )? ` + c.before
		}
		return c, true
	case Llama3, Llama3Builtin:
		return Constraint{Schema: oneOrAnyOf(callSchemas(tools, "parameters", ""))}, true
	case MistralNemo:
		arr := `{"type":"array","items":` + string(oneOrAnyOf(callSchemas(tools, "arguments", `{"type":"string","pattern":"^[a-zA-Z0-9]{9}$"}`))) + `,"minItems":1`
		if !parallel {
			arr += `,"maxItems":1`
		}
		return Constraint{Schema: []byte(arr + "}"), before: `"[TOOL_CALLS]"`}, true
	}
	return Constraint{}, false
}

// Grammar wraps the GBNF converted from c.Schema (whose rule "root" matches the JSON) into the
// grammar of the whole output.
func (c Constraint) Grammar(schemaGBNF string) string {
	if c.before == "" && c.after == "" && !c.repeat {
		return schemaGBNF
	}
	lines := strings.Split(schemaGBNF, "\n")
	for i, l := range lines {
		if body, ok := strings.CutPrefix(l, "root ::= "); ok {
			call := strings.TrimSpace(c.before + " ( " + body + " ) " + c.after)
			if c.repeat {
				call = "( " + call + " )+"
			}
			lines[i] = "root ::= " + call
		}
	}
	return strings.Join(lines, "\n")
}

// genericSchema is llama.cpp's generic format schema: {"tool_call": CALL} (or {"tool_calls":
// [CALL, ...]} with parallel calls, where each call also has an "id"), or unless required
// {"response": ...}.
func genericSchema(tools []Tool, required, parallel bool, response json.RawMessage) []byte {
	var call string
	if parallel {
		call = `{"type":"object","properties":{"tool_calls":{"type":"array","items":` +
			string(oneOrAnyOf(callSchemas(tools, "arguments", `{"type":"string","minLength":4}`))) +
			`,"minItems":1}},"required":["tool_calls"]}`
	} else {
		call = `{"type":"object","properties":{"tool_call":` + string(oneOrAnyOf(callSchemas(tools, "arguments", ""))) +
			`},"required":["tool_call"]}`
	}
	if required {
		return []byte(call)
	}
	resp := `{"type":"string"}`
	if len(bytes.TrimSpace(response)) > 0 && string(bytes.TrimSpace(response)) != "null" {
		resp = string(response)
	}
	return []byte(`{"anyOf":[` + call + `,{"type":"object","properties":{"response":` + resp + `},"required":["response"]}]}`)
}

// callSchemas are the schemas of {"name": NAME, argsKey: PARAMETERS} for each tool, with an "id"
// of schema idSchema when that is set.
func callSchemas(tools []Tool, argsKey, idSchema string) []string {
	out := make([]string, 0, len(tools))
	for _, t := range tools {
		name, _ := json.Marshal(t.Name)
		key, _ := json.Marshal(argsKey)
		params := strings.TrimSpace(string(t.Parameters))
		if params == "" || params == "null" {
			params = `{"type":"object"}`
		}
		s := `{"type":"object","properties":{"name":{"type":"string","const":` + string(name) + `},` + string(key) + `:` + params
		req := `"name",` + string(key)
		if idSchema != "" {
			s += `,"id":` + idSchema
			req += `,"id"`
		}
		out = append(out, s+`},"required":[`+req+`]}`)
	}
	return out
}

// oneOrAnyOf is the only schema, or anyOf the schemas.
func oneOrAnyOf(schemas []string) []byte {
	if len(schemas) == 1 {
		return []byte(schemas[0])
	}
	return []byte(`{"anyOf":[` + strings.Join(schemas, ",") + `]}`)
}
