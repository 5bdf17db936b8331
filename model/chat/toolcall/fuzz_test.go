package toolcall

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/model/chat/autoparse"
)

// fuzzTools are the tools the fuzzed parsers are built for: one with typed parameters (the
// tagged formats read arguments by their schema), one without.
var fuzzTools = []autoparse.Tool{
	{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`)},
	{Name: "ping", Parameters: json.RawMessage(`{"type":"object"}`)},
}

// namedSyntax is a syntax and what it stands for, for failure messages.
type namedSyntax struct {
	name string
	syn  Syntax
}

// build makes the syntax of analysis a for the fuzz tools, as the server does for a request.
func build(name string, b autoparse.Builder, p autoparse.Params, r ReasoningFormat, inContent bool) namedSyntax {
	p.Tools = slices.Clone(p.Tools)
	start, end := b.ReasoningTags()
	return namedSyntax{name, Syntax{Parser: b.Build(p).Parser, GenerationPrompt: p.GenerationPrompt, Reasoning: r,
		ReasoningInContent: inContent, ReasoningTags: [2]string{start, end}}}
}

// handSyntaxes cover every tool-call format, reasoning and content mode the parser generator
// knows, with analyses written out by hand (so they need no shared data).
func handSyntaxes() []namedSyntax {
	think := autoparse.Reasoning{Mode: autoparse.ReasoningTagBased, Start: "<think>", End: "</think>"}
	hermesJSON := autoparse.Format{Mode: autoparse.FormatJSONNative, PerCallStart: "<tool_call>\n", PerCallEnd: "</tool_call>",
		FunctionField: "function", NameField: "name", ArgsField: "arguments"}
	tools := autoparse.Params{Tools: fuzzTools, Parallel: true, ExtractReasoning: true}
	var out []namedSyntax
	add := func(name string, a *autoparse.Analysis, p autoparse.Params, r ReasoningFormat, inContent bool) {
		out = append(out, build(name, a, p, r, inContent))
	}
	out = append(out, namedSyntax{"none", Syntax{}})
	add("content+think", &autoparse.Analysis{Reasoning: think}, autoparse.Params{ExtractReasoning: true}, ReasoningDeepseek, false)
	add("content think forced open", &autoparse.Analysis{Reasoning: think},
		autoparse.Params{ExtractReasoning: true, GenerationPrompt: "<|im_start|>assistant\n<think>\n"}, ReasoningDeepseek, false)
	add("wrapped content", &autoparse.Analysis{Reasoning: think,
		Content: autoparse.Content{Mode: autoparse.ContentAlwaysWrapped, Start: "<response>", End: "</response>"}},
		autoparse.Params{ExtractReasoning: true}, ReasoningDeepseek, false)
	add("granite content", &autoparse.Analysis{Reasoning: autoparse.Reasoning{Mode: autoparse.ReasoningTagBased, Start: "<think>", End: "</think>"},
		Content: autoparse.Content{Mode: autoparse.ContentWrappedWithReasoning, Start: "<response>", End: "</response>"}},
		autoparse.Params{ExtractReasoning: true}, ReasoningDeepseek, false)
	add("response schema", &autoparse.Analysis{Reasoning: think}, autoparse.Params{ExtractReasoning: true,
		ResponseSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}, ReasoningDeepseek, false)
	add("hermes", &autoparse.Analysis{Reasoning: think, Tools: autoparse.Tools{Format: hermesJSON}}, tools, ReasoningDeepseek, false)
	add("hermes deepseek-legacy", &autoparse.Analysis{Reasoning: think, Tools: autoparse.Tools{Format: hermesJSON}}, tools, ReasoningDeepseekLegacy, true)
	add("hermes reasoning none", &autoparse.Analysis{Reasoning: think, Tools: autoparse.Tools{Format: hermesJSON}},
		autoparse.Params{Tools: fuzzTools}, ReasoningNone, false)
	add("hermes required", &autoparse.Analysis{Tools: autoparse.Tools{Format: hermesJSON}},
		autoparse.Params{Tools: fuzzTools, Choice: autoparse.ChoiceRequired}, ReasoningDeepseek, false)
	add("mistral ids", &autoparse.Analysis{Tools: autoparse.Tools{Format: autoparse.Format{Mode: autoparse.FormatJSONNative,
		SectionStart: "[TOOL_CALLS]", ToolsArrayWrapped: true, FunctionField: "function", NameField: "name", ArgsField: "arguments",
		IDField: "id", ParameterOrder: []string{"name", "arguments", "id"}}}}, tools, ReasoningDeepseek, false)
	add("name as key", &autoparse.Analysis{Tools: autoparse.Tools{Format: autoparse.Format{Mode: autoparse.FormatJSONNative,
		SectionStart: "<tools>", SectionEnd: "</tools>", FunNameIsKey: true, ToolsArrayWrapped: true}}}, tools, ReasoningDeepseek, false)
	add("tag with json", &autoparse.Analysis{Reasoning: think, Tools: autoparse.Tools{ // functionary v3.1's
		Format:   autoparse.Format{Mode: autoparse.FormatTagWithJSON, PerCallStart: "<function=", PerCallEnd: "</function>"},
		Function: autoparse.Function{NameSuffix: ">"}}}, tools, ReasoningDeepseek, false)
	add("tag with json and ids", &autoparse.Analysis{Tools: autoparse.Tools{
		Format:   autoparse.Format{Mode: autoparse.FormatTagWithJSON, SectionStart: "<|tool_calls|>", SectionEnd: "<|end_tool_calls|>"},
		Function: autoparse.Function{NamePrefix: "<|call|>functions.", NameSuffix: "", Close: "<|end_call|>"},
		CallID:   autoparse.CallID{Pos: autoparse.CallIDBetweenFuncAndArgs, Prefix: ":", Suffix: "<|args|>"}}}, tools, ReasoningDeepseek, false)
	add("tagged", &autoparse.Analysis{Reasoning: think, Tools: autoparse.Tools{
		Format:    autoparse.Format{Mode: autoparse.FormatTagWithTagged, PerCallStart: "<tool_call>\n", PerCallEnd: "</tool_call>"},
		Function:  autoparse.Function{NamePrefix: "<function=", NameSuffix: ">\n", Close: "</function>\n"},
		Arguments: autoparse.Arguments{NamePrefix: "<parameter=", NameSuffix: ">\n", ValueSuffix: "\n</parameter>\n"}}}, tools, ReasoningDeepseek, false)
	return out
}

// fuzzTemplates are real chat templates (llama.cpp's test templates) whose parsers the fuzz
// target also runs: llama.cpp's dedicated formats where it has one, else the autoparser's.
var fuzzTemplates = []string{
	"Qwen-Qwen3-0.6B", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "mistralai-Mistral-Nemo-Instruct-2407",
	"meta-llama-Llama-3.1-8B-Instruct", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "Qwen3-Coder", "openai-gpt-oss-120b",
	"moonshotai-Kimi-K2", "meetkai-functionary-medium-v3.1", "meetkai-functionary-medium-v3.2", "GLM-4.6", "ibm-granite-granite-3.3-2B-Instruct",
	"deepseek-ai-DeepSeek-V3.1", "MiniMax-M2", "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
}

// templateSyntaxes builds the syntaxes of fuzzTemplates from the shared data (none when it is
// not configured), with and without tools, and their generation prompts.
func templateSyntaxes(tb testing.TB) []namedSyntax {
	dir := shareddata.Dir()
	if dir == "" {
		return nil
	}
	var out []namedSyntax
	for _, name := range fuzzTemplates {
		src, err := os.ReadFile(filepath.Join(dir, "llama-server-tests", "upstream", "models", "templates", name+".jinja"))
		if err != nil {
			tb.Logf("%s: %v", name, err)
			continue
		}
		tmpl, err := chat.New(string(src), name)
		if err != nil {
			continue // the chat package cannot parse it (autoparse's tests skip such templates too)
		}
		tmpl = tmpl.WithSpecialTokens("<s>", "</s>")
		b := autoparse.Specialized(string(src))
		if b == nil {
			a, err := autoparse.Analyze(string(src), tmpl.Caps().ForAnalysis(), tmpl.RenderJSON)
			if err != nil {
				continue // llama-server reads such a template's answers as plain content
			}
			b = a
		}
		user := json.RawMessage(`[{"role":"user","content":"Hi"}]`)
		with, err1 := tmpl.RenderJSON(user, nil, true, true)
		without, err2 := tmpl.RenderJSON(user, nil, false, true)
		gp := ""
		if err1 == nil && err2 == nil && strings.HasPrefix(with, without) {
			gp = with[len(without):]
		}
		p := autoparse.Params{Tools: fuzzTools, Parallel: true, ExtractReasoning: true, GenerationPrompt: gp}
		out = append(out, build(name, b, p, ReasoningDeepseek, false))
		p.Tools = nil
		out = append(out, build(name+" without tools", b, p, ReasoningDeepseek, false))
	}
	return out
}

// fuzzTexts are outputs in the formats above (and the real templates'), whole and cut off.
var fuzzTexts = []string{
	"Hello, world.",
	"<think>Let me look.</think>Checking the weather.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>",
	"<tool_call>\n{\"name\": \"ping\", \"arguments\": {\"a\": ",
	`[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "x"}, "id": "abc123def"}, {"name": "ping", "arguments": {"n": 1}}]`,
	`<tools>[{"ping": {"x": [1, 2, {"y": null}]}}]</tools>`,
	"<think>hm</think><function=get_weather>{\"city\": \"Rome\"}</function><function=ping>{}</function>",
	"<|tool_calls|><|call|>functions.ping:0<|args|>{}<|end_call|><|end_tool_calls|>",
	"Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
	"<think>a</think><response>b</response>",
	"reasoning goes on</think>\n\nThe answer is 42.",
	"```json\n{\"a\": 1}\n```",
	"<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary to=functions.ping <|constrain|>json<|message|>{}<|call|>",
	"<|python_tag|>{\"name\": \"ping\", \"parameters\": {}}",
	"<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Oslo\"}<|tool_call_end|><|tool_calls_section_end|>",
	"<minimax:tool_call>\n<invoke name=\"ping\">\n</invoke>\n</minimax:tool_call>",
	"Use <too",
}

