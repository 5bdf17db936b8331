package toolcall

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
)

var weatherTools = []Tool{
	{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
	{Name: "get_time"},
}

// accepts reports whether the constraint's grammar matches text completely.
func accepts(t *testing.T, c Constraint, text string) bool {
	t.Helper()
	src, err := grammar.FromJSONSchema(c.Schema)
	if err != nil {
		t.Fatalf("schema %s: %v", c.Schema, err)
	}
	g, err := grammar.Parse(c.Grammar(src))
	if err != nil {
		t.Fatalf("grammar %s: %v", c.Grammar(src), err)
	}
	m, err := g.NewMatcher("root")
	if err != nil {
		t.Fatal(err)
	}
	return m.Accept(text) == nil && m.Done()
}

func TestConstraint(t *testing.T) {
	const (
		hermesCall  = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
		genericCall = `{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}`
	)
	tests := []struct {
		name                       string
		format                     Format
		required, parallel, forced bool
		response                   string
		accept, reject             []string
	}{
		{name: "hermes required", format: Hermes2Pro, required: true,
			accept: []string{hermesCall, `<tool_call>{"name": "get_time", "arguments": {}}</tool_call>`},
			reject: []string{"Hello", hermesCall + hermesCall, `<tool_call>{"name": "other", "arguments": {}}</tool_call>`}},
		{name: "hermes required parallel", format: Hermes2Pro, required: true, parallel: true,
			accept: []string{hermesCall, hermesCall + "\n" + hermesCall}},
		{name: "hermes required after thinking", format: Hermes2Pro, required: true, forced: true,
			accept: []string{hermesCall, "</think>\n\n" + hermesCall}},
		{name: "llama3 required", format: Llama3, required: true,
			accept: []string{`{"name": "get_weather", "parameters": {"city": "Paris"}}`},
			reject: []string{`{"name": "get_weather", "arguments": {"city": "Paris"}}`}},
		{name: "mistral required", format: MistralNemo, required: true,
			accept: []string{`[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcDEF123"}]`},
			reject: []string{`[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_1"}]`}},
		{name: "hermes auto: lazy from <tool_call>", format: Hermes2Pro, forced: true,
			accept: []string{hermesCall}, reject: []string{"</think>\n\n" + hermesCall, "Hello"}},
		{name: "llama3 auto: lazy from {", format: Llama3,
			accept: []string{`{"name": "get_time", "parameters": {}}`}},
		{name: "mistral auto: lazy from [TOOL_CALLS]", format: MistralNemo,
			accept: []string{`[TOOL_CALLS][{"name": "get_time", "arguments": {}, "id": "abcDEF123"}]`}},
		{name: "generic auto", format: Generic,
			accept: []string{genericCall, `{"response": "Sunny."}`},
			reject: []string{"Sunny.", `{"tool_call": {"name": "get_weather", "arguments": {}}}`}},
		{name: "generic required", format: Generic, required: true,
			accept: []string{genericCall}, reject: []string{`{"response": "Sunny."}`}},
		{name: "generic parallel", format: Generic, required: true, parallel: true,
			accept: []string{`{"tool_calls": [{"name": "get_time", "arguments": {}, "id": "c1c1"}]}`},
			reject: []string{genericCall}},
		{name: "generic response schema", format: Generic, response: `{"type":"object","properties":{"temp":{"type":"integer"}},"required":["temp"]}`,
			accept: []string{`{"response": {"temp": 18}}`}, reject: []string{`{"response": "18"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := NewConstraint(tt.format, weatherTools, tt.required, tt.parallel, tt.forced, json.RawMessage(tt.response))
			if !ok {
				t.Fatal("no constraint")
			}
			for _, s := range tt.accept {
				if !accepts(t, c, s) {
					t.Errorf("rejects %q", s)
				}
			}
			for _, s := range tt.reject {
				if accepts(t, c, s) {
					t.Errorf("accepts %q", s)
				}
			}
		})
	}
	if _, ok := NewConstraint(ContentOnly, weatherTools, false, false, false, nil); ok {
		t.Error("a content-only format is constrained")
	}
	// Without a required call the call formats are constrained lazily, from their opener on.
	for f, want := range map[Format][]Trigger{
		Hermes2Pro:  {{Word: "<tool_call>"}},
		Llama3:      {{Word: `{"`, AtStart: true}, {Word: `{ "`, AtStart: true}},
		MistralNemo: {{Word: "[TOOL_CALLS]"}},
		Generic:     nil, // always constrained from the start
	} {
		c, ok := NewConstraint(f, weatherTools, false, false, false, nil)
		if !ok || !slices.Equal(c.Triggers, want) {
			t.Errorf("%v with tool_choice auto: triggers %v (constrained %v), want %v", f, c.Triggers, ok, want)
		}
		if c, _ := NewConstraint(f, weatherTools, true, false, false, nil); len(c.Triggers) > 0 {
			t.Errorf("%v with a required call is lazy", f)
		}
	}
	if _, ok := NewConstraint(Generic, nil, true, false, false, nil); ok {
		t.Error("a constraint without tools")
	}
}
