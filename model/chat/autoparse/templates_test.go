package autoparse_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/model/chat/autoparse"
)

// analyzeUpstream analyses one of llama.cpp's test templates and fails on an error.
func analyzeUpstream(t *testing.T, name string, patch func(string) string) *autoparse.Analysis {
	t.Helper()
	a, err := analyzeFile(t, upstreamTemplate(t, name), patch)
	if err != nil {
		t.Fatalf("Analyze(%s): %v", name, err)
	}
	return a
}

// fields compares named values and reports each mismatch.
func fields(t *testing.T, name string, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		if g := got[k]; !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %s = %#v, want %#v", name, k, g, w)
		}
	}
}

// all returns every analysis field by a short name.
func all(a *autoparse.Analysis) map[string]any {
	f, fn, ar, id := a.Tools.Format, a.Tools.Function, a.Tools.Arguments, a.Tools.CallID
	return map[string]any{
		"reasoning.mode": a.Reasoning.Mode, "reasoning.start": a.Reasoning.Start, "reasoning.end": a.Reasoning.End,
		"content.mode": a.Content.Mode, "content.start": a.Content.Start, "content.end": a.Content.End,
		"format.mode": f.Mode, "section_start": f.SectionStart, "section_end": f.SectionEnd,
		"per_call_start": f.PerCallStart, "per_call_end": f.PerCallEnd,
		"fun_name_is_key": f.FunNameIsKey, "tools_array_wrapped": f.ToolsArrayWrapped,
		"function_field": f.FunctionField, "name_field": f.NameField, "args_field": f.ArgsField,
		"id_field": f.IDField, "gen_id_field": f.GenIDField, "parameter_order": f.ParameterOrder,
		"function.name_prefix": fn.NamePrefix, "function.name_suffix": fn.NameSuffix,
		"function.args_separator": fn.ArgsSeparator, "function.close": fn.Close,
		"arguments.start": ar.Start, "arguments.end": ar.End,
		"arguments.name_prefix": ar.NamePrefix, "arguments.name_suffix": ar.NameSuffix,
		"arguments.value_prefix": ar.ValuePrefix, "arguments.value_suffix": ar.ValueSuffix,
		"arguments.separator": ar.Separator,
		"call_id.pos":         id.Pos, "call_id.prefix": id.Prefix, "call_id.suffix": id.Suffix,
		"user_start": a.UserStart, "assistant_start": a.AssistantStart,
		"always_wrapped": a.ContentAlwaysWrapped(),
	}
}

// TestNemotronNano checks llama.cpp's test_nemotron_reasoning_detection and
// test_nemotron_tool_format. That test was written against an analyzer that trimmed the
// reasoning start, and the leading whitespace of the reasoning end and the value suffix; the
// analyzer ported here keeps the whitespace the template writes, so those three are checked
// exactly as this version finds them and, trimmed, against the upstream values.
func TestNemotronNano(t *testing.T) {
	a := analyzeUpstream(t, "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", nil)
	got := all(a)
	fields(t, "Nemotron-3-Nano", got, map[string]any{
		"reasoning.mode": autoparse.ReasoningTagBased, "reasoning.start": "<think>\n", "reasoning.end": "\n</think>\n",
		"content.mode": autoparse.ContentPlain, "content.start": "", "content.end": "",
		"format.mode": autoparse.FormatTagWithTagged, "section_start": "", "section_end": "",
		"per_call_start": "<tool_call>\n", "per_call_end": "</tool_call>",
		"function.name_prefix": "<function=", "function.name_suffix": ">\n", "function.close": "</function>\n",
		"arguments.name_prefix": "<parameter=", "arguments.name_suffix": ">\n",
		"arguments.value_prefix": "", "arguments.value_suffix": "\n</parameter>\n",
		"call_id.pos":     autoparse.CallIDNone,
		"assistant_start": "<|im_start|>assistant", "user_start": "<|im_start|>user",
	})
	if s := strings.TrimSpace(a.Reasoning.Start); s != "<think>" {
		t.Errorf("trimmed reasoning start = %q, want <think>", s)
	}
	for name, v := range map[string]string{"reasoning.end": a.Reasoning.End, "value_suffix": a.Tools.Arguments.ValueSuffix} {
		want := map[string]string{"reasoning.end": "</think>\n", "value_suffix": "</parameter>\n"}[name]
		if s := strings.TrimLeft(v, " \t\n"); s != want {
			t.Errorf("%s without leading whitespace = %q, want %q", name, s, want)
		}
	}
	wantTokens := []string{"<think>", "</think>", "<tool_call>", "</tool_call>", "<function=", ">", "</function>", "<parameter=", "</parameter>"}
	if !reflect.DeepEqual(a.PreservedTokens, wantTokens) {
		t.Errorf("preserved tokens = %q, want %q", a.PreservedTokens, wantTokens)
	}
}

