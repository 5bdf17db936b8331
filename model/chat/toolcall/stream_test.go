package toolcall

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/model/chat/autoparse"
)

// streamed feeds text to a stream in pieces of size n and returns every delta and the final
// message.
func streamed(syn Syntax, text string, n int) ([]Delta, Message) {
	ids := 0
	s := NewStream(syn, func() string { ids++; return fmt.Sprintf("id%d", ids) })
	var all []Delta
	for i := 0; i < len(text); i += n {
		all = append(all, s.Add(text[i:min(i+n, len(text))])...)
	}
	msg, last := s.Finish()
	return append(all, last...), msg
}

// joined concatenates what the deltas say about content, reasoning and each tool call.
func joined(t *testing.T, deltas []Delta) (content, reasoning string, calls []Call) {
	t.Helper()
	for _, d := range deltas {
		if !d.IsTool() {
			content += d.Content
			reasoning += d.Reasoning
			continue
		}
		switch {
		case d.ToolIndex == len(calls):
			if d.ToolName == "" || d.ToolID == "" || d.ToolArgs != "" {
				t.Fatalf("tool call %d starts with %+v, want its id and name alone", d.ToolIndex, d)
			}
			calls = append(calls, Call{ID: d.ToolID, Name: d.ToolName})
		case d.ToolIndex < len(calls):
			if d.ToolName != "" || d.ToolID != "" {
				t.Fatalf("tool call %d announced twice: %+v", d.ToolIndex, d)
			}
			calls[d.ToolIndex].Arguments += d.ToolArgs
		default:
			t.Fatalf("delta for tool call %d before call %d: %+v", d.ToolIndex, len(calls), d)
		}
	}
	return content, reasoning, calls
}

// hermes is the syntax of a Hermes 2 Pro / Qwen 3 template as the autoparser finds it: <think>
// reasoning, calls as JSON objects each in <tool_call>\n...</tool_call>.
func hermes(tools ...string) Syntax {
	a := &autoparse.Analysis{
		Reasoning: autoparse.Reasoning{Mode: autoparse.ReasoningTagBased, Start: "<think>", End: "</think>"},
		Tools: autoparse.Tools{Format: autoparse.Format{Mode: autoparse.FormatJSONNative, PerCallStart: "<tool_call>\n",
			PerCallEnd: "</tool_call>", FunctionField: "function", NameField: "name", ArgsField: "arguments"}},
	}
	p := autoparse.Params{Parallel: true, ExtractReasoning: true}
	for _, name := range tools {
		p.Tools = append(p.Tools, autoparse.Tool{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)})
	}
	return Syntax{Parser: a.Build(p).Parser, Reasoning: ReasoningDeepseek, ReasoningTags: [2]string{"<think>", "</think>"}}
}

// mistral is Mistral Nemo's syntax: [TOOL_CALLS] and a JSON list of calls that carry ids.
func mistral(tools ...string) Syntax {
	a := &autoparse.Analysis{Tools: autoparse.Tools{Format: autoparse.Format{Mode: autoparse.FormatJSONNative,
		SectionStart: "[TOOL_CALLS]", ToolsArrayWrapped: true, FunctionField: "function", NameField: "name", ArgsField: "arguments",
		IDField: "id", ParameterOrder: []string{"name", "arguments", "id"}}}}
	p := autoparse.Params{Parallel: true}
	for _, name := range tools {
		p.Tools = append(p.Tools, autoparse.Tool{Name: name})
	}
	return Syntax{Parser: a.Build(p).Parser}
}

func TestStreamHermes(t *testing.T) {
	text := "<think>Let me look.</think>Checking the weather.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"
	syn := hermes("get_weather", "get_time")
	for _, n := range []int{1, 3, 7, len(text)} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			deltas, msg := streamed(syn, text, n)
			content, reasoning, calls := joined(t, deltas)
			want := Message{Reasoning: "Let me look.", Content: "Checking the weather.\n",
				Calls: []Call{{ID: "id1", Name: "get_weather", Arguments: `{"city": "Paris", "days": 3}`}, {ID: "id2", Name: "get_time", Arguments: "{}"}}}
			if fmt.Sprint(msg) != fmt.Sprint(want) {
				t.Errorf("final message %+v, want %+v", msg, want)
			}
			if content != want.Content || reasoning != want.Reasoning || fmt.Sprint(calls) != fmt.Sprint(want.Calls) {
				t.Errorf("streamed content %q reasoning %q calls %+v", content, reasoning, calls)
			}
			for _, d := range deltas {
				if strings.Contains(d.Content, "<") || strings.Contains(d.Content, "{") {
					t.Errorf("markup streamed as content: %q", d.Content)
				}
			}
		})
	}
}

