package autoparse

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

// gemma4 is llama.cpp's Gemma 4 format (common/parsers/gemma4.cpp): reasoning in a thought
// channel, calls with arguments in Gemma's own dictionary syntax,
//
//	<|channel>thought\nREASONING<channel|>CONTENT<|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>
//
// Keys are bare, strings sit between <|"|> delimiters; numbers, booleans, null, lists and
// nested dictionaries are written as in JSON.
type gemma4 struct{}

const (
	gemmaQuote        = `<|"|>`
	gemmaChannelStart = "<|channel>"
	gemmaChannelEnd   = "<channel|>"
	gemmaCallStart    = "<|tool_call>"
	// gemmaDepth bounds how deeply argument values nest: the combinators build no recursive
	// rules, so each level is its own set of rules.
	gemmaDepth = 6
)

// ReasoningTags are the thought channel's markers.
func (gemma4) ReasoningTags() (string, string) { return "<|channel>thought", gemmaChannelEnd }

// Build makes the parser for one request.
func (gemma4) Build(p Params) Output {
	r := newRequest(p)
	start := peg.Rule("start", peg.Opt(peg.Lit("<|turn>model\n")))
	var thoughtRule *peg.P
	if p.ExtractReasoning {
		thoughtRule = peg.Rule("thought", peg.Seq(peg.Lit(gemmaChannelStart+"thought"), peg.Space(),
			peg.Reasoning(peg.Until(gemmaChannelEnd)), peg.Lit(gemmaChannelEnd)))
	} else {
		thoughtRule = peg.Rule("thought", peg.Content(peg.Seq(peg.Lit(gemmaChannelStart+"thought"), peg.Space(),
			peg.Until(gemmaChannelEnd), peg.Lit(gemmaChannelEnd))))
	}
	// Empty channels (an opener not followed by "thought") are skipped.
	emptyChannels := peg.Star(peg.Seq(peg.Lit(gemmaChannelStart), peg.Not(peg.Lit("thought"))))
	thought := peg.Choice(peg.Seq(peg.Peek(peg.Lit(gemmaChannelStart)), emptyChannels, thoughtRule), peg.Not(peg.Lit(gemmaChannelStart)))

	var out Output
	switch {
	case r.hasResponse:
		rf := spaced(peg.Lit("```json"), peg.Content(peg.Schema(peg.JSON(), "response-format-schema", p.ResponseSchema)), peg.Lit("```"))
		out.Parser = peg.Seq(start, peg.Opt(thought), rf)
	case r.callTools:
		var fns []*peg.P
		value := gemmaValue(gemmaDepth)
		for _, t := range r.Tools {
			fns = append(fns, peg.Rule("tool-"+t.Name, peg.Tool(peg.Seq(
				peg.ToolOpen(peg.Seq(peg.ToolName(peg.Lit(t.Name)), peg.Peek(peg.Lit("{")))),
				gemmaArgs(value)))))
		}
		min, max := 0, 1
		if r.required {
			min = 1
		}
		if r.Parallel {
			max = -1
		}
		calls := peg.TriggerRule("tool-call", peg.Repeat(peg.Seq(peg.Lit(gemmaCallStart+"call:"), peg.Choice(fns...), peg.Lit("<tool_call|>")), min, max))
		if r.required {
			out.Parser = peg.Seq(start, thought, calls)
			break
		}
		content := peg.Rule("content", peg.Content(peg.Until(gemmaChannelStart, gemmaChannelEnd, gemmaCallStart)))
		message := peg.Rule("message", peg.Seq(thought, content))
		// Text the messages leave before a call (a stray channel closer) is skipped.
		out.Parser = peg.Seq(start, peg.Star(message), peg.Rule("scan-to-toolcall", peg.Until(gemmaCallStart)), calls)
	default:
		// Gemma 4 may add an empty thought block, or a lone <channel|>, after the content:
		// complete blocks are read, and the parse stops at an unmatched closer.
		content := peg.Rule("content", peg.Content(peg.Until(gemmaChannelStart, gemmaChannelEnd)))
		out.Parser = peg.Seq(start, peg.Plus(peg.Rule("message", peg.Seq(thought, content))))
	}
	out.Grammar = r.hasResponse || r.callTools
	out.Lazy = out.Grammar && !r.hasResponse && !r.required
	if out.Lazy {
		out.Triggers = []string{gemmaCallStart}
	}
	return out
}

