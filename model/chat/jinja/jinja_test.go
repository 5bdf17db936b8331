package jinja

import (
	"errors"
	"testing"
)

func TestRender(t *testing.T) {
	vars, err := DecodeJSON([]byte(`{"xs": [1, 2, 3], "s": "  Hi There  ", "d": {"b": 1, "a": [true, null, "é/\u0001"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ src, want string }{
		{"{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}", "13"},
		{"{% for x in xs %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}", "1"},
		{"{% for x in xs if x > 1 %}{{ loop.index }}/{{ loop.length }}{{ ',' if not loop.last }}{% endfor %}", "1/2,2/2"},
		{"{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}", "6"},
		{"{{ s.strip() }}|{{ s.split() }}|{{ s.strip().startswith('Hi') }}|{{ s | trim | upper }}", "Hi There|['Hi', 'There']|True|HI THERE"},
		{"{{ d | tojson }}", `{"b": 1, "a": [true, null, "é/\u0001"]}`},
		{"{{ d | tojson(indent=2) }}", "{\n  \"b\": 1,\n  \"a\": [\n    true,\n    null,\n    \"é/\\u0001\"\n  ]\n}"},
		{"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "b=1;a=[True, None, 'é/\x01'];"},
		{"{{ xs[1:] }}{{ xs[-1] }}{{ xs[::-1] }}{{ 'abc'[1:] }}", "[2, 3]3[3, 2, 1]bc"},
		{"{% macro m(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", "<1B><23>"},
		{"a\n  {%- if true %}\n  x\n{% endif %}\nb", "a  x\nb"},
		{"  {% if true %}\nyes\n  {% endif %}\n", "yes\n"},
		{"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 1 / 2 }} {{ 'a' ~ 1 }}", "3 -4 1 0.5 a1"},
		{"{{ missing is defined }} {{ missing.x is defined }} {{ none is none }} {{ xs is iterable }} {{ d is mapping }}", "False False True True True"},
		{"{{ xs | selectattr('real', 'defined') | list | length }}{{ xs | reject('equalto', 2) | list }}{{ xs | join('-') }}", "0[1, 3]1-2-3"},
		{"{{ 'x' if false }}|{{ 1 if 0 else 2 }}|{{ {'a': 1}['a'] }}", "|2|1"},
		{"{{ 'line1\nline2' | indent(2) }}", "line1\n  line2"},
		{"{{ d.get('zz', 'dflt') }}{{ d.get('b') }}{{ (xs | first) + (xs | last) }}", "dflt14"},
		// As llama.cpp's engine: none or undefined joined to a string by + or ~ counts as "".
		{"{{ 'a' + missing + 'b' }}|{{ none + 'c' }}|{{ 'd' ~ none }}|{{ missing ~ 'e' }}", "ab|c|d|e"},
		{"{{ '<t{}>{}'.format('1', 2) }}|{{ '{1}{0}{{x}}'.format('a', 'b') }}|{{ '{n}!'.format(n=3) }}", "<t1>2|ba{x}|3!"},
		// Number keys of a dict literal stay numbers, as in Python.
		{"{% set m = {512: 'b', 0: 'a'} %}{% for k, v in m | dictsort %}{{ k + 1 }}{{ v }}{% endfor %}{{ m[0] }}", "1a513ba"},
	}
	for _, tt := range tests {
		tmpl, err := Parse(tt.src)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.src, err)
			continue
		}
		got, err := tmpl.Render(vars.(*Dict))
		if err != nil || got != tt.want {
			t.Errorf("Render(%q) = %q, %v; want %q", tt.src, got, err, tt.want)
		}
	}
}

func TestRaiseException(t *testing.T) {
	tmpl, err := Parse("ok{{ raise_exception('bad input') }}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render(NewDict())
	var ex *Exception
	if !errors.As(err, &ex) || ex.Msg != "bad input" {
		t.Errorf("error = %v, want the exception", err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, src := range []string{"{% if x %}", "{{ x", "{% for %}", "{{ 'a }}", "{% endfor %}"} {
		if _, err := Parse(src); err == nil {
			t.Errorf("Parse(%q) succeeded", src)
		}
	}
}
