package chat

import "testing"

func TestCapsChatML(t *testing.T) {
	// llama-server reports these for its ChatML fallback (props.body in the wire captures).
	want := Caps{StringContent: true, SystemRole: true}
	if got := chatMLTemplate().Caps(); got != want {
		t.Errorf("ChatML caps %+v, want %+v", got, want)
	}
}

func TestCapsFullTemplate(t *testing.T) {
	src := `{%- if tools %}{% for t in tools %}[tool {{ t.function.name }}]{% endfor %}{% endif -%}
{%- for m in messages -%}
<{{ m.role }}>
{%- if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif -%}
{%- if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif -%}
{%- for c in m.tool_calls or [] %}[call {{ c.function.name }} {{ c.function.arguments }}]{% endfor -%}
{%- endfor -%}
{%- if reasoning_effort is defined %}effort={{ reasoning_effort }}{% endif -%}`
	tmpl, err := New(src, "test")
	if err != nil {
		t.Fatal(err)
	}
	want := Caps{StringContent: true, TypedContent: true, SystemRole: true, Tools: true, ToolCalls: true,
		ParallelToolCalls: true, ObjectArguments: true, PreserveReasoning: true, ReasoningEffort: true}
	if got := tmpl.Caps(); got != want {
		t.Errorf("caps %+v, want %+v", got, want)
	}

	first, err := New(`{% for m in messages %}{{ m.content }}{% for c in (m.tool_calls or [])[:1] %}{{ c.function.name }}{% endfor %}{% endfor %}`, "first-call")
	if err != nil {
		t.Fatal(err)
	}
	if c := first.Caps(); !c.ToolCalls || c.ParallelToolCalls || c.Tools || c.TypedContent {
		t.Errorf("a template rendering only the first call: %+v", c)
	}
}