// TestStreamHoldsBack checks that text that may start a tool call is not sent until it is
// known not to.
func TestStreamHoldsBack(t *testing.T) {
	s := NewStream(hermes("f"), func() string { return "x" })
	if d := s.Add("Use <too"); len(d) != 1 || d[0].Content != "Use " {
		t.Fatalf("deltas %+v, want the content before the possible tag", d)
	}
	if d := s.Add("ls> wisely"); len(d) != 1 || d[0].Content != "<tools> wisely" {
		t.Fatalf("deltas %+v, want the held-back text once it is not a call", d)
	}
	msg, d := s.Finish()
	if len(d) != 0 || msg.Content != "Use <tools> wisely" {
		t.Fatalf("final deltas %+v, message %+v", d, msg)
	}
}

func TestStreamIDs(t *testing.T) {
	text := `[TOOL_CALLS][{"name": "a", "arguments": {"q": "x"}, "id": "call-given"}, {"name": "b", "arguments": {"n": 1}}]`
	deltas, msg := streamed(mistral("a", "b"), text, 2)
	_, _, calls := joined(t, deltas)
	// The first call's id comes after its arguments, so a generated one is fixed before it.
	want := []Call{{ID: "id1", Name: "a", Arguments: `{"q": "x"}`}, {ID: "id2", Name: "b", Arguments: `{"n": 1}`}}
	if fmt.Sprint(calls) != fmt.Sprint(want) || fmt.Sprint(msg.Calls) != fmt.Sprint(want) {
		t.Errorf("streamed %+v, final %+v, want %+v", calls, msg.Calls, want)
	}
	// In one piece the model's own id is used.
	_, msg = streamed(mistral("a", "b"), text, len(text))
	if msg.Calls[0].ID != "call-given" {
		t.Errorf("id %q, want the model's", msg.Calls[0].ID)
	}
}

// TestStreamCutOff checks a call cut off by the end of the output: announced as far as it
// went, its arguments unfinished, as llama-server's lenient final parse leaves it.
func TestStreamCutOff(t *testing.T) {
	deltas, msg := streamed(hermes("ping"), "<tool_call>\n{\"name\": \"ping\", \"arguments\": {\"a\": ", 1)
	_, _, calls := joined(t, deltas)
	if len(calls) != 1 || calls[0].Name != "ping" || calls[0].Arguments != `{"a":` || len(msg.Calls) != 1 {
		t.Fatalf("calls %+v, message %+v", calls, msg)
	}
}

// TestStreamOrder checks that text before a call goes out first, and that the call is
// announced, then its arguments follow, once its name is whole.
func TestStreamOrder(t *testing.T) {
	s := NewStream(hermes("f"), func() string { return "id" })
	got := fmt.Sprint(s.Add("Sure.\n<tool_call>\n{\"name\": \"f"))
	if want := fmt.Sprint([]Delta{{Content: "Sure.\n", ToolIndex: -1}}); got != want {
		t.Errorf("deltas %s, want %s", got, want)
	}
	got = fmt.Sprint(s.Add(`", "arguments": {}}` + "\n</tool_call>"))
	if want := fmt.Sprint([]Delta{{ToolIndex: 0, ToolID: "id", ToolName: "f"}, {ToolIndex: 0, ToolArgs: "{}"}}); got != want {
		t.Errorf("deltas %s, want %s", got, want)
	}
	if _, d := s.Finish(); len(d) != 0 {
		t.Errorf("final deltas %+v", d)
	}
}

// TestPlainContent checks that without a parser the output is all content.
func TestPlainContent(t *testing.T) {
	if m := Parse("<think>x</think>y", false, Syntax{}); m.Content != "<think>x</think>y" || m.Reasoning != "" {
		t.Errorf("%+v", m)
	}
}