// chunks cuts text at up to 16 places drawn from seed (at every byte when seed is 0).
func chunks(text string, seed uint64) []string {
	if seed == 0 {
		out := make([]string, len(text))
		for i := 0; i < len(text); i++ { // bytes, not runes: a piece may end inside a character
			out[i] = text[i : i+1]
		}
		return out
	}
	rng := rand.New(rand.NewPCG(seed, seed>>7|1))
	cuts := []int{0, len(text)}
	for range rng.IntN(16) {
		cuts = append(cuts, rng.IntN(len(text)+1))
	}
	slices.Sort(cuts)
	var out []string
	for i := 1; i < len(cuts); i++ {
		out = append(out, text[cuts[i-1]:cuts[i]])
	}
	return out
}

// FuzzParse parses text in every syntax, at once and streamed in random pieces: never a panic,
// bounded time, and a stream that agrees with Parse: its final message is Parse's of the whole
// text (calls keep the ids the stream gave them), its deltas announce each call once, in
// order, id and name first, and announce every named call by the end; where every step of the
// stream extended the message before it, the deltas add up to the final message exactly.
func FuzzParse(f *testing.F) {
	syns := append(handSyntaxes(), templateSyntaxes(f)...)
	texts := slices.Clone(fuzzTexts)
	if dir := shareddata.Dir(); dir != "" {
		// prompts the reference templates rendered, tool calls and replies included
		paths, _ := filepath.Glob(filepath.Join(dir, "reference", "chat-templates", "*.a.prompt.txt"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				texts = append(texts, string(b[max(0, len(b)-512):]))
			}
		}
	}
	// every syntax and every text, paired round-robin: all pairs would take most of a short
	// fuzzing run to gather coverage of, and the fuzzer changes the pick anyway
	for i := range max(len(syns), len(texts)) {
		f.Add(uint8(i%len(syns)), texts[i%len(texts)], uint64(i))
	}
	f.Fuzz(func(t *testing.T, pick uint8, text string, seed uint64) {
		if len(text) > 512 || seed == 0 && len(text) > 128 {
			return
		}
		ns := syns[int(pick)%len(syns)]
		start := time.Now()
		want := Parse(text, false, ns.syn)
		if ns.syn.Parser == nil && (want.Content != text || want.Reasoning != "" || len(want.Calls) != 0) {
			t.Fatalf("no parser: %+v, want the text as content", want)
		}
		ids := 0
		s := NewStream(ns.syn, func() string { ids++; return fmt.Sprintf("gen%d", ids) })
		var deltas []Delta
		grew := true // every step extended the message before it
		prev := s.Message()
		for _, piece := range chunks(text, seed) {
			deltas = append(deltas, s.Add(piece)...)
			grew = grew && extends(prev, s.Message())
			prev = s.Message()
		}
		msg, last := s.Finish()
		deltas = append(deltas, last...)
		grew = grew && extends(prev, msg)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s: %v for %d bytes", ns.name, d, len(text))
		}
		if !want.empty() && !sameMessage(msg, want) {
			t.Fatalf("%s: streamed message %+v, Parse gives %+v", ns.name, msg, want)
		}
		for i, c := range msg.Calls {
			if c.ID == "" {
				t.Fatalf("%s: call %d has no id", ns.name, i)
			}
		}
		content, reasoning, calls := joinedChecked(t, ns.name, deltas)
		for i, c := range msg.Calls {
			if c.Name != "" && (i >= len(calls) || calls[i].Name != c.Name || calls[i].ID != c.ID) && grew {
				t.Fatalf("%s: call %d (%q) announced as %+v", ns.name, i, c.Name, calls)
			}
		}
		if !grew {
			// A step that took back what was streamed (a partial call that turned out to be
			// text, say) cannot be streamed: what went out stays, as in llama-server.
			return
		}
		if len(calls) > len(msg.Calls) {
			t.Fatalf("%s: %d calls announced, %d in the message", ns.name, len(calls), len(msg.Calls))
		}
		if content != msg.Content || reasoning != msg.Reasoning {
			t.Fatalf("%s: streamed content %q reasoning %q, final %q %q", ns.name, content, reasoning, msg.Content, msg.Reasoning)
		}
		for i, c := range calls {
			if c.Arguments != msg.Calls[i].Arguments {
				t.Fatalf("%s: call %d streamed arguments %q, final %q", ns.name, i, c.Arguments, msg.Calls[i].Arguments)
			}
		}
	})
}

