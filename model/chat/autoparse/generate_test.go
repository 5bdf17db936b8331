package autoparse

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

var specialFunction = Tool{Name: "special_function", Parameters: json.RawMessage(`{"type":"object","properties":{"arg1":{"type":"integer"}},"required":["arg1"]}`)}

func parse(t *testing.T, out Output, gp, text string) peg.Message {
	t.Helper()
	nodes, failed, end := peg.Parse(out.Parser, gp+text)
	if failed {
		t.Fatalf("parse of %q failed at %d", text, end)
	}
	m, err := peg.Map(gp+text, nodes)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkStream parses every prefix of text and checks that the message only grows.
func checkStream(t *testing.T, out Output, gp, text string) {
	t.Helper()
	var prev peg.Message
	for i := 1; i <= len(text); i++ {
		nodes, _, _ := peg.Parse(out.Parser, gp+text[:i])
		m, err := peg.Map(gp+text[:i], nodes)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(m.Content, prev.Content) || !strings.HasPrefix(m.Reasoning, prev.Reasoning) || len(m.Calls) < len(prev.Calls) {
			t.Fatalf("prefix %q: %+v does not extend %+v", text[:i], m, prev)
		}
		for j, c := range prev.Calls {
			if !strings.HasPrefix(m.Calls[j].Arguments, c.Arguments) {
				t.Fatalf("prefix %q: arguments %q do not extend %q", text[:i], m.Calls[j].Arguments, c.Arguments)
			}
		}
		prev = m
	}
}

func compile(t *testing.T, out Output) {
	t.Helper()
	src, err := peg.Grammar(out.Parser, out.Lazy, func(s json.RawMessage) (string, error) { return grammar.FromJSONSchema(s) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := grammar.Parse(src); err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
}

func TestBuildJSONNativePerCall(t *testing.T) {
	a := &Analysis{
		Reasoning: Reasoning{Mode: ReasoningTagBased, Start: "<think>", End: "</think>"},
		Tools: Tools{Format: Format{Mode: FormatJSONNative, PerCallStart: "<tool_call>", PerCallEnd: "</tool_call>",
			NameField: "name", ArgsField: "arguments", FunctionField: "function"}},
	}
	out := a.Build(Params{Tools: []Tool{specialFunction}, ExtractReasoning: true, Parallel: true, GenerationPrompt: "<|im_start|>assistant\n"})
	if !out.Grammar || !out.Lazy || len(out.Triggers) != 1 || out.Triggers[0] != "<tool_call>" {
		t.Fatalf("grammar %v lazy %v triggers %q", out.Grammar, out.Lazy, out.Triggers)
	}
	text := "<think>I'm\nthinking</think>Hello<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>"
	m := parse(t, out, "<|im_start|>assistant\n", text)
	if m.Reasoning != "I'm\nthinking" || m.Content != "Hello" || len(m.Calls) != 1 ||
		m.Calls[0].Name != "special_function" || m.Calls[0].Arguments != `{"arg1": 1}` {
		t.Fatalf("%+v", m)
	}
	checkStream(t, out, "<|im_start|>assistant\n", text)
	compile(t, out)
	plain := parse(t, out, "<|im_start|>assistant\n", "Just text, no <b>call</b>.")
	if plain.Content != "Just text, no <b>call</b>." || len(plain.Calls) != 0 {
		t.Fatalf("%+v", plain)
	}
}

func TestBuildTagged(t *testing.T) {
	a := &Analysis{
		Tools: Tools{
			Format:    Format{Mode: FormatTagWithTagged, PerCallStart: "<tool_call>\n", PerCallEnd: "</tool_call>"},
			Function:  Function{NamePrefix: "<function=", NameSuffix: ">\n", Close: "</function>\n"},
			Arguments: Arguments{NamePrefix: "<parameter=", NameSuffix: ">\n", ValueSuffix: "\n</parameter>\n"},
		},
	}
	weather := Tool{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`)}
	out := a.Build(Params{Tools: []Tool{weather}, Choice: ChoiceRequired})
	if !out.Grammar || out.Lazy {
		t.Fatalf("required: grammar %v lazy %v", out.Grammar, out.Lazy)
	}
	text := "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
	m := parse(t, out, "", text)
	if m.Content != "Let me check.\n" || len(m.Calls) != 1 || m.Calls[0].Name != "get_weather" ||
		m.Calls[0].Arguments != `{"city":"Paris","days":3}` {
		t.Fatalf("%+v", m)
	}
	checkStream(t, out, "", text)
	compile(t, out)
}