// TestCommandR7B checks llama.cpp's test_cohere_reasoning_detection and its (unregistered)
// test_tool_format_cohere.
func TestCommandR7B(t *testing.T) {
	a := analyzeUpstream(t, "CohereForAI-c4ai-command-r7b-12-2024-tool_use", nil)
	fields(t, "Command R7B", all(a), map[string]any{
		"reasoning.mode": autoparse.ReasoningToolsOnly, "reasoning.start": "<|START_THINKING|>", "reasoning.end": "<|END_THINKING|>",
		"content.mode": autoparse.ContentAlwaysWrapped, "content.start": "<|START_RESPONSE|>", "content.end": "<|END_RESPONSE|>",
		"always_wrapped": true,
		"format.mode":    autoparse.FormatJSONNative, "section_start": "<|START_ACTION|>", "section_end": "<|END_ACTION|>",
		"per_call_start": "", "per_call_end": "", "tools_array_wrapped": true,
		"name_field": "tool_name", "args_field": "parameters", "id_field": "",
		"function.name_prefix": "", "function.name_suffix": "", "function.close": "",
		"arguments.start": "", "arguments.end": "", "arguments.name_prefix": "", "arguments.name_suffix": "",
		"arguments.value_prefix": "", "arguments.value_suffix": "", "arguments.separator": "",
	})
}

// TestJSONNativeTemplates checks templates whose calls are JSON objects, with expectations
// read off each template's tool-call rendering.
func TestJSONNativeTemplates(t *testing.T) {
	hermesLike := map[string]any{
		"format.mode": autoparse.FormatJSONNative, "section_start": "", "section_end": "",
		"per_call_start": "<tool_call>\n", "per_call_end": "</tool_call>",
		"name_field": "name", "args_field": "arguments", "id_field": "", "fun_name_is_key": false,
		"tools_array_wrapped": false, "parameter_order": []string{"name", "arguments"},
		"function.name_prefix": "", "arguments.name_prefix": "", "call_id.pos": autoparse.CallIDNone,
	}
	for _, c := range []struct {
		name string
		want map[string]any
	}{
		{"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", hermesLike},
		{"Qwen-Qwen2.5-7B-Instruct", hermesLike},
		{"Qwen-Qwen3-0.6B", hermesLike},
		{"mistralai-Mistral-Nemo-Instruct-2407", map[string]any{
			"format.mode": autoparse.FormatJSONNative, "section_start": "[TOOL_CALLS]", "section_end": "",
			"per_call_start": "", "per_call_end": "", "tools_array_wrapped": true,
			"name_field": "name", "args_field": "arguments", "id_field": "id",
			"parameter_order": []string{"name", "arguments", "id"},
		}},
		{"meta-llama-Llama-3.1-8B-Instruct", map[string]any{
			"format.mode": autoparse.FormatJSONNative, "section_start": "", "section_end": "",
			"per_call_start": "", "per_call_end": "", "tools_array_wrapped": false,
			"name_field": "name", "args_field": "parameters", "id_field": "",
			"reasoning.mode": autoparse.ReasoningNone, "content.mode": autoparse.ContentPlain,
			"assistant_start": "<|start_header_id|>assistant<|end_header_id|>",
			"user_start":      "<|start_header_id|>user<|end_header_id|>",
		}},
	} {
		fields(t, c.name, all(analyzeUpstream(t, c.name, nil)), c.want)
	}
}

// TestReasoningMarkers checks the thinking markers llama.cpp's reasoning-budget tests rely on.
func TestReasoningMarkers(t *testing.T) {
	a := analyzeUpstream(t, "Qwen-Qwen3-0.6B", nil)
	if a.Reasoning.Mode != autoparse.ReasoningTagBased ||
		strings.TrimSpace(a.Reasoning.Start) != "<think>" || strings.TrimSpace(a.Reasoning.End) != "</think>" {
		t.Errorf("Qwen3 reasoning = %+v, want TAG_BASED <think> </think>", a.Reasoning)
	}
	fields(t, "Qwen3", all(a), map[string]any{"reasoning.start": "<think>\n", "reasoning.end": "\n</think>\n\n",
		"content.mode": autoparse.ContentPlain})
}

