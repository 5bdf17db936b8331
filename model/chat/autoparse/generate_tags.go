package autoparse

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

// tagParser reads calls whose function name sits in markers, with JSON arguments or (tagged)
// one marked-up element per argument (llama.cpp's build_tool_parser_tag_json and _tag_tagged).
func (a *Analysis) tagParser(p Params, reasoning *peg.P, tagged bool) *peg.P {
	f, args := a.Tools.Format, a.Tools.Arguments
	var alts []*peg.P
	for _, t := range p.Tools {
		var body, peek *peg.P
		if tagged {
			body, peek = a.taggedArgs(t)
		} else {
			body = peg.ToolArgs(peg.Schema(peg.JSON(), "tool-"+t.Name+"-schema", parameters(t)))
			if args.Start != "" {
				body = peg.Seq(peg.Lit(args.Start), body)
				peek = peg.Peek(peg.Lit(args.Start))
			}
			if args.End != "" {
				body = peg.Seq(body, peg.Lit(args.End))
			}
		}
		idSection, haveID := a.callIDSection(tagged)
		alts = append(alts, peg.Rule("tool-"+t.Name, a.funcParser(t.Name, idSection, haveID, body, peek)))
	}
	choice := peg.Choice(alts...)
	var calls *peg.P
	switch {
	case f.PerCallStart != "" && tagged:
		wrapped := peg.Seq(peg.Lit(f.PerCallStart), peg.Space(), choice, peg.Space(), peg.Lit(f.PerCallEnd))
		if p.Parallel {
			calls = peg.TriggerRule("tool-call", peg.Seq(wrapped, peg.Star(peg.Seq(peg.Space(), wrapped)), peg.Space()))
		} else {
			calls = peg.TriggerRule("tool-call", peg.Seq(wrapped, peg.Space()))
		}
	case f.PerCallStart != "":
		wrapped := peg.Seq(peg.Lit(f.PerCallStart), choice, peg.Lit(f.PerCallEnd))
		if p.Parallel {
			calls = peg.TriggerRule("tool-call", peg.Seq(wrapped, peg.Star(peg.Seq(peg.Space(), wrapped))))
		} else {
			calls = peg.TriggerRule("tool-call", wrapped)
		}
	case tagged:
		inner := choice
		if p.Parallel {
			inner = peg.Seq(choice, peg.Star(peg.Seq(peg.Lit(", "), choice)))
		}
		calls = peg.TriggerRule("tool-call", peg.Seq(peg.Lit(f.SectionStart), peg.Space(), inner, peg.Space(), peg.Lit(f.SectionEnd)))
	default:
		inner := choice
		if p.Parallel {
			inner = peg.Seq(choice, peg.Star(peg.Seq(peg.Lit(", "), choice)))
		}
		calls = peg.TriggerRule("tool-call", peg.Seq(peg.Lit(f.SectionStart), inner, peg.Lit(f.SectionEnd)))
	}
	if f.PerCallStart != "" && f.SectionStart != "" {
		end := peg.End()
		if f.SectionEnd != "" {
			end = peg.Lit(f.SectionEnd)
			if tagged {
				end = peg.Seq(end, peg.Space())
			}
		}
		calls = peg.TriggerRule("tool-calls", peg.Seq(peg.Lit(f.SectionStart), peg.Space(), calls, peg.Space(), end))
	}
	if p.Choice != ChoiceRequired {
		calls = peg.Opt(calls)
	}
	trigger := f.SectionStart
	if trigger == "" {
		trigger = f.PerCallStart
	}
	content := peg.Eps()
	if trigger != "" {
		content = peg.Until(trigger)
	}
	return peg.Seq(reasoning, peg.Opt(peg.Content(content)), calls, peg.End())
}

// callIDSection reads a call id written between the function name and the arguments.
func (a *Analysis) callIDSection(tagged bool) (*peg.P, bool) {
	id, args := a.Tools.CallID, a.Tools.Arguments
	if id.Pos != CallIDBetweenFuncAndArgs || id.Prefix == "" || id.Suffix == "" && args.Start == "" {
		return peg.Eps(), false
	}
	if id.Suffix == "" {
		return peg.Opt(peg.Seq(peg.Lit(id.Prefix), peg.ToolID(peg.Until(args.Start)))), true
	}
	if tagged {
		return peg.Opt(peg.Seq(peg.Lit(id.Prefix), peg.ToolID(peg.Until(id.Suffix)), peg.Lit(id.Suffix))), true
	}
	return peg.Seq(peg.Opt(peg.Seq(peg.Lit(id.Prefix), peg.ToolID(peg.Until(id.Suffix)))), peg.Lit(id.Suffix)), true
}

