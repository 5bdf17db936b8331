package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// Templates for the tool-call tests. Like real ones, they render tool calls in their own
// syntax, which llama.cpp's autoparser (and ours) reads off the template.
const (
	// hermesTemplate writes each call as <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>,
	// as Hermes 2 Pro and Qwen 2.5 do, and earlier reasoning between <think> and </think> as
	// Qwen 3 does.
	hermesTemplate = `{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{% if m.content %}{{ m.content }}{% endif %}{% for tc in m.tool_calls %}
<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% endfor %}{%- if tools %}<tools>{{ tools | tojson }}</tools> answer with <tool_call>{"name": ..., "arguments": ...}</tool_call>
{% endif %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`
	// hermesFreeTemplate is plain ChatML without any tool syntax.
	hermesFreeTemplate = `{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

	weatherTools = `"tools":[
		{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
		{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}}]`
)

// hermesOutput is a Hermes 2 Pro answer in pieces: text, then a tool call split mid-tag;
// hermesCall is the call alone.
var (
	hermesOutput = []string{"Let me check.", "\n<tool", "_call>\n{\"name\": \"get_", "weather\", \"arguments\": {\"city\": ", "\"Pa", "ris\"}}\n</tool_call>"}
	hermesCall   = []string{"<tool_call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"}
)

func weatherParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "stories260K",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools: []openai.ChatCompletionToolParam{{
			Function: openai.FunctionDefinitionParam{
				Name:        "get_weather",
				Description: openai.String("Weather of a city"),
				Parameters: openai.FunctionParameters{
					"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"},
				},
			},
		}},
	}
}

// TestChatToolCallsClient checks tool calls end to end with the openai-go client: a fake model
// writes a Hermes 2 Pro tool call, which comes back as tool_calls, whole and streamed.
func TestChatToolCallsClient(t *testing.T) {
	h := newTemplateHarness(t, hermesTemplate, nil)
	h.fake.output = hermesOutput
	ts := httptest.NewServer(h.h)
	defer ts.Close()
	client := openaiClient(ts.URL)
	ctx := context.Background()

	resp, err := client.Chat.Completions.New(ctx, weatherParams())
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != "Let me check.\n" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("choice %s", ch.RawJSON())
	}
	call := ch.Message.ToolCalls[0]
	if call.Type != "function" || call.Function.Name != "get_weather" || call.Function.Arguments != `{"city": "Paris"}` || len(call.ID) != 32 {
		t.Errorf("tool call %s", call.RawJSON())
	}
	if !strings.Contains(h.fake.tok.Detokenize(h.fake.lastTask(t).Prompt, false, true), `<tools>[{"type": "function", "function": {"name": "get_weather"`) {
		t.Error("the template did not render the tools")
	}
	if p := h.fake.lastTask(t).Params; p.Grammar == nil || !slices.Equal(p.GrammarTriggers, []engine.GrammarTrigger{{Word: "<tool_call>\n"}}) {
		t.Errorf("tool_choice auto: grammar %v triggers %v, want a grammar lazy from the template's <tool_call>\\n", p.Grammar != nil, p.GrammarTriggers)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, weatherParams())
	var acc openai.ChatCompletionAccumulator
	var toolChunks []openai.ChatCompletionChunkChoiceDeltaToolCall
	for stream.Next() {
		c := stream.Current()
		acc.AddChunk(c)
		if len(c.Choices) == 0 {
			continue
		}
		d := c.Choices[0].Delta
		if strings.ContainsAny(d.Content, "<{") {
			t.Errorf("tool-call markup streamed as content: %q", d.Content)
		}
		toolChunks = append(toolChunks, d.ToolCalls...)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	got := acc.Choices[0]
	if got.FinishReason != "tool_calls" || got.Message.Content != "Let me check.\n" || len(got.Message.ToolCalls) != 1 ||
		got.Message.ToolCalls[0].Function.Name != "get_weather" || got.Message.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` {
		t.Fatalf("accumulated %s", got.RawJSON())
	}
	// The call is announced (index, id, type, name, no arguments), then its arguments follow.
	if len(toolChunks) < 3 {
		t.Fatalf("%d tool-call chunks", len(toolChunks))
	}
	first := toolChunks[0]
	if first.ID == "" || first.Type != "function" || first.Function.Name != "get_weather" || first.Function.Arguments != "" {
		t.Errorf("first tool-call chunk %s", first.RawJSON())
	}
	for _, c := range toolChunks[1:] {
		if c.Index != 0 || c.ID != "" || c.Function.Name != "" || c.Function.Arguments == "" {
			t.Errorf("argument chunk %s", c.RawJSON())
		}
	}
}

// TestChatToolFormats checks each format end to end: the model output and the request's tool
// settings give the expected message, finish reason and output constraint.
func TestChatToolFormats(t *testing.T) {
	tests := []struct {
		name, template string
		shared         string // a template of ../shared's upstream models/templates, instead
		output         []string
		extra          string // more request fields
		wantContent    any    // string or nil (null)
		wantCalls      string // name:arguments:id of the calls, ";"-separated ("*" id: generated)
		wantFinish     string
		grammarHas     []string // substrings of the output grammar; nil: no grammar
		promptHas      string
	}{
		{name: "llama3", shared: "meta-llama-Llama-3.1-8B-Instruct", output: []string{`{"name": "get_weather", `, `"parameters": {"city": "Paris"}}`},
			wantContent: nil, wantCalls: `get_weather:{"city": "Paris"}:*`, wantFinish: "tool_calls"},
		{name: "mistral", shared: "mistralai-Mistral-Nemo-Instruct-2407",
			output:      []string{"[TOOL_CALLS]", `[{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcDEF123"}]`},
			wantContent: nil, wantCalls: `get_weather:{"city": "Paris"}:abcDEF123`, wantFinish: "tool_calls"},
		// A template that lists the tools but never renders a call has no call syntax to read:
		// the answer is content (llama.cpp's old generic JSON format is gone).
		{name: "tools listed, no call syntax", template: toolListingTemplate, output: []string{`{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}`},
			wantContent: `{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}`, wantFinish: "stop",
			promptHas: "Tools: get_weather get_time"},
		// ChatML (the fallback template) shows no tool syntax: as llama-server's autoparser,
		// no grammar, no tool-call parsing, whatever tool_choice says.
		{name: "chatml auto", output: []string{`{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}`},
			wantContent: `{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}`, wantFinish: "stop"},
		{name: "chatml required", output: hermesCall, extra: `"tool_choice":"required","parallel_tool_calls":true`,
			wantContent: strings.Join(hermesCall, ""), wantFinish: "stop"},
		{name: "hermes tool_choice none", template: hermesTemplate, output: hermesOutput, extra: `"tool_choice":"none"`,
			wantContent: strings.Join(hermesOutput, ""), wantFinish: "stop"},
		{name: "hermes required", template: hermesTemplate, output: hermesCall, extra: `"tool_choice":"required"`,
			wantContent: nil, wantCalls: `get_weather:{"city": "Paris"}:*`, wantFinish: "tool_calls",
			grammarHas: []string{`"<tool_call>\n"`, `get_weather`, `get_time`}},
		{name: "hermes named function", template: hermesTemplate, output: hermesCall,
			extra:       `"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":true`,
			wantContent: nil, wantCalls: `get_weather:{"city": "Paris"}:*`, wantFinish: "tool_calls", grammarHas: []string{`get_weather`, `)+`}},
		{name: "two hermes calls", template: hermesTemplate, extra: `"parallel_tool_calls":true`,
			output: []string{"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", "\n",
				"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"},
			wantContent: nil, wantCalls: `get_time:{}:*;get_weather:{"city": "Rome"}:*`, wantFinish: "tool_calls"},
		// Cut short before the function name is whole: no call, the text before it is content, and
		// the unfinished call is dropped (llama-server parses the end leniently too).
		{name: "cut-off call", template: hermesTemplate, output: hermesOutput, extra: `"max_tokens":3`,
			wantContent: "Let me check.\n", wantFinish: "length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := tt.template
			if tt.shared != "" {
				tmpl = sharedTemplate(t, tt.shared)
			}
			h := newTemplateHarness(t, tmpl, nil)
			h.fake.output = tt.output
			body := `{"messages":[{"role":"user","content":"Weather in Paris?"}],` + weatherTools
			if tt.extra != "" {
				body += "," + tt.extra
			}
			rec := h.do(t, "POST", "/v1/chat/completions", body+"}")
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			v := decodeJSON(t, rec.Body.Bytes())
			if got := lookup(t, v, "choices.0.message.content"); got != tt.wantContent {
				t.Errorf("content %#v, want %#v", got, tt.wantContent)
			}
			if got := lookup(t, v, "choices.0.finish_reason"); got != tt.wantFinish {
				t.Errorf("finish_reason %v, want %s", got, tt.wantFinish)
			}
			var calls []string
			if tc, ok := lookup(t, v, "choices.0.message").(map[string]any)["tool_calls"].([]any); ok {
				for _, c := range tc {
					c := c.(map[string]any)
					fn := c["function"].(map[string]any)
					id := c["id"].(string)
					if len(id) == 32 && !strings.Contains(tt.wantCalls, ":"+id) {
						id = "*"
					}
					calls = append(calls, fn["name"].(string)+":"+fn["arguments"].(string)+":"+id)
					if c["type"] != "function" {
						t.Errorf("tool call type %v", c["type"])
					}
				}
			}
			if got := strings.Join(calls, ";"); got != tt.wantCalls {
				t.Errorf("tool calls %q, want %q", got, tt.wantCalls)
			}
			task := h.fake.lastTask(t)
			switch {
			case tt.grammarHas == nil && task.Params.Grammar != nil && len(task.Params.GrammarTriggers) == 0:
				t.Errorf("unexpected grammar:\n%s", task.Params.Grammar.Source())
			case tt.grammarHas != nil && task.Params.Grammar == nil:
				t.Error("no grammar")
			case tt.grammarHas != nil:
				for _, s := range tt.grammarHas {
					if !strings.Contains(task.Params.Grammar.Source(), s) {
						t.Errorf("grammar lacks %q:\n%s", s, task.Params.Grammar.Source())
					}
				}
				if tt.name == "hermes named function" && strings.Contains(task.Params.Grammar.Source(), "get_time") {
					t.Errorf("the grammar allows another tool than the one named:\n%s", task.Params.Grammar.Source())
				}
			}
			if tt.promptHas != "" && !strings.Contains(h.fake.tok.Detokenize(task.Prompt, false, true), tt.promptHas) {
				t.Errorf("prompt lacks %q", tt.promptHas)
			}
		})
	}
}

// TestToolsIgnoredPrompt checks that a template without tool syntax (ChatML, the fallback)
// gets the same prompt with tools as without, for every tool_choice, and no output grammar, as
// llama-server b10587 renders it.
func TestToolsIgnoredPrompt(t *testing.T) {
	prompt := func(h *harness, extra string) (string, bool) {
		t.Helper()
		body := `{"messages":[{"role":"user","content":"Weather in Paris?"}]` + extra + "}"
		if rec := h.do(t, "POST", "/v1/chat/completions", body); rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		task := h.fake.lastTask(t)
		return h.fake.tok.Detokenize(task.Prompt, false, true), task.Params.Grammar != nil
	}
	h := newTemplateHarness(t, "", nil)
	h.fake.output = []string{"Sunny."}
	want, _ := prompt(h, "")
	if want != "<s> <|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n" {
		t.Fatalf("ChatML prompt %q", want)
	}
	for _, extra := range []string{"," + weatherTools, "," + weatherTools + `,"tool_choice":"auto"`,
		"," + weatherTools + `,"tool_choice":"required"`, "," + weatherTools + `,"tool_choice":"required","parallel_tool_calls":true`,
		"," + weatherTools + `,"tool_choice":{"type":"function","function":{"name":"get_time"}}`} {
		got, grammar := prompt(h, extra)
		if got != want || grammar {
			t.Errorf("%s: prompt %q (grammar %v), want %q without grammar", extra, got, grammar, want)
		}
	}

	// A template that lists the tools but renders no calls: its own prompt, nothing added, no
	// grammar (it has no call syntax to constrain to).
	h = newTemplateHarness(t, toolListingTemplate, nil)
	h.fake.output = []string{"Sunny."}
	got, grammar := prompt(h, ","+weatherTools+`,"tool_choice":"required"`)
	if !strings.HasPrefix(got, "<s> <|im_start|>system\nTools: get_weather get_time<|im_end|>\n<|im_start|>user\nWeather in Paris?") || grammar {
		t.Errorf("tool-listing template: prompt %q (grammar %v), want the template's own prompt and no grammar", got, grammar)
	}
}

func TestChatToolErrors(t *testing.T) {
	h := newTemplateHarness(t, hermesTemplate, nil)
	base := `{"messages":[{"role":"user","content":"Hi"}],` + weatherTools + ","
	for _, tt := range []struct{ body, want string }{
		{base + `"tool_choice":"maybe"}`, "Invalid tool_choice: maybe"},
		{base + `"tool_choice":{"type":"function","function":{"name":"get_news"}}}`, `'tool_choice' names the function "get_news", which is not in 'tools'`},
		{base + `"tool_choice":{"type":"custom"}}`, `'tool_choice' must be "auto", "none", "required"`},
		{base + `"grammar":"root ::= \"x\""}`, "Cannot use custom grammar constraints with tools."},
		{base + `"logprobs":true,"stream":true}`, "logprobs is not supported with tools + stream"},
		{base + `"reasoning_format":"loud"}`, `'reasoning_format': unknown reasoning format "loud"`},
	} {
		rec := h.do(t, "POST", "/v1/chat/completions", tt.body)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d: %s", tt.body, rec.Code, rec.Body)
			continue
		}
		if msg := lookup(t, decodeJSON(t, rec.Body.Bytes()), "error.message").(string); !strings.Contains(msg, tt.want) {
			t.Errorf("%s: message %q, want it to contain %q", tt.body, msg, tt.want)
		}
	}
	// With tool_choice "none" a grammar is fine.
	rec := h.do(t, "POST", "/v1/chat/completions", base+`"tool_choice":"none","grammar":"root ::= \"x\"","max_tokens":1}`)
	if rec.Code != http.StatusOK {
		t.Errorf("grammar with tool_choice none: %d %s", rec.Code, rec.Body)
	}
}