// TestNoToolCalls: a template that does not render tool calls gets no tool analysis.
func TestNoToolCalls(t *testing.T) {
	a := analyzeUpstream(t, "google-gemma-2-2b-it", nil)
	fields(t, "gemma-2", all(a), map[string]any{
		"format.mode": autoparse.FormatNone, "section_start": "", "per_call_start": "",
		"name_field": "name", "args_field": "arguments", "function_field": "function",
		"reasoning.mode": autoparse.ReasoningNone, "content.mode": autoparse.ContentPlain,
		"assistant_start": "<start_of_turn>model", "user_start": "<start_of_turn>user",
	})
	if len(a.PreservedTokens) != 0 {
		t.Errorf("preserved tokens = %q, want none", a.PreservedTokens)
	}
}

// TestTaggedTemplates checks templates that tag every argument.
func TestTaggedTemplates(t *testing.T) {
	qwenCoder := map[string]any{
		"format.mode": autoparse.FormatTagWithTagged, "section_start": "", "section_end": "",
		"per_call_start": "<tool_call>\n", "per_call_end": "</tool_call>",
		"function.name_prefix": "<function=", "function.name_suffix": ">\n", "function.close": "</function>\n",
		"function.args_separator": "",
		"arguments.name_prefix":   "<parameter=", "arguments.name_suffix": ">\n",
		"arguments.value_prefix": "", "arguments.value_suffix": "\n</parameter>\n",
		"call_id.pos": autoparse.CallIDNone,
	}
	for _, c := range []struct {
		name  string
		patch func(string) string
		want  map[string]any
	}{
		{"Qwen3-Coder", nil, merge(qwenCoder, map[string]any{"reasoning.mode": autoparse.ReasoningNone})},
		{"ByteDance-Seed-OSS", nil, map[string]any{
			"reasoning.mode": autoparse.ReasoningTagBased, "reasoning.start": "<seed:think>", "reasoning.end": "</seed:think>\n",
			"content.mode": autoparse.ContentPlain,
			"format.mode":  autoparse.FormatTagWithTagged, "section_start": "", "section_end": "",
			"per_call_start": "<seed:tool_call>\n", "per_call_end": "</seed:tool_call>",
			"function.name_prefix": "<function=", "function.name_suffix": ">\n", "function.close": "</function>\n",
			"arguments.name_prefix": "<parameter=", "arguments.name_suffix": ">",
			"arguments.value_prefix": "", "arguments.value_suffix": "</parameter>\n",
			"assistant_start": "<seed:bos>assistant", "user_start": "<seed:bos>user",
		}},
		{"GLM-4.6", nil, map[string]any{
			"reasoning.mode": autoparse.ReasoningTagBased, "reasoning.start": "<think>", "reasoning.end": "</think>\n",
			"format.mode": autoparse.FormatTagWithTagged, "section_start": "", "section_end": "",
			"per_call_start": "<tool_call>", "per_call_end": "</tool_call>",
			"function.name_prefix": "", "function.name_suffix": "\n", "function.close": "",
			"arguments.name_prefix": "<arg_key>", "arguments.name_suffix": "</arg_key>\n",
			"arguments.value_prefix": "<arg_value>", "arguments.value_suffix": "</arg_value>\n",
			"assistant_start": "<|assistant|>", "user_start": "<|user|>",
		}},
		{"MiniMax-M2", nil, map[string]any{
			"reasoning.mode": autoparse.ReasoningTagBased, "reasoning.start": "<think>\n", "reasoning.end": "\n</think>\n\n",
			"format.mode":   autoparse.FormatTagWithTagged,
			"section_start": "<minimax:tool_call>\n", "section_end": "</minimax:tool_call>",
			"per_call_start": "", "per_call_end": "",
			"function.name_prefix": `<invoke name="`, "function.name_suffix": "\">\n", "function.close": "</invoke>\n",
			// The name suffix stops at the closing quote, so `">` lands in the value prefix.
			"arguments.name_prefix": `<parameter name="`, "arguments.name_suffix": "",
			"arguments.value_prefix": `">`, "arguments.value_suffix": "</parameter>\n",
		}},
	} {
		fields(t, c.name, all(analyzeUpstream(t, c.name, c.patch)), c.want)
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