// The chat mapper builds arguments only from text in the output, so Gemma's dictionary is
// tagged piece by piece in the way that text becomes JSON: the top-level keys as argument
// names, strings as string values (the mapper quotes and escapes them), and the punctuation
// of nested values ({ } [ ] , :) as JSON text. llama.cpp's Gemma 4 mapper converts the
// dictionary as a whole; the arguments come out the same.

// gemmaJSON tags literal punctuation as argument JSON text.
func gemmaJSON(s string) *peg.P { return peg.ToolArgJSON(peg.Lit(s)) }

// gemmaKey is a bare dictionary key: text up to its colon.
func gemmaKey() *peg.P {
	return peg.Seq(peg.Not(peg.Choice(peg.Lit(":"), peg.Lit("}"))), peg.Until(":", "}"))
}

// gemmaString is a <|"|>-delimited string, written as a JSON string.
func gemmaString() *peg.P {
	return peg.Rule("gemma4-string", peg.Seq(peg.Lit(gemmaQuote), peg.ToolArgString(peg.Until(gemmaQuote)), peg.ToolArgClose(peg.Lit(gemmaQuote))))
}

// gemmaValue is a value nesting at most depth containers deep. The scalar rules are shared
// by all depths.
func gemmaValue(depth int) *peg.P {
	scalars := []*peg.P{
		gemmaString(),
		peg.Rule("gemma4-number", peg.ToolArgJSON(peg.Seq(peg.Peek(peg.Chars("-0-9", 1, 1)), peg.JSON()))),
		peg.Rule("gemma4-bool", peg.ToolArgJSON(peg.Choice(peg.Lit("true"), peg.Lit("false")))),
		peg.Rule("gemma4-null", peg.ToolArgJSON(peg.Lit("null"))),
	}
	value := peg.Rule("gemma4-value-0", peg.Choice(scalars...))
	for d := 1; d <= depth; d++ {
		inner := value
		kv := peg.Seq(peg.ToolArgString(gemmaKey()), peg.ToolArgClose(peg.Peek(peg.Lit(":"))), gemmaJSON(":"), peg.Space(), inner)
		dict := peg.Seq(gemmaJSON("{"), peg.Space(), peg.Choice(gemmaJSON("}"),
			peg.Seq(kv, peg.Star(peg.Seq(gemmaJSON(","), peg.Space(), kv)), peg.Space(), gemmaJSON("}"))))
		array := peg.Seq(gemmaJSON("["), peg.Space(), peg.Choice(gemmaJSON("]"),
			peg.Seq(inner, peg.Star(peg.Seq(gemmaJSON(","), peg.Space(), inner)), peg.Space(), gemmaJSON("]"))))
		alts := []*peg.P{scalars[0], peg.Rule(fmt.Sprintf("gemma4-dict-%d", d), dict), peg.Rule(fmt.Sprintf("gemma4-array-%d", d), array)}
		value = peg.Rule(fmt.Sprintf("gemma4-value-%d", d), peg.Choice(append(alts, scalars[1:]...)...))
	}
	return value
}

// gemmaArgs is a call's argument dictionary: its keys are the argument names, and its closing
// brace closes the call.
func gemmaArgs(value *peg.P) *peg.P {
	member := peg.ToolArg(peg.Seq(peg.ToolArgOpen(peg.Seq(peg.ToolArgName(gemmaKey()), peg.Lit(":"))), peg.Space(), value))
	return peg.Seq(peg.Lit("{"), peg.Space(), peg.Choice(peg.ToolClose(peg.Lit("}")),
		peg.Seq(member, peg.Star(peg.Seq(peg.Lit(","), peg.Space(), member)), peg.Space(), peg.ToolClose(peg.Lit("}")))))
}
