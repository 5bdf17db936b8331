package autoparse

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

// parsePrefix parses text whole, as the server does each time the output grows.
func parsePrefix(out Output, text string) ([]*peg.Node, bool, int) {
	return peg.Parse(out.Parser, text)
}

func TestSpecializedNewerDetection(t *testing.T) {
	cases := []struct {
		src  string
		want Builder
	}{
		{`<atem:function_calls> ... <|eom|>`, museGlimmer{}},
		{`<|open|> <|close|> <|end_of_msg|>`, kimiK3{}},
		{`<|START_TEXT|> <|START_ACTION|>`, cohere2MoE{}},
		{`]<]minimax[>[ <tool_call> <invoke name=`, miniMaxM3{}},
		{`{% set dsml_token = '｜DSML｜' %} function_calls tool_calls`, deepSeekDSML{}},
		{`{% set dsml_token = '｜DSML｜' %} tool_calls`, deepSeekDSML{v4: true}},
		{`{{ '<|tool_call>call:' }}`, gemma4{}},
		{`Tool usage guidelines: <function name="x"><param name="y"> <tool_call><function=<parameter=`, miniCPM5{}},
		{`<tool_call> <function= <parameter=`, qwen3Coder{}},
		{`<think> <tool_call> <function= <parameter=`, qwen3Coder{reasoning: true}},
		// The MiniMax check comes before the Qwen XML one (both have <tool_call>).
		{`]<]minimax[>[ <tool_call> <invoke name= <function= <parameter=`, miniMaxM3{}},
		{`<tool_call>{"name": ...}</tool_call>`, nil},
	}
	for _, c := range cases {
		if got := specializedNewer(c.src); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %#v want %#v", c.src, got, c.want)
		}
	}
	if Specialized(`<|START_TEXT|> <|START_ACTION|>`) == nil {
		t.Fatal("Specialized does not use the newer formats")
	}
}

// newerTools are tools with every kind of argument the formats treat apart.
var newerTools = []Tool{
	specialFunction,
	{Name: "edit", Parameters: json.RawMessage(`{"type":"object","properties":{"file":{"type":"string"},"old":{"type":"string"},"new":{"type":"string"},"all":{"type":"boolean"}},"required":["file","old","new"]}`)},
	{Name: "mixed", Parameters: json.RawMessage(`{"type":"object","properties":{"v":{"type":["string","object"]},"n":{"type":["integer","null"]},"todos":{"type":"array","items":{"type":"string"}},"cfg":{"type":"object","properties":{"a":{"type":"number"}}},"unit":{"enum":["c","f"]}}}`)},
	{Name: "empty", Parameters: nil},
}

