package server

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go"

	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
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

// TestToolCallsEngine calls tools end to end with the openai-go client on the real engine:
// stories260K has no chat template of its own, so its ChatML answers in llama.cpp's generic JSON
// tool-call format, which tool_choice "required" constrains by a grammar to a call of one of the
// tools. Greedy, the call is the same whole and streamed, and its arguments fit the tool's schema.
func TestToolCallsEngine(t *testing.T) {
	b := enginetest.Load(t, "models", "stories260K.gguf")
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(b)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	client := openaiClient(ts.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// stories260K's greedy call; the server re-encodes the arguments compactly.
	const wantName, wantArgs = "get_time", `{"hour24":false,"timezone":"It's a spear."}`

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
	checkArguments(t, call.Function.Arguments, timeToolSchema)
	if call.Function.Arguments != wantArgs {
		t.Errorf("arguments %s, want %s", call.Function.Arguments, wantArgs)
	}
	if u := resp.Usage; u.PromptTokens != 151 || u.CompletionTokens != 117 || u.TotalTokens != 268 {
		t.Errorf("usage %s, want 151 prompt and 117 completion tokens", u.RawJSON())
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
