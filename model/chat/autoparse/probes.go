package autoparse

import (
	"encoding/json"
	"strings"
)

// Probe texts: distinctive strings whose positions in the renders reveal the markers.
const (
	funFirst        = "FFF_FIRST_FUN_F"
	funSecond       = "SSS_SECOND_FUN_S"
	argFirst        = "AA_ARG_FST_AA"
	argSecond       = "BB_ARG_SND_BB"
	userMsg         = "U_USER_MSG Hello END_U"
	userMsgTwo      = "V_USER_MSG Hello END_V"
	assistantMsg    = "A_ASST_MSG I can help END_A"
	thinkingContent = "REASON_PART I am thinking END_R"
	callID001       = "call00001"
	callID002       = "call00002"
	callID999       = "call99999"
)

// errorSentinel is what llama.cpp's apply_template returns when rendering throws.
const errorSentinel = "#**ERROR**#"

// field is one key of a JSON object built in order (templates may iterate objects).
type field struct {
	k string
	v any
}

// object is a JSON object that keeps its keys in the order given.
type object []field

// MarshalJSON writes the fields in order.
func (o object) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// probeParams is one probe render: llama.cpp's template_params.
type probeParams struct {
	messages            []object
	tools               []object // nil: no tools
	addGenerationPrompt bool
	enableThinking      bool
}

// with returns a copy of p with other messages.
func (p probeParams) with(msgs ...object) probeParams {
	p.messages = msgs
	return p
}

func probeTools() []object {
	params := func() object {
		return object{
			{"type", "object"},
			{"properties", object{
				{argFirst, object{{"type", "string"}, {"description", "First argument"}}},
				{argSecond, object{{"type", "string"}, {"description", "Second argument"}}},
			}},
			{"required", []any{}},
		}
	}
	fn := func(name, desc string) object {
		return object{{"type", "function"}, {"function", object{
			{"name", name}, {"description", desc}, {"parameters", params()},
		}}}
	}
	return []object{fn(funFirst, "Test function foo"), fn(funSecond, "Test function bar")}
}

func toolCall(name string, args object, id string) object {
	if args == nil {
		args = object{}
	}
	return object{{"id", id}, {"type", "function"}, {"function", object{{"name", name}, {"arguments", args}}}}
}

// The tool calls the probes use.
var (
	firstToolCallZeroArgs       = toolCall(funFirst, nil, callID001)
	firstToolCallOneArg         = toolCall(funFirst, object{{argFirst, "XXXX"}}, callID001)
	firstToolCallOneArgOtherVal = toolCall(funFirst, object{{argFirst, "YYYY"}}, callID001)
	firstToolCallOtherArg       = toolCall(funFirst, object{{argSecond, "YYYY"}}, callID001)
	firstToolCall               = toolCall(funFirst, object{{argFirst, "XXXX"}, {argSecond, "YYYY"}}, callID001)
	secondToolCall              = toolCall(funSecond, object{{argFirst, "XXXX"}, {argSecond, "YYYY"}}, callID002)
	firstToolCallAltID          = toolCall(funFirst, object{{argFirst, "XXXX"}, {argSecond, "YYYY"}}, callID999)
)

func userMessage(text string) object { return object{{"role", "user"}, {"content", text}} }

func asst(content string) object { return object{{"role", "assistant"}, {"content", content}} }

func asstReason(content, reasoning string) object {
	return object{{"role", "assistant"}, {"content", content}, {"reasoning_content", reasoning}}
}

func asstCalls(calls ...object) object {
	return object{{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}}
}

// toolProbe is the usual tool probe: the user message then asst, with the probe tools.
func toolProbe(assistant object) probeParams {
	return probeParams{messages: []object{userMessage(userMsg), assistant}, tools: probeTools(), enableThinking: true}
}

// normalize applies llama.cpp's messages_inp_normalizer: a template that takes only typed
// content gets every string content as one text part.
func (z *analyzer) normalize(msgs []object) []object {
	if z.caps.StringContent || !z.caps.TypedContent {
		return msgs
	}
	out := make([]object, len(msgs))
	for i, m := range msgs {
		n := make(object, len(m))
		for j, f := range m {
			if s, ok := f.v.(string); ok && f.k == "content" {
				f.v = []object{{{"type", "text"}, {"text", s}}}
			}
			n[j] = f
		}
		out[i] = n
	}
	return out
}

// apply renders p, or returns errorSentinel when the template fails.
func (z *analyzer) apply(p probeParams) (out string) {
	norm := z.normalize(p.messages)
	if norm == nil {
		norm = []object{} // an empty conversation is [], not null
	}
	msgs, err := json.Marshal(norm)
	if err != nil {
		return errorSentinel
	}
	var tools json.RawMessage
	if len(p.tools) > 0 {
		if tools, err = json.Marshal(p.tools); err != nil {
			return errorSentinel
		}
	}
	defer func() {
		if recover() != nil {
			out = errorSentinel
		}
	}()
	out, err = z.render(msgs, tools, p.addGenerationPrompt, p.enableThinking)
	if err != nil {
		return errorSentinel
	}
	return out
}

// comparison is two renders and their diff.
type comparison struct {
	diff             diffSplit
	outputA, outputB string
}

// compare renders a and b and diffs them; ok is false when either render fails.
func (z *analyzer) compare(a, b probeParams) (comparison, bool) {
	outA, outB := z.apply(a), z.apply(b)
	if outA == errorSentinel || outB == errorSentinel {
		return comparison{}, false
	}
	return comparison{diff: calculateDiffSplit(outA, outB), outputA: outA, outputB: outB}, true
}
