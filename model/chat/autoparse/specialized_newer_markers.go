package autoparse

import (
	"encoding/json"

	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

// cohere2MoE is llama.cpp's Cohere2 MoE ("North Code") format (common/parsers/cohere2moe.cpp):
// a marker-wrapped turn, reasoning then either text or a JSON array of calls,
//
//	<|START_THINKING|>R<|END_THINKING|><|START_TEXT|>C<|END_TEXT|>
//	<|START_THINKING|>R<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {...}}]<|END_ACTION|>
type cohere2MoE struct{}

const (
	cohereThinkStart  = "<|START_THINKING|>"
	cohereThinkEnd    = "<|END_THINKING|>"
	cohereTextStart   = "<|START_TEXT|>"
	cohereTextEnd     = "<|END_TEXT|>"
	cohereActionStart = "<|START_ACTION|>"
	cohereActionEnd   = "<|END_ACTION|>"
)

// ReasoningTags are the thinking markers.
func (cohere2MoE) ReasoningTags() (string, string) { return cohereThinkStart, cohereThinkEnd }

// Build makes the parser for one request.
func (cohere2MoE) Build(p Params) Output {
	r := newRequest(p)
	// The generation prompt opens the thinking block; the reasoning parser reads its opener.
	gen := generationLiteral(p.GenerationPrompt, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", cohereThinkStart)
	block := peg.Seq(peg.Lit(cohereThinkStart), peg.Until(cohereThinkEnd, cohereTextStart, cohereActionStart), peg.Opt(peg.Lit(cohereThinkEnd)))
	reasoning := peg.Opt(peg.Content(block))
	if p.ExtractReasoning {
		reasoning = peg.Opt(peg.Seq(peg.Lit(cohereThinkStart),
			peg.Reasoning(peg.Until(cohereThinkEnd, cohereTextStart, cohereActionStart)), peg.Opt(peg.Lit(cohereThinkEnd))))
	}
	text := peg.Seq(peg.Lit(cohereTextStart), peg.Content(peg.Until(cohereTextEnd)), peg.Opt(peg.Lit(cohereTextEnd)))
	if r.hasResponse {
		text = peg.Seq(peg.Lit(cohereTextStart), peg.Content(peg.Schema(peg.JSON(), "response-format-schema", p.ResponseSchema)), peg.Opt(peg.Lit(cohereTextEnd)))
	}
	body := text
	if r.callTools {
		calls := jsonTools{tools: r.Tools, parallel: r.Parallel, force: true, nameKey: "tool_name", argsKey: "parameters",
			arrayWrapped: true, genIDKey: "tool_call_id", order: []string{"tool_call_id", "tool_name", "parameters"},
		}.section(cohereActionStart, cohereActionEnd)
		// Text and calls exclude each other in this format.
		body = calls
		if !r.required {
			body = peg.Choice(calls, text)
		}
	}
	out := Output{Parser: peg.Seq(gen, reasoning, body, peg.Opt(peg.Lit("<|END_OF_TURN_TOKEN|>")), peg.End())}
	lazyGrammar(&out, r, cohereActionStart)
	return out
}

// kimiK3 is llama.cpp's Kimi K3 format (common/parsers/kimi-k3.cpp): sections opened by
// <|open|>TAG ATTRS<|sep|> and closed by <|close|>TAG<|sep|>,
//
//	[think] [response] [tools: call tool="NAME" index="N", argument key="K" type="T"] close(message) <|end_of_msg|>
//
// The generation prompt opens the think section, so every opener is optional.
type kimiK3 struct{}

const (
	k3Sep        = "<|sep|>"
	k3MsgStart   = `<|open|>message role="assistant"<|sep|>`
	k3ThinkStart = "<|open|>think<|sep|>"
	k3ThinkEnd   = "<|close|>think<|sep|>"
	k3RespStart  = "<|open|>response<|sep|>"
	k3RespEnd    = "<|close|>response<|sep|>"
	k3ToolsStart = "<|open|>tools<|sep|>"
	k3ToolsEnd   = "<|close|>tools<|sep|>"
	k3MsgEnd     = "<|close|>message<|sep|>"
	k3EOM        = "<|end_of_msg|>"
	k3ArgEnd     = "<|close|>argument<|sep|>"
)

// ReasoningTags are the think section's markers.
func (kimiK3) ReasoningTags() (string, string) { return k3ThinkStart, k3ThinkEnd }

// Build makes the parser for one request.
func (kimiK3) Build(p Params) Output {
	r := newRequest(p)
	// llama.cpp's K3 handler has no response-format parser or grammar.
	r.hasResponse = false
	start := peg.Opt(peg.Lit(k3MsgStart))
	// The think section is always read (the generation prompt opens it); with extraction off
	// its text is content.
	thinkBody := peg.Content(peg.Until(k3ThinkEnd, k3RespStart))
	if p.ExtractReasoning {
		thinkBody = peg.Reasoning(peg.Until(k3ThinkEnd, k3RespStart))
	}
	reasoning := peg.Opt(peg.Seq(peg.Opt(peg.Lit(k3ThinkStart)), thinkBody, peg.Opt(peg.Lit(k3ThinkEnd))))
	response := peg.Seq(peg.Opt(peg.Lit(k3RespStart)), peg.Content(peg.Until(k3RespEnd, k3ToolsStart, k3MsgEnd)), peg.Opt(peg.Lit(k3RespEnd)))
	trailer := peg.Seq(peg.Opt(peg.Lit(k3MsgEnd)), peg.Opt(peg.Lit(k3EOM)))
	out := Output{}
	if !r.callTools {
		out.Parser = peg.Seq(start, reasoning, response, trailer, peg.End())
		lazyGrammar(&out, r)
		return out
	}
	var fns []*peg.P
	for _, t := range r.Tools {
		var args []*peg.P
		props, _ := properties(parameters(t))
		for _, pr := range props {
			// The type comes from the schema, not the type="..." attribute the model writes.
			var typ string
			var s struct {
				Type json.RawMessage `json:"type"`
			}
			if json.Unmarshal(pr.schema, &s) != nil || json.Unmarshal(s.Type, &typ) != nil {
				typ = "string"
			}
			value := peg.ToolArgJSON(peg.Until(k3ArgEnd))
			if typ == "string" {
				value = peg.ToolArgString(peg.Until(k3ArgEnd))
			}
			args = append(args, peg.Rule("kimi-k3-arg-"+t.Name+"-"+pr.name, peg.ToolArg(peg.Seq(
				peg.ToolArgOpen(peg.Lit(`<|open|>argument key="`)), peg.ToolArgName(peg.Lit(pr.name)), peg.Lit(`"`),
				peg.Until(k3Sep), peg.Lit(k3Sep), value, peg.ToolArgClose(peg.Lit(k3ArgEnd))))))
		}
		argsP := peg.Eps()
		if len(args) > 0 {
			argsP = peg.Star(peg.Choice(args...))
		}
		fns = append(fns, peg.Rule("kimi-k3-tool-"+t.Name, peg.Tool(peg.Seq(
			peg.ToolOpen(peg.Seq(peg.Lit(`<|open|>call tool="`), peg.ToolName(peg.Lit(t.Name)), peg.Lit(`"`), peg.Until(k3Sep), peg.Lit(k3Sep))),
			peg.ToolArgs(argsP), peg.ToolClose(peg.Lit("<|close|>call<|sep|>"))))))
	}
	// The message closer belongs to the trigger rule, or the lazy grammar would refuse it.
	tools := peg.TriggerRule("kimi-k3-tool-call", peg.Seq(peg.Lit(k3ToolsStart), peg.Plus(peg.Choice(fns...)),
		peg.Lit(k3ToolsEnd), peg.Opt(peg.Lit(k3MsgEnd)), peg.Opt(peg.Lit(k3EOM))))
	if !r.required {
		tools = peg.Opt(tools)
	}
	out.Parser = peg.Seq(start, reasoning, response, tools, trailer, peg.End())
	lazyGrammar(&out, r, k3ToolsStart)
	return out
}

// museGlimmer is llama.cpp's Muse Glimmer format (common/parsers/muse-glimmer.cpp): a turn of
// messages "<|start|>assistant to=RECIPIENT<|message|>TEXT" ended by <|eom|> (more follow) or
// <|eot|>; to=self is reasoning, to=user the answer, to=TOOL a call in ATEM markup:
//
//	<atem:function_calls>\n<atem:invoke name="NAME">\n<atem:parameter name="ARG">V</atem:parameter>\n</atem:invoke>\n</atem:function_calls>
type museGlimmer struct{}

const museStart = "<|start|>assistant"

// ReasoningTags are the reasoning message's opener and terminator.
func (museGlimmer) ReasoningTags() (string, string) { return " to=self<|message|>", "<|eom|>" }

// Build makes the parser for one request.
func (museGlimmer) Build(p Params) Output {
	r := newRequest(p)
	start := peg.Rule("start", peg.Lit(museStart))
	out := Output{}
	// The model writes its own recipients: a trigger is a call's recipient. llama.cpp's
	// trigger is a pattern, " to=" with any recipient but self and user; the literal words
	// here are " to=" and each tool's name.
	var triggers []string
	for _, t := range r.Tools {
		triggers = append(triggers, " to="+t.Name)
	}
	if !p.ExtractReasoning && !r.hasResponse && !r.callTools {
		out.Parser = peg.Seq(start, peg.Content(peg.Rest()))
		return out
	}
	analysisBody := peg.Content(peg.Until("<|eom|>"))
	if p.ExtractReasoning {
		analysisBody = peg.Reasoning(peg.Until("<|eom|>"))
	}
	analysis := peg.Rule("analysis", peg.Seq(peg.Lit(" to=self<|message|>"), analysisBody, peg.Lit("<|eom|>")))
	analyses := peg.Star(peg.Seq(start, analysis))
	recipient := peg.Opt(peg.Lit(" to=user"))
	final := peg.Rule("final", peg.Seq(recipient, peg.Lit("<|message|>"), peg.Content(peg.Until("<|eot|>", "<|eom|>"))))
	switch {
	case r.hasResponse:
		js := peg.Content(peg.Schema(peg.JSON(), "response-format-schema", p.ResponseSchema))
		rf := peg.Rule("response-format", peg.Seq(recipient, peg.Lit("<|message|>"),
			peg.Choice(peg.Seq(peg.Lit("```json"), peg.Space(), js, peg.Space(), peg.Lit("```")), js)))
		out.Parser = peg.Seq(analyses, start, rf)
	case r.callTools:
		calls := museCalls(r, start)
		if r.required {
			out.Parser = peg.Seq(analyses, start, calls)
		} else {
			trailing := peg.Opt(peg.Seq(peg.Lit("<|eom|>"), start, calls))
			out.Parser = peg.Seq(analyses, start, peg.Choice(calls, peg.Seq(final, trailing)))
		}
	default:
		out.Parser = peg.Seq(analyses, start, final)
	}
	lazyGrammar(&out, r, triggers...)
	return out
}

func museCalls(r callRequest, start *peg.P) *peg.P {
	const closer = "</atem:parameter>"
	closeValue := peg.ToolArgClose(peg.Lit(closer))
	str := peg.Seq(peg.ToolArgString(peg.Until(closer)), closeValue)
	argOpen := func(name string) *peg.P {
		return peg.Seq(peg.Lit(`<atem:parameter name="`), peg.ToolArgName(peg.Lit(name)), peg.Lit(`">`))
	}
	var fns []*peg.P
	for _, t := range r.Tools {
		argsP := argElements(t, argOpen, str, closeValue)
		open := peg.ToolOpen(peg.Seq(peg.Lit(" to="), peg.Until("<|message|>"), peg.Lit("<|message|><atem:function_calls>"), peg.Space(),
			peg.Lit(`<atem:invoke name="`), peg.ToolName(peg.Lit(t.Name)), peg.Lit(`">`), peg.Space()))
		fns = append(fns, peg.Rule("tool-"+t.Name, peg.Tool(spaced(open, peg.ToolArgs(argsP),
			peg.ToolClose(peg.Seq(peg.Lit("</atem:invoke>"), peg.Space(), peg.Lit("</atem:function_calls>")))))))
	}
	choice := peg.Choice(fns...)
	if r.Parallel {
		return peg.TriggerRule("tool-call", peg.Seq(choice, peg.Star(peg.Seq(peg.Lit("<|eom|>"), start, choice))))
	}
	return peg.TriggerRule("tool-call", choice)
}
