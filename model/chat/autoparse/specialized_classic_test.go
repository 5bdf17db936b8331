package autoparse

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

func TestSpecializedClassicDispatch(t *testing.T) {
	for _, c := range []struct {
		src  string
		want Builder
	}{
		{"[SYSTEM_PROMPT] [TOOL_CALLS] [ARGS]", ministral3{}},
		{"[SYSTEM_PROMPT] [TOOL_CALLS] [ARGS] [CALL_ID]", nil}, // Mistral Small 3.2: the autoparser
		{"[SYSTEM_PROMPT] [TOOL_CALLS] [ARGS] <|channel|>", ministral3{}},
		{"<|start|>assistant<|channel|>final", gptOSS{}},
		{">>>all >>>${recipient}", functionaryV32{}},
		{"<|tool_calls_section_begin|><|tool_call_begin|>", kimiK2{}},
		{"<|tool_list_start|>[]<|tool_list_end|>", lfm2{}},
		{"List of tools: [ <think>", lfm2{think: true}},
		{"List of tools: [ <|tool_list_start|>", nil},
		{"<|role_sep|> <|message_sep|>", gigaChatV3{}},
		{"<|role_sep|> <|message_sep|> <|function_call|>", nil},
		{"<|im_start|>", nil},
	} {
		if got := specializedClassic(c.src); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %#v, want %#v", c.src, got, c.want)
		}
	}
}

// grammarAccepts compiles out's grammar as the server does and checks that it matches all of
// text (for a lazy grammar, the text from the trigger on).
func grammarAccepts(t *testing.T, out Output, text string) {
	t.Helper()
	src, err := peg.Grammar(out.Parser, out.Lazy, func(s json.RawMessage) (string, error) { return grammar.FromJSONSchema(s) })
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	m, err := g.NewMatcher("root")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Accept(text); err != nil || !m.Done() {
		t.Fatalf("grammar does not match %q (%v):\n%s", text, err, src)
	}
}

// TestSpecializedClassicGrammars builds each format with tool_choice auto (a lazy grammar
// from the trigger words) and required (a grammar over the whole output, built without the
// generation prompt as the server builds it), and checks the grammars accept a call.
func TestSpecializedClassicGrammars(t *testing.T) {
	tools := []Tool{specialFunction, {Name: "empty_args"}}
	for _, c := range []struct {
		name     string
		b        Builder
		triggers []string
		lazy     string // the output from the trigger on
		required string // a whole output
	}{
		{"ministral3", ministral3{}, []string{"[TOOL_CALLS]"},
			`[TOOL_CALLS]special_function[ARGS]{"arg1": 1}`,
			`[THINK]hm[/THINK]Hi[TOOL_CALLS]special_function[ARGS]{"arg1": 1}`},
		{"gpt-oss", gptOSS{}, []string{" to=functions.", "<|channel|>commentary to=functions.", "<|channel|>analysis to=functions."},
			` to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{"arg1": 1}`,
			`<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>commentary to=functions.special_function<|message|>{"arg1": 1}`},
		{"functionary", functionaryV32{}, []string{"special_function", "empty_args"},
			"special_function\n{\"arg1\": 1}empty_args\n{}",
			"special_function\n{\"arg1\": 1}"},
		{"kimi-k2", kimiK2{}, []string{"<|tool_call_begin|>"},
			`<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_end|><|tool_calls_section_end|>`,
			`<think>hm</think>Hi<|tool_calls_section_begin|><|tool_call_begin|>functions.empty_args:3<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>`},
		{"lfm2", lfm2{think: true}, []string{"<|tool_call_start|>"},
			`<|tool_call_start|>[special_function(arg1=1), empty_args()]<|tool_call_end|>`,
			`<think>hm</think>Hi<|tool_call_start|>[empty_args()]<|tool_call_end|>`},
		{"gigachat3", gigaChatV3{}, []string{gigaCallStart},
			gigaCallStart + `{"name": "special_function", "arguments": {"arg1": 1}}`,
			"Hi" + gigaCallStart + `{"name": "empty_args", "arguments": {}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			auto := c.b.Build(Params{Tools: tools, ExtractReasoning: true, Parallel: true, GenerationPrompt: "<gp>"})
			if !auto.Grammar || !auto.Lazy || !reflect.DeepEqual(auto.Triggers, c.triggers) {
				t.Fatalf("auto: grammar %v lazy %v triggers %q", auto.Grammar, auto.Lazy, auto.Triggers)
			}
			grammarAccepts(t, auto, c.lazy)
			req := c.b.Build(Params{Tools: tools, Choice: ChoiceRequired, ExtractReasoning: true})
			if !req.Grammar || req.Lazy || req.Triggers != nil {
				t.Fatalf("required: grammar %v lazy %v triggers %q", req.Grammar, req.Lazy, req.Triggers)
			}
			grammarAccepts(t, req, c.required)
			if none := c.b.Build(Params{Tools: tools, Choice: ChoiceNone}); none.Grammar {
				t.Fatal("tool_choice none: a grammar")
			}
		})
	}
}

// TestSpecializedClassicResponseFormat checks the formats that constrain response_format
// themselves: the grammar covers the whole output and reads the JSON as content.
func TestSpecializedClassicResponseFormat(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"]}`)
	for _, c := range []struct {
		name string
		b    Builder
		text string
	}{
		{"ministral3", ministral3{}, "```json\n{\"amount\": 1.5}\n```"},
		{"gpt-oss", gptOSS{}, `<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final <|constrain|>json<|message|>{"amount": 1.5}`},
		{"lfm2", lfm2{}, `{"amount": 1.5}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := c.b.Build(Params{ResponseSchema: schema, ExtractReasoning: true})
			if !out.Grammar || out.Lazy {
				t.Fatalf("grammar %v lazy %v", out.Grammar, out.Lazy)
			}
			grammarAccepts(t, out, c.text)
			if m := parse(t, out, "", c.text); m.Content != `{"amount": 1.5}` {
				t.Fatalf("%+v", m)
			}
		})
	}
}

// TestLFM2PythonArguments reads Python-style arguments: single-quoted strings with escapes,
// nested dicts and lists, Python and JSON literals, and streams them growing.
func TestLFM2PythonArguments(t *testing.T) {
	tool := Tool{Name: "set", Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"opts":{"type":"object"},"on":{"type":"boolean"}}}`)}
	out := lfm2{}.Build(Params{Tools: []Tool{tool}, GenerationPrompt: "<|im_start|>assistant\n"})
	text := `Sure.<|tool_call_start|>[set(on=True, name='it\'s "x"', opts={'a': [1, None], "b": false})]<|tool_call_end|>`
	m := parse(t, out, "<|im_start|>assistant\n", text)
	if m.Content != "Sure." || len(m.Calls) != 1 || m.Calls[0].Name != "set" {
		t.Fatalf("%+v", m)
	}
	var got, want any
	_ = json.Unmarshal([]byte(`{"on": true, "name": "it's \"x\"", "opts": {"a": [1, null], "b": false}}`), &want)
	if err := json.Unmarshal([]byte(m.Calls[0].Arguments), &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("arguments %s (%v)", m.Calls[0].Arguments, err)
	}
	checkStream(t, out, "<|im_start|>assistant\n", text)
}
