package autoparse_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/model/chat/autoparse"
)

// probeMessage is what the fake renderers read of a probe message.
type probeMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	ToolCalls        []struct {
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// chatMLRenderer renders like a Hermes/Qwen3 template: ChatML turns, reasoning in
// <think> tags, each call as a JSON object in <tool_call> tags written by callJSON.
func chatMLRenderer(callJSON func(name string, args json.RawMessage) string) autoparse.Renderer {
	return func(messages, tools json.RawMessage, addGen, thinking bool) (string, error) {
		var msgs []probeMessage
		if err := json.Unmarshal(messages, &msgs); err != nil {
			return "", err
		}
		var b strings.Builder
		for _, m := range msgs {
			var content string
			if len(m.Content) > 0 && string(m.Content) != "null" {
				if err := json.Unmarshal(m.Content, &content); err != nil {
					return "", errors.New("content is not a string")
				}
			}
			b.WriteString("<|im_start|>" + m.Role + "\n")
			if m.ReasoningContent != nil {
				b.WriteString("<think>\n" + *m.ReasoningContent + "\n</think>\n\n")
			}
			b.WriteString(content)
			for _, c := range m.ToolCalls {
				b.WriteString("<tool_call>\n" + callJSON(c.Function.Name, c.Function.Arguments) + "\n</tool_call>")
			}
			b.WriteString("<|im_end|>\n")
		}
		if addGen {
			b.WriteString("<|im_start|>assistant\n")
			if !thinking {
				b.WriteString("<think>\n\n</think>\n\n")
			}
		}
		return b.String(), nil
	}
}

func hermesCall(name string, args json.RawMessage) string {
	var compact bytes.Buffer
	_ = json.Compact(&compact, args)
	return `{"name": "` + name + `", "arguments": ` + compact.String() + `}`
}

// TestAnalyzeJSONNativeRenderer analyses a Hermes-like renderer with no template behind it.
func TestAnalyzeJSONNativeRenderer(t *testing.T) {
	caps := autoparse.Caps{StringContent: true, ToolCalls: true, ParallelToolCalls: true}
	a, err := autoparse.Analyze("", caps, chatMLRenderer(hermesCall))
	if err != nil {
		t.Fatal(err)
	}
	want := &autoparse.Analysis{
		Reasoning: autoparse.Reasoning{Mode: autoparse.ReasoningTagBased, Start: "<think>\n", End: "\n</think>\n\n"},
		Tools: autoparse.Tools{Format: autoparse.Format{
			Mode: autoparse.FormatJSONNative, PerCallStart: "<tool_call>\n", PerCallEnd: "</tool_call>",
			FunctionField: "function", NameField: "name", ArgsField: "arguments",
			ParameterOrder: []string{"name", "arguments"},
		}},
		UserStart:       "<|im_start|>user",
		AssistantStart:  "<|im_start|>assistant",
		PreservedTokens: []string{"<think>", "</think>", "<tool_call>", "</tool_call>"},
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("Analyze =\n%+v\nwant\n%+v", a, want)
	}
	// Without parallel calls the markers around the one call stay section markers.
	caps.ParallelToolCalls = false
	a, err = autoparse.Analyze("", caps, chatMLRenderer(hermesCall))
	if err != nil {
		t.Fatal(err)
	}
	if f := a.Tools.Format; f.SectionStart != "<tool_call>\n" || f.SectionEnd != "</tool_call>" || f.PerCallStart != "" {
		t.Errorf("without parallel calls: section %q %q, per call %q", f.SectionStart, f.SectionEnd, f.PerCallStart)
	}
}

// TestAnalyzeBadToolJSON: a JSON-looking call that is not JSON (a Python dict) makes the
// analysis fail, as llama.cpp's json::parse throws there.
func TestAnalyzeBadToolJSON(t *testing.T) {
	pythonCall := func(name string, _ json.RawMessage) string {
		return `{"name": "` + name + `", "arguments": {'AA_ARG_FST_AA': 'XXXX'}}`
	}
	a, err := autoparse.Analyze("", autoparse.Caps{StringContent: true, ToolCalls: true}, chatMLRenderer(pythonCall))
	if err == nil || !strings.Contains(err.Error(), "tool call JSON") || strings.Contains(err.Error(), "internal") {
		t.Fatalf("Analyze = %+v, %v; want a tool call JSON error", a, err)
	}
}

// TestAnalyzeRenderErrors: probes that fail to render leave their fields at the defaults.
func TestAnalyzeRenderErrors(t *testing.T) {
	failing := func(json.RawMessage, json.RawMessage, bool, bool) (string, error) {
		return "", errors.New("template raised")
	}
	a, err := autoparse.Analyze("", autoparse.Caps{StringContent: true, ToolCalls: true, ParallelToolCalls: true}, failing)
	if err != nil {
		t.Fatal(err)
	}
	want := &autoparse.Analysis{
		Tools: autoparse.Tools{Format: autoparse.Format{
			FunctionField: "function", NameField: "name", ArgsField: "arguments", ParameterOrder: []string{},
		}},
		PreservedTokens: []string{},
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("Analyze = %+v, want the defaults %+v", a, want)
	}
	panicking := func(json.RawMessage, json.RawMessage, bool, bool) (string, error) { panic("boom") }
	if _, err := autoparse.Analyze("", autoparse.Caps{ToolCalls: true}, panicking); err != nil {
		t.Errorf("a panicking renderer should count as a failed render, got %v", err)
	}
}

// TestAnalyzeTypedContent: a template that only takes typed content gets every string content
// as one text part; given string contents it would fail every probe.
func TestAnalyzeTypedContent(t *testing.T) {
	typedOnly := func(messages, tools json.RawMessage, addGen, thinking bool) (string, error) {
		var msgs []probeMessage
		if err := json.Unmarshal(messages, &msgs); err != nil {
			return "", err
		}
		var b strings.Builder
		for _, m := range msgs {
			var parts []struct{ Type, Text string }
			if err := json.Unmarshal(m.Content, &parts); err != nil || len(parts) != 1 || parts[0].Type != "text" {
				return "", errors.New("content must be one text part")
			}
			b.WriteString("<" + m.Role + ">" + parts[0].Text + "</" + m.Role + ">")
		}
		return b.String(), nil
	}
	a, err := autoparse.Analyze("", autoparse.Caps{TypedContent: true}, typedOnly)
	if err != nil {
		t.Fatal(err)
	}
	if a.AssistantStart != "<assistant>" || a.UserStart != "<user>" {
		t.Errorf("typed-only: assistant start %q, user start %q", a.AssistantStart, a.UserStart)
	}
	// A template that takes both is given strings as they are.
	a, err = autoparse.Analyze("", autoparse.Caps{StringContent: true, TypedContent: true}, typedOnly)
	if err != nil {
		t.Fatal(err)
	}
	if a.AssistantStart != "" {
		t.Errorf("strings given to a typed-only renderer still rendered: %q", a.AssistantStart)
	}
}

// TestWorkarounds: source-matched fixes apply whatever the renders gave.
func TestWorkarounds(t *testing.T) {
	plain := chatMLRenderer(hermesCall)
	src := "{{ content.split('</think>')[-1] }} <|CHATBOT_TOKEN|> <|END_OF_TURN_TOKEN|> " +
		`Respond in the format {"name": function name ... Do not use variables.`
	a, err := autoparse.Analyze(src, autoparse.Caps{StringContent: true}, plain)
	if err != nil {
		t.Fatal(err)
	}
	// The renderer already has <think> reasoning, so the old-Qwen fix does not apply; the
	// Command R+ one does.
	if a.Content.Start != "<|CHATBOT_TOKEN|>" || a.Content.End != "<|END_OF_TURN_TOKEN|>" || !a.ContentAlwaysWrapped() {
		t.Errorf("Command R+ content = %+v", a.Content)
	}
	if a.UserStart != "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>" || !a.Tools.Format.OpenAIWrapperTrigger {
		t.Errorf("user start %q, wrapper trigger %v", a.UserStart, a.Tools.Format.OpenAIWrapperTrigger)
	}
	wantTokens := []string{"<think>", "</think>", "<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"}
	if !reflect.DeepEqual(a.PreservedTokens, wantTokens) {
		t.Errorf("preserved tokens = %q, want %q", a.PreservedTokens, wantTokens)
	}
}

func TestEnumStrings(t *testing.T) {
	for got, want := range map[string]string{
		autoparse.ReasoningToolsOnly.String():          "TOOLS_ONLY",
		autoparse.ContentWrappedWithReasoning.String(): "WRAPPED_WITH_REASONING",
		autoparse.FormatTagWithJSON.String():           "TAG_WITH_JSON",
		autoparse.CallIDBetweenFuncAndArgs.String():    "BETWEEN_FUNC_AND_ARGS",
		autoparse.ToolFormat(9).String():               "ToolFormat(9)",
	} {
		if got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}
