package autoparse

import (
	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

// qwen3Coder is llama.cpp's Qwen3-Coder format (common/parsers/qwen3-coder.cpp), also used by
// Qwen3.5, Nemotron Nano 3 and StepFun-3.5-Flash:
//
//	<tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n</function>\n</tool_call>
//
// The thinking variants (templates with <think>) end reasoning at </think> or at a call.
type qwen3Coder struct{ reasoning bool }

const (
	qwenGenPrefix = "<|im_start|>assistant\n"
	qwenArgClose  = "\n</parameter>\n"
)

// ReasoningTags are <think> and </think> for the thinking variants.
func (q qwen3Coder) ReasoningTags() (string, string) {
	if q.reasoning {
		return "<think>", "</think>"
	}
	return "", ""
}

// Build makes the parser for one request.
func (q qwen3Coder) Build(p Params) Output {
	r := newRequest(p)
	gen := generationLiteral(p.GenerationPrompt, qwenGenPrefix, "<think>")
	reasoning := peg.Eps()
	if q.reasoning && p.ExtractReasoning {
		reasoning = peg.Opt(peg.Seq(peg.Lit("<think>"), peg.Space(),
			peg.Reasoning(peg.Until("</think>", "<tool_call>")),
			peg.Choice(peg.Lit("</think>"), peg.Peek(peg.Lit("<tool_call>")))))
	}
	// Qwen3-Coder (not a thinking model) sometimes leaves out <tool_call>: a complete
	// <function=NAME> opener of a known tool also starts a call.
	starts := []string{"<tool_call>"}
	if !q.reasoning {
		for _, t := range p.Tools {
			starts = append(starts, "<function="+t.Name+">")
		}
	}
	var out Output
	switch {
	case r.hasResponse:
		out.Parser = peg.Seq(gen, spaced(reasoning, peg.Content(peg.Schema(peg.JSON(), "response-format", p.ResponseSchema))))
	case r.callTools:
		out.Parser = peg.Seq(gen, spaced(reasoning, peg.Content(peg.Until(starts...)), q.calls(r)))
	default:
		out.Parser = peg.Seq(gen, spaced(reasoning, peg.Content(peg.Rest())))
	}
	lazyGrammar(&out, r, starts...)
	return out
}

func (q qwen3Coder) calls(r callRequest) *peg.P {
	argClose := peg.ToolArgClose(peg.Lit(qwenArgClose))
	argString := peg.Rule("xml-arg-string", peg.Seq(peg.ToolArgString(peg.Until(qwenArgClose)), argClose))
	var fns []*peg.P
	for _, t := range r.Tools {
		req, opt := requiredAndOptional(t, func(pr property) *peg.P {
			types := jsonTypes(pr.schema)
			var value *peg.P
			switch {
			case !types["string"]:
				// Non-string values are read raw up to the closer and turned into JSON by the
				// mapper: constraining them by schema broke nested array<object> values.
				value = peg.Seq(peg.ToolArgJSON(peg.Until(qwenArgClose)), argClose)
			case len(types) == 1:
				value = argString
			default:
				// A union with string: the typed JSON alternatives first, else raw text.
				value = peg.Choice(peg.Atomic(peg.Seq(peg.ToolArgJSON(typedJSON(types)), argClose)), argString)
			}
			open := peg.ToolArgOpen(peg.Seq(peg.Lit("<parameter="), peg.ToolArgName(peg.Lit(pr.name)), peg.Lit(">\n")))
			return peg.Rule("tool-"+t.Name+"-arg-"+pr.name, peg.ToolArg(peg.Seq(open, value)))
		})
		// Qwen does not always keep the schema's order of required arguments.
		args := permute("tool-"+t.Name+"-args", req)
		if len(opt) > 0 {
			args = peg.Seq(args, peg.Star(peg.Choice(opt...)))
		}
		fn := peg.Tool(peg.Seq(
			peg.ToolOpen(peg.Seq(peg.Lit("<function="), peg.ToolName(peg.Lit(t.Name)), peg.Lit(">\n"))),
			peg.ToolArgs(args),
			peg.ToolClose(peg.Lit("</function>\n"))))
		fns = append(fns, peg.Rule("tool-"+t.Name, fn))
	}
	body := peg.Seq(peg.Choice(fns...), peg.Lit("</tool_call>"), peg.Space())
	call := peg.Rule("tool-call", peg.Seq(peg.Lit("<tool_call>\n"), body))
	first := call
	if !q.reasoning {
		first = peg.Rule("tool-call-first", peg.Seq(peg.Opt(peg.Lit("<tool_call>\n")), body))
	}
	calls := first
	if r.Parallel {
		calls = peg.Seq(first, peg.Star(call))
	}
	min := 0
	if r.required {
		min = 1
	}
	return peg.TriggerRule("tool-call-root", peg.Repeat(calls, min, 1))
}

// miniCPM5 is llama.cpp's MiniCPM5 format (common/parsers/minicpm5.cpp):
//
//	<think>REASONING</think><function name="NAME"><param name="ARG">VALUE</param></function>
//
// A string value may sit in <![CDATA[...]]> to carry text such as </param>.
type miniCPM5 struct{}

// ReasoningTags are <think> and </think>.
func (miniCPM5) ReasoningTags() (string, string) { return "<think>", "</think>" }

// Build makes the parser for one request.
func (miniCPM5) Build(p Params) Output {
	r := newRequest(p)
	gen := generationLiteral(p.GenerationPrompt, qwenGenPrefix, "<think>")
	reasoning := peg.Eps()
	if p.ExtractReasoning {
		reasoning = peg.Seq(spaced(peg.Lit("<think>"), peg.Reasoning(peg.Until("</think>")), peg.Lit("</think>")), peg.Space())
	}
	var out Output
	switch {
	case r.hasResponse:
		out.Parser = peg.Seq(gen, reasoning, peg.Content(peg.Schema(peg.JSON(), "response-format", p.ResponseSchema)))
	case r.callTools:
		out.Parser = peg.Seq(gen, reasoning, peg.Content(peg.Until("<function")), miniCPM5Calls(r), peg.End())
	default:
		out.Parser = peg.Seq(gen, reasoning, peg.Content(peg.Rest()), peg.End())
	}
	lazyGrammar(&out, r, "<function")
	return out
}

func miniCPM5Calls(r callRequest) *peg.P {
	closer := peg.ToolArgClose(peg.Lit("</param>"))
	str := peg.Choice(
		peg.Seq(peg.Lit("<![CDATA["), peg.ToolArgString(peg.Until("]]>")), peg.Lit("]]>"), closer),
		peg.Seq(peg.Not(peg.Lit("<![CDATA[")), peg.ToolArgString(peg.Until("</param>")), closer))
	argOpen := func(name string) *peg.P {
		return peg.Seq(peg.Lit(`<param name="`), peg.ToolArgName(peg.Lit(name)), peg.Lit(`">`))
	}
	var fns []*peg.P
	for _, t := range r.Tools {
		argsP := argElements(t, argOpen, str, closer)
		fn := peg.Tool(spaced(
			peg.ToolOpen(peg.Seq(peg.Lit(`<function name="`), peg.ToolName(peg.Lit(t.Name)), peg.Lit(`">`))),
			peg.ToolArgs(argsP),
			peg.ToolClose(peg.Lit("</function>"))))
		fns = append(fns, peg.Rule("tool-"+t.Name, fn))
	}
	max := 1
	if r.Parallel {
		max = -1
	}
	return peg.TriggerRule("tool-call", peg.Repeat(peg.Seq(peg.Choice(fns...), peg.Space()), 1, max))
}
