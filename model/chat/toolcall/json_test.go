package toolcall

import (
	"strings"
	"testing"
)

func TestFormatNumber(t *testing.T) {
	for src, want := range map[string]string{
		"1": "1", "-7": "-7", "-0": "0", "18446744073709551615": "18446744073709551615",
		"1.0": "1.0", "2.50": "2.5", "1.5e3": "1500.0", "-0.0": "-0.0", "0.0001": "0.0001",
		"0.00001": "1e-05", "1e14": "100000000000000.0", "1e15": "1e+15", "1e100": "1e+100",
		"123.456e-10": "1.23456e-08", "3.14159": "3.14159",
	} {
		if got := formatNumber(src); got != want {
			t.Errorf("formatNumber(%s) = %s, want %s", src, got, want)
		}
	}
}

func TestDumpCompact(t *testing.T) {
	v, _, r := parseJSON(`{ "a" : [1, true, null, "x\"y\u00e9\ud83d\ude00/"], "b": {} }`, 0)
	if r != jsonComplete {
		t.Fatalf("result %v", r)
	}
	if got, want := dump(v), `{"a":[1,true,null,"x\"y\u00e9\ud83d\ude00/"],"b":{}}`; got != want {
		t.Errorf("dump = %s, want %s", got, want)
	}
}

// TestDumpPrefixes checks the property streaming rests on: the dump of every prefix of a JSON
// text is a prefix of the dump of the whole.
func TestDumpPrefixes(t *testing.T) {
	for _, text := range []string{
		`{"city": "Paris", "days": [1, 2.50, -3e2], "opts": {"metric": true, "note": null}, "s": "a\nb\u00e9\ud83d\ude00"}`,
		`[{"name": "f", "arguments": {"x": "y"}}, {"name": "g"}]`,
	} {
		full, _, r := parseJSON(text, 0)
		if r != jsonComplete {
			t.Fatalf("%s: result %v", text, r)
		}
		want := dump(full)
		prev := ""
		for i := 1; i < len(text); i++ {
			v, _, r := parseJSON(text[:i], 0)
			if r != jsonIncomplete {
				t.Fatalf("prefix %q: result %v, want incomplete", text[:i], r)
			}
			got := dump(v)
			if !strings.HasPrefix(want, got) {
				t.Fatalf("prefix %q dumps %q, not a prefix of %q", text[:i], got, want)
			}
			if !strings.HasPrefix(got, prev) {
				t.Fatalf("prefix %q dumps %q, shorter than the previous %q", text[:i], got, prev)
			}
			prev = got
		}
	}
}

func TestParseJSONInvalid(t *testing.T) {
	for _, text := range []string{`{"a" 1}`, `[1 2]`, `{"a": tru3}`, `"\x"`, `{'a': 1}`, `-a`} {
		if _, _, r := parseJSON(text, 0); r != jsonInvalid {
			t.Errorf("parseJSON(%q) = %v, want invalid", text, r)
		}
	}
}