// TestSpecializedNewerGrammars builds every format for optional and required calls and for a
// response format, and compiles the grammar each gives.
func TestSpecializedNewerGrammars(t *testing.T) {
	formats := map[string]Builder{
		"muse": museGlimmer{}, "k3": kimiK3{}, "cohere": cohere2MoE{}, "minimax": miniMaxM3{},
		"v32": deepSeekDSML{}, "v4": deepSeekDSML{v4: true}, "gemma4": gemma4{}, "minicpm5": miniCPM5{},
		"coder": qwen3Coder{}, "qwen35": qwen3Coder{reasoning: true},
	}
	schema := json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}}}`)
	for name, b := range formats {
		for _, parallel := range []bool{false, true} {
			for _, choice := range []ToolChoice{ChoiceAuto, ChoiceRequired} {
				t.Run(fmt.Sprintf("%s/parallel=%v/choice=%d", name, parallel, choice), func(t *testing.T) {
					out := b.Build(Params{Tools: newerTools, Choice: choice, Parallel: parallel, ExtractReasoning: true})
					if !out.Grammar || out.Lazy != (choice == ChoiceAuto) || out.Lazy != (len(out.Triggers) > 0) {
						t.Fatalf("grammar %v lazy %v triggers %q", out.Grammar, out.Lazy, out.Triggers)
					}
					compile(t, out)
				})
			}
		}
		t.Run(name+"/response-format", func(t *testing.T) {
			out := b.Build(Params{ResponseSchema: schema, ExtractReasoning: true})
			if name == "k3" {
				if out.Grammar {
					t.Fatal("Kimi K3 has no response format grammar")
				}
				return
			}
			if !out.Grammar || out.Lazy {
				t.Fatalf("grammar %v lazy %v", out.Grammar, out.Lazy)
			}
			compile(t, out)
		})
		t.Run(name+"/tool-choice-none", func(t *testing.T) {
			if out := b.Build(Params{Tools: newerTools, Choice: ChoiceNone}); out.Grammar {
				t.Fatal("tool_choice none has a grammar")
			}
		})
	}
}

func TestQwen3CoderCalls(t *testing.T) {
	gp := "<|im_start|>assistant\n"
	out := qwen3Coder{}.Build(Params{Tools: newerTools, Parallel: true, GenerationPrompt: gp})
	want := []string{"<tool_call>", "<function=special_function>", "<function=edit>", "<function=mixed>", "<function=empty>"}
	if !reflect.DeepEqual(out.Triggers, want) {
		t.Fatalf("triggers %q", out.Triggers)
	}
	// Required arguments in another order, a union value read as JSON then as text, and a
	// second call that leaves out <tool_call>.
	text := "On it.\n<function=edit>\n<parameter=new>\nb\n</parameter>\n<parameter=file>\nx.c\n</parameter>\n<parameter=old>\na\n</parameter>\n" +
		"<parameter=all>\ntrue\n</parameter>\n</function>\n</tool_call>\n" +
		"<tool_call>\n<function=mixed>\n<parameter=v>\n{\"k\": 1}\n</parameter>\n<parameter=n>\nnull\n</parameter>\n</function>\n</tool_call>"
	m := parse(t, out, gp, text)
	if m.Content != "On it.\n" || len(m.Calls) != 2 ||
		m.Calls[0].Arguments != `{"new":"b","file":"x.c","old":"a","all":true}` ||
		m.Calls[1].Arguments != `{"v":{"k": 1},"n":null}` {
		t.Fatalf("%+v", m)
	}
	checkStream(t, out, gp, text)
	text = "<tool_call>\n<function=mixed>\n<parameter=v>\n{not json\n</parameter>\n</function>\n</tool_call>"
	if m := parse(t, out, gp, text); len(m.Calls) != 1 || m.Calls[0].Arguments != `{"v":"{not json"}` {
		t.Fatalf("%+v", m)
	}
}

func TestGemma4NestedArguments(t *testing.T) {
	gp := "<|turn>model\n"
	out := gemma4{}.Build(Params{Tools: newerTools, ExtractReasoning: true, GenerationPrompt: gp})
	if !reflect.DeepEqual(out.Triggers, []string{"<|tool_call>"}) {
		t.Fatalf("triggers %q", out.Triggers)
	}
	text := `<|channel>thought` + "\nPlan<channel|>Sure.<|tool_call>call:mixed{v:{k:<|\"|>a \"q\"<|\"|>,l:[1, true,null,{}]},todos:[<|\"|>x<|\"|>],n:-2}<tool_call|>"
	m := parse(t, out, gp, text)
	if m.Reasoning != "Plan" || m.Content != "Sure." || len(m.Calls) != 1 || m.Calls[0].Name != "mixed" ||
		m.Calls[0].Arguments != `{"v":{"k":"a \"q\"","l":[1,true,null,{}]},"todos":["x"],"n":-2}` {
		t.Fatalf("%+v", m)
	}
	checkStream(t, out, gp, text)
}

func TestDeepSeekThinkingFromGenerationPrompt(t *testing.T) {
	call := "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"edit\">\n" +
		"<｜DSML｜parameter name=\"file\" string=\"true\">a.c</｜DSML｜parameter>\n" +
		"<｜DSML｜parameter name=\"old\" string=\"true\">x</｜DSML｜parameter>\n" +
		"<｜DSML｜parameter name=\"new\" string=\"true\">y</｜DSML｜parameter>\n" +
		"<｜DSML｜parameter name=\"all\" string=\"false\">false</｜DSML｜parameter>\n" +
		"</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
	thinking := "<｜Assistant｜><think>"
	out := deepSeekDSML{v4: true}.Build(Params{Tools: newerTools, ExtractReasoning: true, GenerationPrompt: thinking})
	// A call ends reasoning that has no </think>.
	m := parse(t, out, thinking, "Checking\n\n"+call)
	if m.Reasoning != "Checking" || m.Content != "" || len(m.Calls) != 1 ||
		m.Calls[0].Arguments != `{"file":"a.c","old":"x","new":"y","all":false}` {
		t.Fatalf("%+v", m)
	}
	checkStream(t, out, thinking, "Checking\n\n"+call)
	// Thinking off: the generation prompt's bare </think> is read, the rest is content.
	off := "<｜Assistant｜></think>"
	out = deepSeekDSML{v4: true}.Build(Params{Tools: newerTools, ExtractReasoning: true, GenerationPrompt: off})
	if m := parse(t, out, off, "Hi.\n\n"+call); m.Reasoning != "" || m.Content != "Hi." || len(m.Calls) != 1 {
		t.Fatalf("%+v", m)
	}
}

func TestCohere2MoERequiredCalls(t *testing.T) {
	gp := "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>"
	out := cohere2MoE{}.Build(Params{Tools: newerTools, Choice: ChoiceRequired, Parallel: true, ExtractReasoning: true, GenerationPrompt: gp})
	text := `R<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}}, {"tool_call_id": 1, "tool_name": "empty", "parameters": {}}]<|END_ACTION|><|END_OF_TURN_TOKEN|>`
	m := parse(t, out, gp, text)
	if m.Reasoning != "R" || len(m.Calls) != 2 || m.Calls[0].ID != "0" || m.Calls[1].ID != "1" || m.Calls[1].Arguments != "{}" {
		t.Fatalf("%+v", m)
	}
	checkStream(t, out, gp, text)
	// Text is not an answer when a call is required.
	if _, failed, _ := parsePrefix(out, gp+"R<|END_THINKING|><|START_TEXT|>Hello<|END_TEXT|>"); !failed {
		t.Fatalf("text parsed as a required call")
	}
}

func TestMuseGlimmerTriggers(t *testing.T) {
	out := museGlimmer{}.Build(Params{Tools: newerTools[:1], ExtractReasoning: true, GenerationPrompt: museStart})
	if !reflect.DeepEqual(out.Triggers, []string{" to=special_function"}) {
		t.Fatalf("triggers %q", out.Triggers)
	}
	text := " to=self<|message|>Hmm<|eom|><|start|>assistant to=special_function<|message|><atem:function_calls>\n" +
		"<atem:invoke name=\"special_function\">\n<atem:parameter name=\"arg1\">7</atem:parameter>\n</atem:invoke>\n</atem:function_calls>"
	m := parse(t, out, museStart, text)
	if m.Reasoning != "Hmm" || len(m.Calls) != 1 || m.Calls[0].Arguments != `{"arg1":7}` {
		t.Fatalf("%+v", m)
	}
	checkStream(t, out, museStart, text)
}

func TestMiniMaxM3ThinkingOff(t *testing.T) {
	gp := "]~b]ai\n</mm:think>"
	out := miniMaxM3{}.Build(Params{Tools: newerTools, ExtractReasoning: true, GenerationPrompt: gp})
	text := "Ok]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"special_function\">]<]minimax[>[<arg1>3]<]minimax[>[</arg1>]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>"
	m := parse(t, out, gp, text)
	if m.Reasoning != "" || m.Content != "Ok" || len(m.Calls) != 1 || m.Calls[0].Arguments != `{"arg1":3}` {
		t.Fatalf("%+v", m)
	}
}

func TestPermuteEachOnce(t *testing.T) {
	out := qwen3Coder{}.Build(Params{Tools: newerTools[1:2], Choice: ChoiceRequired, GenerationPrompt: qwenGenPrefix})
	twice := "<tool_call>\n<function=edit>\n<parameter=file>\na\n</parameter>\n<parameter=file>\nb\n</parameter>\n<parameter=old>\nc\n</parameter>\n</function>\n</tool_call>"
	if _, failed, _ := parsePrefix(out, qwenGenPrefix+twice); !failed {
		t.Fatal("a required argument read twice")
	}
}

func TestMiniMaxM3ObjectWithoutProperties(t *testing.T) {
	cfg := Tool{Name: "set_config", Parameters: json.RawMessage(`{"type":"object","properties":{"config":{"type":"object"}},"required":["config"]}`)}
	gp := "]~b]ai\n"
	out := miniMaxM3{}.Build(Params{Tools: []Tool{cfg}, ExtractReasoning: true, GenerationPrompt: gp})
	text := "]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"set_config\">]<]minimax[>[<config>{\"a\": [1]}]<]minimax[>[</config>]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>"
	m := parse(t, out, gp, text)
	if len(m.Calls) != 1 || m.Calls[0].Arguments != `{"config":{"a": [1]}}` {
		t.Fatalf("%+v", m)
	}
	checkStream(t, out, gp, text)
}

// TestMiniMaxM3NestedElements checks values written as nested elements: an array of objects
// (<item>s) and an object, whitespace between elements, streamed prefixes that only grow.
func TestMiniMaxM3NestedElements(t *testing.T) {
	order := Tool{Name: "order", Parameters: json.RawMessage(`{"type":"object","properties":{
		"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}}}},
		"ship":{"type":"object","properties":{"city":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}}},
		"required":["items","ship"]}`)}
	gp := "]~b]ai\n"
	out := miniMaxM3{}.Build(Params{Tools: []Tool{order}, ExtractReasoning: true, GenerationPrompt: gp})
	const ns = "]<]minimax[>["
	text := ns + "<tool_call>\n" + ns + `<invoke name="order">` + ns + "<items>\n" +
		ns + "<item>" + ns + "<sku>b-1</sku>" + ns + "</sku>" + ns + "<qty>2" + ns + "</qty>" + ns + "</item>\n" +
		ns + "<item>" + ns + "<qty>3" + ns + "</qty>" + ns + "</item>" + ns + "</items>" +
		ns + "<ship>" + ns + "<city>Oslo" + ns + "</city>" + ns + "<tags>" + ns + "<item>a" + ns + "</item>" + ns + "<item>b" + ns + "</item>" + ns + "</tags>" + ns + "</ship>" +
		ns + "</invoke>\n" + ns + "</tool_call>"
	m := parse(t, out, gp, text)
	want := `{"items":[{"sku":"b-1</sku>","qty":2},{"qty":3}],"ship":{"city":"Oslo","tags":["a","b"]}}`
	if len(m.Calls) != 1 || m.Calls[0].Arguments != want {
		t.Fatalf("%+v, want arguments %s", m, want)
	}
	checkStream(t, out, gp, text)
	compile(t, out)
}
