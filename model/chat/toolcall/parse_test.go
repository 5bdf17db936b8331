package toolcall

import (
	"reflect"
	"testing"
)

// Inputs are llama.cpp's own test cases (tests/test-chat.cpp); arguments come out compact, as
// llama.cpp's message_assist_call ({"arg1":1}).
const (
	argsArg1   = `{"arg1":1}`
	helloWorld = "Hello, world!\nWhat's up?"
	thinking   = "I'm\nthinking"
	callJSON   = `{"name": "special_function", "arguments": {"arg1": 1}}`
)

func call(name, args string) []Call { return []Call{{Name: name, Arguments: args}} }

var (
	hermes      = Syntax{Format: Hermes2Pro, Reasoning: ReasoningNone, ParseToolCalls: true}
	hermesThink = Syntax{Format: Hermes2Pro, Reasoning: ReasoningDeepseek, ParseToolCalls: true}
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		partial bool
		syn     Syntax
		want    Message
	}{
		// Hermes 2 Pro / Qwen 2.5.
		{"hermes partial fenced function_call", "```json\n<function_call> { \"name\" : \"python\"", true, hermes,
			Message{Calls: call("python", "")}},
		{"hermes partial name key", "Let's call something\n<tool_call>{\"name\"", true, hermesThink,
			Message{Content: "Let's call something\n"}},
		{"hermes partial name key cut", "Let's call something\n<tool_call>{\"name", true, hermesThink,
			Message{Content: "Let's call something\n"}},
		{"hermes thinking forced open", "I'm\nthinking</think>\n<tool_call>" + callJSON + "</tool_call>", false,
			Syntax{Format: Hermes2Pro, Reasoning: ReasoningDeepseek, ThinkingForcedOpen: true, ParseToolCalls: true},
			Message{Reasoning: thinking, Calls: call("special_function", argsArg1)}},
		{"hermes tool_call", "<tool_call>\n" + callJSON + "\n</tool_call>", false, hermes,
			Message{Calls: call("special_function", argsArg1)}},
		{"hermes content then call", helloWorld + "<tool_call>\n" + callJSON + "\n</tool_call>", false, hermes,
			Message{Content: helloWorld, Calls: call("special_function", argsArg1)}},
		{"hermes function=", `<function=special_function>{"arg1": 1}</function>`, false, hermes,
			Message{Calls: call("special_function", argsArg1)}},
		{"hermes function name=", "<function name=\"special_function\">\n{\"arg1\": 1}\n</function>", false, hermes,
			Message{Calls: call("special_function", argsArg1)}},
		{"hermes tool", "<tool>\n  " + callJSON + "\n</tool>", false, hermes, Message{Calls: call("special_function", argsArg1)}},
		{"hermes tools", "<tools>\n  " + callJSON + "\n</tools>", false, hermes, Message{Calls: call("special_function", argsArg1)}},
		{"hermes response", "<response>\n  " + callJSON + "\n</response>", false, hermes, Message{Calls: call("special_function", argsArg1)}},
		{"hermes xml fence response", "```xml\n<response>\n    " + callJSON + "\n</response>\n```", false, hermes,
			Message{Calls: call("special_function", argsArg1)}},
		{"hermes xml fence", "```xml\n  " + callJSON + "\n```", false, hermes, Message{Calls: call("special_function", argsArg1)}},
		{"hermes fence", "```\n  " + callJSON + "\n```", false, hermes, Message{Calls: call("special_function", argsArg1)}},
		{"hermes fence bare", "```\n" + callJSON + "\n```", false, hermes, Message{Calls: call("special_function", argsArg1)}},
		{"hermes json fence", "```json\n  " + callJSON + "\n```", false, hermes, Message{Calls: call("special_function", argsArg1)}},
		{"hermes json fence function_call",
			"```json\n\n                    <function_call> " + callJSON + " \n                    </function_call> \n``` ", false, hermes,
			Message{Calls: call("special_function", argsArg1)}},
		{"hermes json tag", "<json>\n  " + callJSON + "\n</json>", false, hermes, Message{Calls: call("special_function", argsArg1)}},
		{"hermes xml tag multiline", "<xml>\n  {\n    \"name\": \"special_function\", \"arguments\": {\"arg1\": 1}\n  }\n</xml>", false, hermes,
			Message{Calls: call("special_function", argsArg1)}},
		{"hermes JSON tag", "<JSON>\n  " + callJSON + "\n</JSON>", false, hermes, Message{Calls: call("special_function", argsArg1)}},
		{"hermes bare object", callJSON, false, hermes, Message{Calls: call("special_function", argsArg1)}},
		{"hermes bare object newline", "{\n  \"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}", false, hermes,
			Message{Calls: call("special_function", argsArg1)}},
		{"hermes two calls",
			"<tool_call>\n" + callJSON + "\n</tool_call>\n<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\":\"print('hello')\"}}\n</tool_call>",
			false, hermes, Message{Calls: []Call{{Name: "special_function", Arguments: argsArg1}, {Name: "python", Arguments: `{"code":"print('hello')"}`}}}},
		{"hermes two function= calls",
			"<function=special_function>{\"arg1\": 1}</function>\n<function=python>{\"code\":\"print('hello')\"}</function>",
			false, hermes, Message{Calls: []Call{{Name: "special_function", Arguments: argsArg1}, {Name: "python", Arguments: `{"code":"print('hello')"}`}}}},
		{"hermes call after text", "This is not a tool call:\n" + callJSON, false, hermes,
			Message{Content: "This is not a tool call:", Calls: call("special_function", argsArg1)}},
		{"hermes plain", helloWorld, false, hermes, Message{Content: helloWorld}},
		{"hermes thoughts kept (reasoning none)", "<think>" + thinking + "</think>" + helloWorld, false, hermes,
			Message{Content: "<think>" + thinking + "</think>" + helloWorld}},
		{"hermes thoughts", "<think>" + thinking + "</think>" + helloWorld, false, hermesThink,
			Message{Reasoning: thinking, Content: helloWorld}},
		{"hermes thoughts partial", "<think>" + thinking + "</think>" + helloWorld, true, hermesThink,
			Message{Reasoning: thinking, Content: helloWorld}},
		{"hermes thoughts in content, no tools", "<think>" + thinking + "</think>" + helloWorld + "\n```json\n{}```", false,
			Syntax{Format: Hermes2Pro, Reasoning: ReasoningDeepseek, ReasoningInContent: true},
			Message{Content: "<think>" + thinking + "</think>" + helloWorld + "\n```json\n{}```"}},
		{"hermes unopened thoughts", thinking + "</think>" + helloWorld, false, hermesThink,
			Message{Content: thinking + "</think>" + helloWorld}},
		{"hermes unopened thoughts, forced open", thinking + "</think>" + helloWorld, false,
			Syntax{Format: Hermes2Pro, Reasoning: ReasoningDeepseek, ThinkingForcedOpen: true, ParseToolCalls: true},
			Message{Reasoning: thinking, Content: helloWorld}},
		{"hermes call inside unclosed think", "<think><tool_call>nah uhg</tool_call>", false, hermesThink,
			Message{Reasoning: "<tool_call>nah uhg</tool_call>"}},

		// Llama 3.x.
		{"llama3 call", `{"name": "special_function", "parameters": {"arg1": 1}}`, false,
			Syntax{Format: Llama3, ParseToolCalls: true}, Message{Calls: call("special_function", argsArg1)}},
		{"llama3 typed call", `{"type": "function", "name": "special_function", "parameters": {"arg1": 1}}`, false,
			Syntax{Format: Llama3, ParseToolCalls: true}, Message{Calls: call("special_function", argsArg1)}},
		{"llama3 plain", helloWorld, false, Syntax{Format: Llama3, ParseToolCalls: true}, Message{Content: helloWorld}},
		{"llama3 partial call", `{"name": "special_function", "parameters": {"arg1": 1`, true,
			Syntax{Format: Llama3, ParseToolCalls: true}, Message{Calls: call("special_function", `{"arg1":`)}},
		{"llama3 python tag", `<|python_tag|>python.call(code="print('hey')")`, false,
			Syntax{Format: Llama3Builtin, ParseToolCalls: true}, Message{Calls: call("python", `{"code":"print('hey')"}`)}},
		{"llama3 code interpreter", `<|python_tag|>code_interpreter.call(code="print('hey')")`, false,
			Syntax{Format: Llama3Builtin, ParseToolCalls: true}, Message{Calls: call("code_interpreter", `{"code":"print('hey')"}`)}},
		{"llama3 python tag partial", `<|python_tag|>python.call(code="print('h`, true,
			Syntax{Format: Llama3Builtin, ParseToolCalls: true}, Message{}},

		// Mistral Nemo.
		{"mistral call", `[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]`, false,
			Syntax{Format: MistralNemo, ParseToolCalls: true},
			Message{Calls: []Call{{ID: "123456789", Name: "special_function", Arguments: argsArg1}}}},
		{"mistral plain", helloWorld, false, Syntax{Format: MistralNemo, ParseToolCalls: true}, Message{Content: helloWorld}},
		{"mistral partial prefix", "Sure[TOOL_CA", true, Syntax{Format: MistralNemo, ParseToolCalls: true}, Message{Content: "Sure"}},

		// Generic JSON.
		{"generic without tools keeps text", `{ "tool_call" : { "name" : "t`, true,
			Syntax{Format: Generic, Reasoning: ReasoningDeepseek, ThinkingForcedOpen: true},
			Message{Content: `{ "tool_call" : { "name" : "t`}},
		{"generic partial name", `{ "tool_call" : { "name" : "t`, true, Syntax{Format: Generic, ParseToolCalls: true}, Message{}},
		{"generic partial arguments",
			`{"tool_call": {"name": "puppeteer_screenshot", "arguments": {"name": "servethehome_homepage",`, true,
			Syntax{Format: Generic, ParseToolCalls: true}, Message{Calls: call("puppeteer_screenshot", `{"name":"servethehome_homepage",`)}},
		{"generic empty arguments", `{ "tool_call" : { "name" : "special_function"`, true,
			Syntax{Format: Generic, ParseToolCalls: true}, Message{Calls: call("special_function", "")}},
		{"generic cut arguments", `{ "tool_call" : { "name" : "special_function", "arguments" : { "arg`, true,
			Syntax{Format: Generic, ParseToolCalls: true}, Message{Calls: call("special_function", `{"arg`)}},
		{"generic response", "{\n  \"response\": \"Hello, world!\\nWhat's up?\"\n}", false,
			Syntax{Format: Generic, ParseToolCalls: true}, Message{Content: helloWorld}},
		{"generic tool_calls with id",
			"{\n  \"tool_calls\": [\n    {\n      \"name\": \"special_function\",\n      \"arguments\": {\n        \"arg1\": 1\n      },\n      \"id\": \"123456789\"\n    }\n  ]\n}",
			false, Syntax{Format: Generic, ParseToolCalls: true},
			Message{Calls: []Call{{ID: "123456789", Name: "special_function", Arguments: argsArg1}}}},
		{"generic object response", `{"response": {"a": [1, 2.50], "b": "é"}}`, false,
			Syntax{Format: Generic, ParseToolCalls: true},
			Message{Content: "{\n  \"a\": [\n    1,\n    2.5\n  ],\n  \"b\": \"é\"\n}"}},
		{"generic not JSON falls back to content", helloWorld, false, Syntax{Format: Generic, ParseToolCalls: true},
			Message{Content: helloWorld}},

		// Content only.
		{"content only thoughts", "<think>" + thinking + "</think>" + helloWorld, false,
			Syntax{Format: ContentOnly, Reasoning: ReasoningDeepseek}, Message{Reasoning: thinking, Content: helloWorld}},
		{"content only unfinished tag", "<thi", true, Syntax{Format: ContentOnly}, Message{}},
		{"content only leading space kept", "  <think>x</think>y", false, Syntax{Format: ContentOnly},
			Message{Content: "  y", Reasoning: "x"}},
		{"content only partial end tag", "<think>abc</th", true, Syntax{Format: ContentOnly}, Message{Reasoning: "abc"}},
		{"content only legacy in content", "<think>abc", true,
			Syntax{Format: ContentOnly, Reasoning: ReasoningDeepseekLegacy, ReasoningInContent: true}, Message{Content: "<think>abc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse(tt.text, tt.partial, tt.syn)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q, partial=%v)\n got %+v\nwant %+v", tt.text, tt.partial, got, tt.want)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	weather := []Tool{{Name: "get_weather"}}
	python := []Tool{{Name: "python"}}
	tests := []struct {
		src    string
		tools  []Tool
		none   bool
		schema bool
		want   Format
	}{
		{"{{ '<tool_call>' }}", nil, false, false, Hermes2Pro},
		{"{{ '<tool_call>' }}", weather, false, true, Generic},
		{"<|start_header_id|>ipython<|end_header_id|>", nil, false, false, Llama3},
		{"<|start_header_id|>ipython<|end_header_id|><|python_tag|>", python, false, false, Llama3Builtin},
		{"<|start_header_id|>ipython<|end_header_id|><|python_tag|>", weather, false, false, Llama3},
		{"[TOOL_CALLS]", weather, false, false, MistralNemo},
		{"[TOOL_CALLS]", weather, true, false, ContentOnly},
		{"[TOOL_CALLS]", nil, false, false, ContentOnly},
		{"{{ messages }}", weather, false, false, Generic},
		{"{{ messages }}", nil, false, false, ContentOnly},
	}
	for _, tt := range tests {
		if got := Detect(tt.src, tt.tools, tt.none, tt.schema); got != tt.want {
			t.Errorf("Detect(%q, %d tools, none=%v, schema=%v) = %v, want %v", tt.src, len(tt.tools), tt.none, tt.schema, got, tt.want)
		}
	}
}

func TestReasoningFormatNames(t *testing.T) {
	for name, want := range map[string]string{"auto": "deepseek", "none": "none", "deepseek": "deepseek", "deepseek-legacy": "deepseek-legacy"} {
		f, err := ParseReasoningFormat(name)
		if err != nil || f.String() != want {
			t.Errorf("ParseReasoningFormat(%q) = %v, %v; want %s", name, f, err, want)
		}
	}
	if _, err := ParseReasoningFormat("openai"); err == nil {
		t.Error("an unknown reasoning format was accepted")
	}
}
