package server

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go"
)

// timeToolSchema is the parameter schema of the get_time tool the engine test offers.
var timeToolSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"timezone": map[string]any{"type": "string"},
		"hour24":   map[string]any{"type": "boolean"},
	},
	"required":             []any{"timezone", "hour24"},
	"additionalProperties": false,
}

// requiredToolParams asks stories260K, greedily, for the time in Tokyo with two tools on offer
// and tool_choice "required".
func requiredToolParams() openai.ChatCompletionNewParams {
	p := weatherParams()
	p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What time is it in Tokyo?")}
	p.Tools = append(p.Tools, openai.ChatCompletionToolParam{Function: openai.FunctionDefinitionParam{
		Name:        "get_time",
		Description: openai.String("The time in a timezone"),
		Parameters:  openai.FunctionParameters(timeToolSchema),
	}})
	p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
	p.Temperature = openai.Float(0)
	p.Seed = openai.Int(42)
	return p
}

// checkArguments fails the test unless args is a JSON object that satisfies schema: an object
// schema whose properties have scalar types, with required and additionalProperties.
func checkArguments(t *testing.T, args string, schema map[string]any) {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(args), &obj); err != nil {
		t.Fatalf("arguments %q are not a JSON object: %v", args, err)
	}
	props := schema["properties"].(map[string]any)
	for _, name := range schema["required"].([]any) {
		if _, ok := obj[name.(string)]; !ok {
			t.Errorf("arguments %s lack the required %q", args, name)
		}
	}
	for name, v := range obj {
		p, ok := props[name]
		if !ok {
			t.Errorf("arguments %s have %q, which the schema does not allow", args, name)
			continue
		}
		ok = false
		switch p.(map[string]any)["type"] {
		case "string":
			_, ok = v.(string)
		case "boolean":
			_, ok = v.(bool)
		case "number":
			_, ok = v.(float64)
		}
		if !ok {
			t.Errorf("arguments %s: %q = %#v is not a %v", args, name, v, p.(map[string]any)["type"])
		}
	}
}