// extends reports whether next only adds to prev: text appended, calls appended, the last
// call's arguments appended to, names and earlier calls unchanged.
func extends(prev, next Message) bool {
	if !strings.HasPrefix(next.Content, prev.Content) || !strings.HasPrefix(next.Reasoning, prev.Reasoning) || len(next.Calls) < len(prev.Calls) {
		return false
	}
	for i, c := range prev.Calls {
		n := next.Calls[i]
		if n.Name != c.Name || n.ID != c.ID || !strings.HasPrefix(n.Arguments, c.Arguments) ||
			i < len(prev.Calls)-1 && n.Arguments != c.Arguments {
			return false
		}
	}
	return true
}

// sameMessage compares messages but for the calls' ids, which a stream fixes when it first
// sees a call (before the model may have written its own).
func sameMessage(a, b Message) bool {
	if a.Content != b.Content || a.Reasoning != b.Reasoning || len(a.Calls) != len(b.Calls) {
		return false
	}
	for i := range a.Calls {
		if a.Calls[i].Name != b.Calls[i].Name || a.Calls[i].Arguments != b.Calls[i].Arguments {
			return false
		}
	}
	return true
}

// joinedChecked is joined (stream_test.go) for fuzzing: it checks the deltas' protocol and
// adds up what they say.
func joinedChecked(t *testing.T, name string, deltas []Delta) (content, reasoning string, calls []Call) {
	t.Helper()
	for _, d := range deltas {
		if !d.IsTool() {
			if d.ToolIndex != -1 || d.ToolID != "" || d.ToolName != "" || d.ToolArgs != "" {
				t.Fatalf("%s: text delta %+v carries tool fields", name, d)
			}
			content += d.Content
			reasoning += d.Reasoning
			continue
		}
		if d.Content != "" || d.Reasoning != "" {
			t.Fatalf("%s: tool delta %+v carries text", name, d)
		}
		switch {
		case d.ToolIndex == len(calls):
			if d.ToolName == "" || d.ToolID == "" || d.ToolArgs != "" {
				t.Fatalf("%s: tool call %d starts with %+v, want its id and name alone", name, d.ToolIndex, d)
			}
			calls = append(calls, Call{ID: d.ToolID, Name: d.ToolName})
		case d.ToolIndex < len(calls):
			if d.ToolName != "" || d.ToolID != "" || d.ToolArgs == "" {
				t.Fatalf("%s: tool call %d announced twice or an empty delta: %+v", name, d.ToolIndex, d)
			}
			calls[d.ToolIndex].Arguments += d.ToolArgs
		default:
			t.Fatalf("%s: delta for tool call %d before call %d: %+v", name, d.ToolIndex, len(calls), d)
		}
	}
	return content, reasoning, calls
}
