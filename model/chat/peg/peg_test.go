package peg

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
)

func TestParseLenient(t *testing.T) {
	tests := []struct {
		name string
		p    *P
		in   string
		st   status
		end  int
	}{
		{"literal whole", Lit("<tool>"), "<tool>x", ok, 6},
		{"literal cut off", Lit("<tool>"), "<to", more, 3},
		{"literal mismatch", Lit("<tool>"), "<ta", fail, 0},
		{"until delimiter", Until("</think>"), "abc</think>d", ok, 3},
		{"until partial delimiter at the end", Until("</think>"), "abc</th", ok, 3},
		{"until no delimiter", Until("</think>"), "abc", more, 3},
		{"until two delimiters", Until("<a>", "<b>"), "xy<b>", ok, 2},
		{"rest", Rest(), "anything", more, 8},
		{"json object", JSON(), `{"a": [1, 2.5e3, "x\"y"], "b": null}!`, ok, 36},
		{"json cut in a string", JSON(), `{"a": "x`, more, 8},
		{"json cut in a number", JSON(), `{"a": 12`, more, 8},
		{"json bad", JSON(), `{"a" 1}`, fail, 5},
		{"string escape cut off", StringContent('"'), `ab\`, more, 2},
		{"string unicode cut off", StringContent('"'), `ab\u00`, more, 2},
		{"string ends at quote", StringContent('"'), `ab\"c"d`, ok, 5},
		{"chars", Chars("0-9", 1, -1), "123a", ok, 3},
		{"repeat needs more", Repeat(Lit("ab"), 2, 2), "ab", more, 2},
		{"choice takes first", Choice(Lit("a"), Lit("ab")), "ab", ok, 1},
		{"not", Seq(Not(Lit("x")), Any()), "y", ok, 1},
		{"end", Seq(Lit("a"), End()), "ab", fail, 1},
	}
	for _, tt := range tests {
		ps := &parser{in: tt.in}
		r := ps.run(tt.p, 0)
		if r.st != tt.st || r.end != tt.end {
			t.Errorf("%s: status %d end %d, want %d %d", tt.name, r.st, r.end, tt.st, tt.end)
		}
	}
}

func TestAtomicHidesPartialTags(t *testing.T) {
	p := Seq(Content(Until("<f=")), Opt(Tool(Seq(ToolOpen(Seq(Lit("<f="), ToolName(Lit("get_weather")), Lit(">"))), ToolArgs(JSON())))))
	for _, tt := range []struct {
		in    string
		calls int
	}{{"Hi <f=get_wea", 0}, {"Hi <f=get_weather", 0}, {"Hi <f=get_weather>", 1}, {`Hi <f=get_weather>{"a"`, 1}} {
		nodes, failed, _ := Parse(p, tt.in)
		m, err := Map(tt.in, nodes)
		if failed || err != nil || m.Content != "Hi " || len(m.Calls) != tt.calls {
			t.Errorf("%q: %+v (failed %v, err %v), want content %q and %d calls", tt.in, m, failed, err, "Hi ", tt.calls)
		}
	}
}

func TestMapTaggedArguments(t *testing.T) {
	arg := func(name string, value *P) *P {
		return ToolArg(Seq(ToolArgOpen(Seq(Lit("<p="), ToolArgName(Lit(name)), Lit(">"))), value, ToolArgClose(Lit("</p>"))))
	}
	p := Tool(Seq(ToolOpen(Seq(Lit("<f="), ToolName(Lit("f")), Lit(">"))),
		Star(Choice(arg("city", ToolArgString(Until("</p>"))), arg("opts", ToolArgJSON(Until("</p>"))))),
		ToolClose(Lit("</f>"))))
	in := `<f=f><p=city>Paris "Nord"</p><p=opts>{'metric': True, 'n': None}</p></f>`
	nodes, failed, _ := Parse(p, in)
	m, err := Map(in, nodes)
	if failed || err != nil || len(m.Calls) != 1 {
		t.Fatalf("%+v %v %v", m, failed, err)
	}
	if want := `{"city":"Paris \"Nord\"","opts":{"metric": true, "n": null}}`; m.Calls[0].Arguments != want {
		t.Errorf("arguments %s, want %s", m.Calls[0].Arguments, want)
	}
	// Cut off inside the string: the quote stays open so later text extends it.
	in = `<f=f><p=city>Par`
	nodes, _, _ = Parse(p, in)
	if m, _ = Map(in, nodes); len(m.Calls) != 1 || m.Calls[0].Arguments != `{"city":"Par` {
		t.Errorf("partial: %+v", m)
	}
	in = `<f=f><p=city>a</p><p=city>b</p></f>`
	nodes, _, _ = Parse(p, in)
	if _, err := Map(in, nodes); err == nil || !strings.Contains(err.Error(), "Duplicate tool argument: city") {
		t.Errorf("duplicate argument: %v", err)
	}
}

func TestOptSpaceAndPrefix(t *testing.T) {
	p := Seq(OptSpace("\n<think>\n"), Reasoning(Until("</think>")))
	for _, in := range []string{"<think>x</think>", "\n<think>\nx</think>"} {
		nodes, _, _ := Parse(p, in)
		if m, _ := Map(in, nodes); m.Reasoning != "x" {
			t.Errorf("%q: reasoning %q", in, m.Reasoning)
		}
	}
	if got := Prefix("<|im_start|>assistant\n<think>\n", "<think>"); got.text != "<|im_start|>assistant\n" {
		t.Errorf("prefix %q", got.text)
	}
}

// TestExcludingGrammar checks the grammar of Until on random strings: it matches exactly the
// strings that contain none of the delimiters.
func TestExcludingGrammar(t *testing.T) {
	delims := []string{"<tc>", "ab", "</x>", "ｔ｜"}
	src, err := Grammar(Until(delims...), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	rng := rand.New(rand.NewSource(7))
	alphabet := []string{"<", "t", "c", ">", "a", "b", "/", "x", "ｔ", "｜", "z"}
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for n := rng.Intn(9); n > 0; n-- {
			b.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		s := b.String()
		want := true
		for _, d := range delims {
			want = want && !strings.Contains(s, d)
		}
		m, err := g.NewMatcher("root")
		if err != nil {
			t.Fatal(err)
		}
		got := m.Accept(s) == nil && m.Done()
		if got != want {
			t.Fatalf("%q: grammar accepts %v, want %v\n%s", s, got, want, src)
		}
	}
}

// TestGrammarLazySchemas checks a lazy grammar: rooted at the trigger rules, with each tool's
// schema rules renamed under the tool.
func TestGrammarLazySchemas(t *testing.T) {
	call := func(name string) *P {
		return Rule("tool-"+name, Seq(Lit(`{"name": "`+name+`", "arguments": `),
			Schema(JSON(), "tool-"+name+"-schema", json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)), Lit("}")))
	}
	root := Seq(Content(Until("<tool_call>")), Opt(TriggerRule("tool-call", Seq(Lit("<tool_call>"), Space(), Choice(call("a"), call("b")), Space(), Lit("</tool_call>")))))
	src, err := Grammar(root, true, func(s json.RawMessage) (string, error) { return grammar.FromJSONSchema(s) })
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	for in, want := range map[string]bool{
		`<tool_call>{"name": "a", "arguments": {"n": 12}}</tool_call>`:  true,
		`<tool_call> {"name": "b", "arguments": {"n": 1}} </tool_call>`: true,
		`<tool_call>{"name": "c", "arguments": {"n": 1}}</tool_call>`:   false,
		`<tool_call>{"name": "a", "arguments": {"n": "x"}}</tool_call>`: false,
		`text before`: false,
	} {
		m, _ := g.NewMatcher("root")
		if got := m.Accept(in) == nil && m.Done(); got != want {
			t.Errorf("%s: %v, want %v\n%s", in, got, want, src)
		}
	}
	if !strings.HasPrefix(src, "root ::= tool-call\n") && !strings.Contains(src, "\nroot ::= tool-call\n") {
		t.Errorf("root is not the trigger rule:\n%s", src)
	}
}