// funcParser wraps a function's arguments in its name markers and closer (build_func_parser).
func (a *Analysis) funcParser(name string, idSection *peg.P, haveID bool, args, peek *peg.P) *peg.P {
	fn, f := a.Tools.Function, a.Tools.Format
	if id := a.Tools.CallID.Suffix; haveID && id != "" && strings.HasSuffix(fn.NameSuffix, id) {
		// The marker after the name is the one that ends the id ([CALL_ID]id[ARGS]): the id
		// section reads it, when the model writes an id and when it does not.
		fn.NameSuffix = strings.TrimSuffix(fn.NameSuffix, id)
	}
	open := peg.ToolOpen(peg.Seq(peg.Lit(fn.NamePrefix), peg.ToolName(peg.Lit(name)), peg.Lit(fn.NameSuffix)))
	if fn.ArgsSeparator != "" {
		open = peg.Seq(open, peg.Space(), peg.Lit(fn.ArgsSeparator))
	}
	var call *peg.P
	atomicDone := true
	switch {
	case fn.NameSuffix != "":
		call = peg.Seq(open, idSection, peg.Space(), args)
	case haveID:
		call = peg.Seq(peg.Atomic(peg.Seq(open, idSection)), peg.Space(), args)
	case peek != nil:
		call = peg.Seq(peg.Atomic(peg.Seq(open, idSection, peg.Space(), peek)), args)
	default:
		call = peg.Seq(open, idSection, peg.Space(), args)
		atomicDone = false
	}
	switch {
	case fn.Close != "":
		call = peg.Seq(call, peg.Space(), peg.ToolClose(peg.Lit(fn.Close)))
	case f.PerCallEnd != "":
		call = peg.Seq(call, peg.ToolClose(peg.Peek(peg.Lit(f.PerCallEnd))))
	default:
		call = peg.Seq(call, peg.ToolClose(peg.Space()))
	}
	if !atomicDone {
		call = peg.Atomic(call)
	}
	return peg.Tool(call)
}

// taggedArgs reads a function's arguments as tagged elements: the required ones in order,
// then the optional ones in any order (and a peek at the first name marker that keeps the call
// from appearing before its arguments start).
func (a *Analysis) taggedArgs(t Tool) (*peg.P, *peg.P) {
	args := a.Tools.Arguments
	untilSuffix := peg.Rule("until-suffix", peg.Until(args.ValueSuffix))
	props, required := properties(parameters(t))
	var req, opt []*peg.P
	for _, pr := range props {
		var value *peg.P
		if mayBeString(pr.schema) {
			value = peg.Seq(peg.ToolArgString(untilSuffix), peg.ToolArgClose(peg.Lit(args.ValueSuffix)))
		} else {
			value = peg.Seq(peg.ToolArgJSON(untilSuffix), peg.ToolArgClose(peg.Lit(args.ValueSuffix)))
		}
		arg := peg.ToolArg(peg.Seq(
			peg.ToolArgOpen(peg.Seq(peg.Lit(args.NamePrefix), peg.ToolArgName(peg.Lit(pr.name)), peg.Lit(args.NameSuffix))),
			peg.Lit(args.ValuePrefix), value))
		named := peg.Rule("tool-"+t.Name+"-arg-"+pr.name, arg)
		if required[pr.name] {
			req = append(req, named)
		} else {
			opt = append(opt, named)
		}
	}
	seq := requiredThenOptional(req, opt)
	if args.Start != "" {
		seq = peg.Seq(peg.Lit(args.Start), seq)
	}
	if args.End != "" {
		seq = peg.Seq(seq, peg.Lit(args.End))
	}
	var peek *peg.P
	if args.NamePrefix != "" && len(req) > 0 {
		peek = peg.Peek(peg.Lit(args.NamePrefix))
	}
	return seq, peek
}

type property struct {
	name   string
	schema json.RawMessage
}

// properties lists a schema's properties in the order written, and which are required.
func properties(schema json.RawMessage) ([]property, map[string]bool) {
	var top struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	_ = json.Unmarshal(schema, &top)
	required := map[string]bool{}
	for _, r := range top.Required {
		required[r] = true
	}
	dec := json.NewDecoder(bytes.NewReader(top.Properties))
	var out []property
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, required
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
		out = append(out, property{name, v})
	}
	return out, required
}

// mayBeString reports whether a property's value may be a string (then it is read as raw text).
func mayBeString(schema json.RawMessage) bool { return jsonTypes(schema)["string"] }