// toolListingTemplate is ChatML that names the tools in a system turn but renders no tool
// calls: the autoparser finds no call syntax, so answers are plain content.
const toolListingTemplate = `{%- if tools %}<|im_start|>system
Tools:{% for t in tools %} {{ t.function.name }}{% endfor %}<|im_end|>
{% endif %}{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// wrappedTemplate writes an answer between <answer> and </answer>, and calls as a JSON list
// between <calls> and </calls>: an output is one or the other from its first character.
const wrappedTemplate = `{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.role == 'assistant' %}{% if m.tool_calls %}<calls>[{% for tc in m.tool_calls %}{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}{% if not loop.last %}, {% endif %}{% endfor %}]</calls>{% else %}<answer>{{ m.content }}</answer>{% endif %}{% else %}{{ m.content }}{% endif %}<|im_end|>
{% endfor %}{%- if tools %}<|im_start|>system
Tools:{% for t in tools %} {{ t.function.name }}{% endfor %}<|im_end|>
{% endif %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// TestToolCallsEngine calls tools end to end with the openai-go client on the real engine:
// stories260K under a template with Hermes's call syntax, which tool_choice "required"
// constrains by the grammar built from the template's analysis to a call of one of the tools.
// Greedy, the call is the same whole and streamed, and its arguments fit the tool's schema.
func TestToolCallsEngine(t *testing.T) {
	ts := serveStories(t, Config{Alias: "stories260K", ChatTemplate: mustTemplate(t, wrappedTemplate)})
	client := openaiClient(ts.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// stories260K's greedy call; the server re-encodes the arguments compactly.
	// The arguments are the JSON text as the model wrote it, as llama-server passes it on.
	const wantName, wantArgs = "get_weather", "{ \"city\" : \"Yes, you can.\"\n\n                    }"

	resp, err := client.Chat.Completions.New(ctx, requiredToolParams())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("choices %s", resp.RawJSON())
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != "" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("choice %s, want one tool call and finish_reason tool_calls", ch.RawJSON())
	}
	if raw := ch.Message.JSON.Content.Raw(); raw != "null" {
		t.Errorf("content %s, want null beside a tool call", raw)
	}
	call := ch.Message.ToolCalls[0]
	if call.Type != "function" || call.Function.Name != wantName || len(call.ID) != 32 {
		t.Errorf("tool call %s, want a function call of %s with a 32-character id", call.RawJSON(), wantName)
	}
	checkArguments(t, call.Function.Arguments, map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"},
	})
	if call.Function.Arguments != wantArgs {
		t.Errorf("arguments %s, want %s", call.Function.Arguments, wantArgs)
	}
	if u := resp.Usage; u.PromptTokens != 94 || u.CompletionTokens != 123 || u.TotalTokens != 217 {
		t.Errorf("usage %s, want 94 prompt and 123 completion tokens", u.RawJSON())
	}

	stream := client.Chat.Completions.NewStreaming(ctx, requiredToolParams())
	var acc openai.ChatCompletionAccumulator
	var deltas []openai.ChatCompletionChunkChoiceDeltaToolCall
	var finishes []string
	for stream.Next() {
		c := stream.Current()
		if !acc.AddChunk(c) {
			t.Fatalf("the accumulator rejected %s", c.RawJSON())
		}
		for _, choice := range c.Choices {
			if choice.Delta.Content != "" {
				t.Errorf("content streamed beside a required tool call: %q", choice.Delta.Content)
			}
			deltas = append(deltas, choice.Delta.ToolCalls...)
			if choice.FinishReason != "" {
				finishes = append(finishes, choice.FinishReason)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(finishes, []string{"tool_calls"}) {
		t.Errorf("streamed finish reasons %q, want one tool_calls", finishes)
	}
	// The first delta announces the call (index, id, type, name, empty arguments); the rest
	// carry its arguments in pieces, which concatenate to the non-streamed arguments.
	if len(deltas) < 2 {
		t.Fatalf("%d tool-call deltas", len(deltas))
	}
	first := deltas[0]
	if first.Index != 0 || len(first.ID) != 32 || first.Type != "function" || first.Function.Name != wantName || first.Function.Arguments != "" {
		t.Errorf("first tool-call delta %s", first.RawJSON())
	}
	var args strings.Builder
	for _, d := range deltas[1:] {
		if d.Index != 0 || d.ID != "" || d.Function.Name != "" || d.Function.Arguments == "" {
			t.Errorf("argument delta %s", d.RawJSON())
		}
		args.WriteString(d.Function.Arguments)
	}
	if args.String() != call.Function.Arguments {
		t.Errorf("streamed arguments %s, non-streamed %s", args.String(), call.Function.Arguments)
	}
	if len(acc.Choices) != 1 || len(acc.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("accumulated %s", acc.RawJSON())
	}
	got := acc.Choices[0].Message.ToolCalls[0]
	if got.Function.Name != call.Function.Name || got.Function.Arguments != call.Function.Arguments || got.ID != first.ID {
		t.Errorf("accumulated call %s, non-streamed %s", got.RawJSON(), call.RawJSON())
	}
	if acc.Choices[0].FinishReason != "tool_calls" || acc.Choices[0].Message.Content != "" {
		t.Errorf("accumulated choice %s", acc.Choices[0].RawJSON())
	}
}

// webUIToolParams is the request llama.cpp's web UI sends on stories260K: its two browser tools
// (get_datetime without parameters, get_info) with every chat request, greedy, 24 tokens.
func webUIToolParams(choice string) openai.ChatCompletionNewParams {
	noParams := openai.FunctionParameters{"type": "object", "properties": map[string]any{}}
	return openai.ChatCompletionNewParams{
		Model:    "stories260K",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What time is it right now?")},
		Tools: []openai.ChatCompletionToolParam{
			{Function: openai.FunctionDefinitionParam{Name: "get_datetime", Description: openai.String("Get the current date and time"), Parameters: noParams}},
			{Function: openai.FunctionDefinitionParam{Name: "get_info", Description: openai.String("Get information about the browser"), Parameters: noParams}},
		},
		ToolChoice:  openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String(choice)},
		Temperature: openai.Float(0),
		MaxTokens:   openai.Int(24),
	}
}

// TestToolsIgnoredEngine checks, on the real engine, llama-server b10587's answer to the web
// UI's request: stories260K's ChatML shows no tool syntax, so the prompt is ChatML's own (55
// tokens, no tool text), the answer is free content (no grammar), streamed as content deltas
// without tool-call deltas; tool_choice "required" and parallel calls change nothing there.
func TestToolsIgnoredEngine(t *testing.T) {
	ts := serveStories(t, Config{Alias: "stories260K"})
	client := openaiClient(ts.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// llama-server b10587's reply to this request.
	const want = "\"Here?\" Annabyed.\n\"Okay, An"

	required := webUIToolParams("required")
	required.ParallelToolCalls = openai.Bool(true)
	for _, p := range []openai.ChatCompletionNewParams{webUIToolParams("auto"), required} {
		resp, err := client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		ch := resp.Choices[0]
		if ch.Message.Content != want || len(ch.Message.ToolCalls) != 0 || ch.FinishReason != "length" {
			t.Errorf("tool_choice %s: choice %s, want content %q", p.ToolChoice.OfAuto.Value, ch.RawJSON(), want)
		}
		if u := resp.Usage; u.PromptTokens != 55 || u.CompletionTokens != 24 {
			t.Errorf("tool_choice %s: usage %s, want 55 prompt and 24 completion tokens", p.ToolChoice.OfAuto.Value, u.RawJSON())
		}
	}

	stream := client.Chat.Completions.NewStreaming(ctx, webUIToolParams("auto"))
	var content strings.Builder
	for stream.Next() {
		for _, choice := range stream.Current().Choices {
			if len(choice.Delta.ToolCalls) > 0 {
				t.Errorf("tool-call delta %s", choice.RawJSON())
			}
			content.WriteString(choice.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if content.String() != want {
		t.Errorf("streamed content %q, want %q", content.String(), want)
	}
}
