package autoparse

import (
	"encoding/json"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

// deepSeekDSML is llama.cpp's DeepSeek V3.2/V4 format (common/parsers/deepseek.cpp): calls in
// DSML markup,
//
//	<｜DSML｜function_calls>
//	<｜DSML｜invoke name="NAME">
//	<｜DSML｜parameter name="ARG" string="true|false">VALUE</｜DSML｜parameter>
//	</｜DSML｜invoke>
//	</｜DSML｜function_calls>
//
// V4 names the block tool_calls, and its non-thinking generation prompt ends in a bare
// </think> where V3.2's has an empty <think></think>.
type deepSeekDSML struct{ v4 bool }

const (
	dsml           = "｜DSML｜"
	dsmlGenPrompt  = "<｜Assistant｜>"
	dsmlParamStart = "<" + dsml + "parameter"
	dsmlParamEnd   = "</" + dsml + "parameter>"
)

// ReasoningTags are <think> and </think>.
func (deepSeekDSML) ReasoningTags() (string, string) { return "<think>", "</think>" }

// Build makes the parser for one request.
func (d deepSeekDSML) Build(p Params) Output {
	r := newRequest(p)
	block := "function_calls"
	if d.v4 {
		block = "tool_calls"
	}
	fcStart, fcEnd := "<"+dsml+block+">", "</"+dsml+block+">"
	// llama.cpp reads enable_thinking; the generation prompt says the same: it opens <think>
	// when thinking is on, and closes it (</think>) when off.
	thinking := strings.HasSuffix(strings.TrimSpace(p.GenerationPrompt), "<think>")
	gen := generationLiteral(p.GenerationPrompt, dsmlGenPrompt, "<think>")

	var fns []*peg.P
	for _, t := range r.Tools {
		req, opt := requiredAndOptional(t, func(pr property) *peg.P {
			isString := onlyString(pr.schema)
			attr, value := "false", peg.ToolArgJSON(peg.Schema(peg.JSON(), "tool-"+t.Name+"-arg-"+pr.name+"-schema", pr.schema))
			if isString {
				attr, value = "true", peg.ToolArgString(peg.Until(dsmlParamEnd))
			}
			open := peg.ToolArgOpen(peg.Seq(peg.Lit(dsmlParamStart+` name="`), peg.ToolArgName(peg.Lit(pr.name)), peg.Lit(`" string="`+attr+`">`)))
			return peg.Rule("tool-"+t.Name+"-arg-"+pr.name, peg.ToolArg(peg.Seq(open, value, peg.ToolArgClose(peg.Lit(dsmlParamEnd)))))
		})
		fn := peg.Tool(peg.Seq(
			peg.ToolOpen(peg.Seq(peg.Lit("<"+dsml+`invoke name="`), peg.ToolName(peg.Lit(t.Name)), peg.Lit("\">\n"))),
			requiredThenOptional(req, opt), peg.Space(), peg.ToolClose(peg.Lit("</"+dsml+"invoke>"))))
		fns = append(fns, peg.Rule("tool-"+t.Name, fn))
	}
	calls := invokeBlock(fcStart, fcEnd, fns, r.Parallel)

	reasoning, withCalls := peg.Eps(), (*peg.P)(nil)
	switch {
	case p.ExtractReasoning && thinking:
		reasoning = peg.Opt(peg.Seq(peg.Lit("<think>"), peg.Reasoning(peg.Until("</think>")), peg.Lit("</think>")))
		// A call may end reasoning without </think>.
		withCalls = peg.Seq(peg.Lit("<think>"), peg.Reasoning(peg.Until("\n\n"+fcStart, fcStart, "</think>")), peg.Space(), calls)
	case p.ExtractReasoning && d.v4:
		reasoning = peg.Opt(peg.Lit("</think>"))
	case p.ExtractReasoning:
		reasoning = peg.Opt(peg.Seq(peg.Lit("<think>"), peg.Until("</think>"), peg.Lit("</think>")))
	}
	var out Output
	switch {
	case r.hasResponse:
		out.Parser = peg.Seq(gen, reasoning, fencedResponse(p), peg.End())
	case !r.callTools:
		out.Parser = peg.Seq(gen, reasoning, peg.Content(peg.Rest()), peg.End())
	default:
		optCalls := calls
		if !r.required {
			optCalls = peg.Opt(calls)
		}
		before := peg.Seq(peg.Not(peg.Lit("<think>")), peg.Content(peg.Until("\n\n"+fcStart, fcStart)), peg.Space())
		body := peg.Seq(reasoning, before, optCalls)
		if withCalls != nil {
			body = peg.Choice(withCalls, body)
		}
		out.Parser = peg.Seq(gen, body, peg.End())
	}
	lazyGrammar(&out, r, fcStart)
	return out
}

// invokeBlock reads one call (or, parallel, several) between the block's markers.
func invokeBlock(start, end string, fns []*peg.P, parallel bool) *peg.P {
	choice := peg.Choice(fns...)
	inner := choice
	if parallel {
		inner = peg.Seq(choice, peg.Star(peg.Seq(peg.Space(), choice)))
	}
	return peg.TriggerRule("tool-call", peg.Seq(peg.Lit(start), peg.Space(), inner, peg.Space(), peg.Lit(end)))
}

// fencedResponse reads a response format's JSON in a ```json fence.
func fencedResponse(p Params) *peg.P {
	return peg.Rule("response-format", spaced(peg.Lit("```json"), peg.Content(peg.Schema(peg.JSON(), "response-format-schema", p.ResponseSchema)), peg.Lit("```")))
}

// miniMaxM3 is llama.cpp's MiniMax-M3 format (common/parsers/minimax-m3.cpp): every call tag
// carries the namespace token, and an argument is an element named after it,
//
//	NS<tool_call>\nNS<invoke name="NAME">NS<ARG>VALUE NS</ARG>NS</invoke>\nNS</tool_call>
type miniMaxM3 struct{}

const mmNS = "]<]minimax[>["

// ReasoningTags are <mm:think> and </mm:think>.
func (miniMaxM3) ReasoningTags() (string, string) { return "<mm:think>", "</mm:think>" }

// Build makes the parser for one request.
func (miniMaxM3) Build(p Params) Output {
	r := newRequest(p)
	const thinkStart, thinkEnd = "<mm:think>", "</mm:think>"
	fcStart, fcEnd := mmNS+"<tool_call>", mmNS+"</tool_call>"
	gen := peg.Prefix(p.GenerationPrompt, thinkStart)
	reasoning := peg.Eps()
	if p.ExtractReasoning {
		// With thinking off (the generation prompt closes the block) the block is read but
		// not kept.
		thinking := !strings.HasSuffix(strings.TrimSpace(p.GenerationPrompt), thinkEnd)
		block := peg.Seq(peg.Lit(thinkStart), peg.Until(thinkEnd), peg.Lit(thinkEnd))
		if thinking {
			block = peg.Seq(peg.Lit(thinkStart), peg.Space(), peg.Reasoning(peg.Until(thinkEnd)), peg.Lit(thinkEnd))
		}
		// A turn without reasoning starts with a bare </mm:think>.
		reasoning = peg.Opt(peg.Choice(block, peg.Lit(thinkEnd)))
	}
	var out Output
	switch {
	case r.hasResponse:
		out.Parser = peg.Seq(gen, reasoning, fencedResponse(p), peg.End())
	case !r.callTools:
		out.Parser = peg.Seq(gen, reasoning, peg.Content(peg.Rest()), peg.End())
	default:
		var fns []*peg.P
		for _, t := range r.Tools {
			req, opt := requiredAndOptional(t, func(pr property) *peg.P {
				return miniMaxElement(pr, "tool-"+t.Name+"-arg-"+pr.name)
			})
			fn := peg.Tool(peg.Seq(
				peg.ToolOpen(peg.Seq(peg.Lit(mmNS+`<invoke name="`), peg.ToolName(peg.Lit(t.Name)), peg.Lit(`">`))),
				peg.Space(), requiredThenOptional(req, opt), peg.Space(), peg.ToolClose(peg.Lit(mmNS+"</invoke>"))))
			fns = append(fns, peg.Rule("tool-"+t.Name, fn))
		}
		calls := invokeBlock(fcStart, fcEnd, fns, r.Parallel)
		if !r.required {
			calls = peg.Opt(calls)
		}
		out.Parser = peg.Seq(gen, reasoning, peg.Content(peg.Until(fcStart)), calls, peg.End())
	}
	lazyGrammar(&out, r, fcStart)
	return out
}

// miniMaxElement reads one argument element: strings raw, other scalars as JSON, and arrays
// and objects with properties as nested elements (<item> for array items), which llama.cpp's
// MiniMax mapper turns into JSON; here the parser writes the JSON punctuation itself.
func miniMaxElement(pr property, rule string) *peg.P {
	closer := mmNS + "</" + pr.name + ">"
	open := peg.ToolArgOpen(peg.Seq(peg.Lit(mmNS+"<"), peg.ToolArgName(peg.Lit(pr.name)), peg.Lit(">")))
	return peg.Rule(rule, peg.ToolArg(peg.Seq(open, miniMaxValue(pr.schema, rule, closer, 0), peg.Lit(closer))))
}

// miniMaxMaxDepth bounds the nesting read as elements (the combinators cannot recurse); a
// value nested deeper is read as raw text.
const miniMaxMaxDepth = 4

// miniMaxValue reads an element's value up to (not including) closer.
func miniMaxValue(schema json.RawMessage, rule, closer string, depth int) *peg.P {
	closeValue := peg.ToolArgClose(peg.Peek(peg.Lit(closer)))
	if !nestsElements(schema) || depth >= miniMaxMaxDepth {
		if mayBeString(schema) || nestsElements(schema) {
			return peg.Seq(peg.ToolArgString(peg.Until(closer)), closeValue)
		}
		return peg.Seq(peg.ToolArgJSON(peg.Schema(peg.JSON(), rule+"-schema", schema)), closeValue)
	}
	var s struct {
		Items json.RawMessage `json:"items"`
	}
	_ = json.Unmarshal(schema, &s)
	if jsonTypes(schema)["array"] {
		end := mmNS + "</item>"
		item := peg.Seq(peg.Atomic(peg.Seq(peg.Lit(mmNS+"<item>"), peg.EmitItem())),
			miniMaxValue(s.Items, rule+"-item", end, depth+1), peg.Lit(end))
		return peg.Seq(peg.Emit("["), peg.Star(peg.Seq(peg.Space(), item)), peg.Space(), peg.Peek(peg.Lit(closer)), peg.Emit("]"))
	}
	props, _ := properties(schema)
	var children []*peg.P
	for _, pr := range props {
		end := mmNS + "</" + pr.name + ">"
		children = append(children, peg.Seq(peg.Atomic(peg.Seq(peg.Lit(mmNS+"<"+pr.name+">"), peg.EmitKey(pr.name))),
			miniMaxValue(pr.schema, rule+"-"+pr.name, end, depth+1), peg.Lit(end)))
	}
	// The container closes once its closer is whole: until then more members may come.
	return peg.Seq(peg.Emit("{"), peg.Star(peg.Seq(peg.Space(), peg.Choice(children...))), peg.Space(), peg.Peek(peg.Lit(closer)), peg.Emit("}"))
}

// nestsElements reports whether MiniMax writes a value as nested elements: an array, or an
// object with properties (an object without them is written as JSON).
func nestsElements(schema json.RawMessage) bool {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	ts := jsonTypes(schema)
	_ = json.Unmarshal(schema, &s)
	return len(ts) == 1 && (ts["array"] || ts["object"] && len(s.Properties) > 0)
}
