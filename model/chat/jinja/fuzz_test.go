package jinja

import (
	"testing"
	"time"
)

// FuzzTemplate parses templates and renders those that parse with a chat-like context: never
// a panic, and bounded time and output.
func FuzzTemplate(f *testing.F) {
	for _, seed := range []string{
		`{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}`,
		`{{ messages | length }} {{ (messages[0].content ~ "x") * 3 }} {{ range(5) | join(",") }}`,
		`{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}`,
		`{% macro m(x, y=2) %}{{ x + y }}{% endmacro %}{{ m(1) }}{{ messages | tojson }}`,
		`{{ "a,b" .split(",") | map("upper") | list }}{% raw %}{{{% endraw %}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return
		}
		start := time.Now()
		tmpl, err := Parse(src)
		if err != nil {
			return
		}
		vars := NewDict()
		msg := NewDict()
		msg.Set("role", "user")
		msg.Set("content", "Hello, world")
		vars.Set("messages", []any{msg})
		vars.Set("add_generation_prompt", true)
		vars.Set("bos_token", "<s>")
		out, _ := tmpl.Render(vars)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%v to render a %d-byte template", d, len(src))
		}
		if len(out) > 64<<20 {
			t.Fatalf("%d bytes of output", len(out))
		}
	})
}
