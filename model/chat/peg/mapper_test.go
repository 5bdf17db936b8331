package peg

import "testing"

// TestNormalizeValue checks the Python-to-JSON conversion of argument values, as llama.cpp's
// normalize_quotes_to_json: escapes kept as written, quotes swapped, literals converted, and a
// value cut off mid-word or mid-string converted so that it only grows as the stream goes on.
func TestNormalizeValue(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a": 1}`, `{"a": 1}`},
		{`True`, `true`},
		{`Tr`, `tr`},
		{`None`, `null`},
		{`Fals`, `fals`},
		{`Trueish`, `Trueish`},
		{`{'a': True, 'b': [None, False]}`, `{"a": true, "b": [null, false]}`},
		{`'it\'s'`, `"it's"`},
		{`'say "hi"'`, `"say \"hi\""`},
		{`'a\nb'`, `"a\nb"`},
		{`"First line\nSecond`, `"First line\nSecond`},
		{`{'x': 'Tru`, `{"x": "Tru`},
		{`"a 'b' c"`, `"a 'b' c"`},
	} {
		if got := normalizeValue(c.in); got != c.want {
			t.Errorf("normalizeValue(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestNormalizeValueGrows feeds a value one character at a time: each conversion extends the
// one before, as a streamed call's arguments must.
func TestNormalizeValueGrows(t *testing.T) {
	full := `{'code': "print(\"x\")\n", 'on': True, 'off': None}`
	prev := ""
	for i := 1; i <= len(full); i++ {
		got := normalizeValue(full[:i])
		if len(got) < len(prev) || got[:len(prev)] != prev {
			t.Fatalf("prefix %q: %q does not extend %q", full[:i], got, prev)
		}
		prev = got
	}
	if prev != `{"code": "print(\"x\")\n", "on": true, "off": null}` {
		t.Fatalf("final %q", prev)
	}
}
