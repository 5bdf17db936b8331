package grammar

import (
	"errors"
	"strings"
	"testing"
)

// Example grammars from llama.cpp's grammars/ directory.
const (
	arithmeticGBNF = `root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
`
	jsonGBNF = `root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
`
	listGBNF = `root ::= item+

# Excludes various line break characters
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
`
)

func mustParse(t *testing.T, src string) *Grammar {
	t.Helper()
	g, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, src)
	}
	return g
}

// matches reports whether the whole of s is a string of the root rule.
func matches(t *testing.T, g *Grammar, s string) bool {
	t.Helper()
	m, err := g.NewMatcher("root")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Accept(s); err != nil {
		return false
	}
	return m.Done()
}

func checkCases(t *testing.T, g *Grammar, accept, reject []string) {
	t.Helper()
	for _, s := range accept {
		if !matches(t, g, s) {
			t.Errorf("rejected %q", s)
		}
	}
	for _, s := range reject {
		if matches(t, g, s) {
			t.Errorf("accepted %q", s)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		src       string
		line, col int
		msg       string
	}{
		{"root ::= (\"a\" \"b\"\n", 1, 10, "unbalanced parenthesis"},
		{"root ::= \"a\")\n", 1, 13, "expecting newline"},
		{"root ::= b\nb ::= c\n", 2, 7, `undefined rule "c"`},
		{"root ::= \"a\\q\"\n", 1, 12, `unknown escape \q`},
		{"root ::= [a\\xZZ]\n", 1, 12, "bad escape"},
		{"root ::= \"abc\n", 1, 10, "unterminated string"},
		{"root ::= [abc\n", 1, 10, "unterminated character class"},
		{"root ::= * \"a\"\n", 1, 10, "expecting an item"},
		{"root ::= \"a\"{3,2}\n", 1, 13, "less than its minimum"},
		{"root ::= \"a\"{2\n", 1, 13, "expecting }"},
		{"\n\nroot = \"a\"\n", 3, 6, "expecting ::="},
		{"root ::= \"a\"\nroot ::= \"b\"\n", 2, 1, "defined twice"},
		{"# only a comment\n", 2, 1, "no rules"},
		{"root ::= [z-a]\n", 1, 10, "out of order"},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%q: got %v, want *Error", c.src, err)
			continue
		}
		if pe.Line != c.line || pe.Col != c.col || !strings.Contains(pe.Msg, c.msg) {
			t.Errorf("%q: got %v, want %d:%d %q", c.src, err, c.line, c.col, c.msg)
		}
	}
	if _, err := Parse("root ::= root \"a\" | \"b\"\n"); err == nil || !strings.Contains(err.Error(), "left recursion") {
		t.Errorf("left recursion: got %v", err)
	}
	if _, err := Parse("root ::= x\nx ::= \"a\"? root\n"); err == nil || !strings.Contains(err.Error(), "left recursion") {
		t.Errorf("nullable left recursion: got %v", err)
	}
}

func TestArithmetic(t *testing.T) {
	g := mustParse(t, arithmeticGBNF)
	checkCases(t, g,
		[]string{"1=1\n", "a+b=c\n", "(x1 +2) *y = 42\n", "a=b\nc=d\n", "x_1=(a)\n"},
		[]string{"", "1=1", "1+=1\n", "A=1\n", "(1=1\n", "1==1\n"})
}

func TestJSON(t *testing.T) {
	g := mustParse(t, jsonGBNF)
	checkCases(t, g,
		[]string{`{}`, `{"a":1}`, `{"a": [1, 2.5, -3e4, true, null, "x\n\u00e9"]}`,
			"{\n  \"k\": {\"n\": {}}\n}", `{"s":"héllo 世界"}`, `{"e":"\"\\\t"}`},
		[]string{`[]`, `{`, `{"a"}`, `{"a":01x}`, `{"a":tru}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}", `{} {}`, `{"a":1,}`})
}

func TestListAndClasses(t *testing.T) {
	g := mustParse(t, listGBNF)
	checkCases(t, g,
		[]string{"- a\n", "- milk\n- eggs ü\n"},
		[]string{"", "- \n", "- a", "-a\n", "- a\u2028b\n"})

	g = mustParse(t, `root ::= [a-cx] [^0-9a-z] . [\u00e9-\u00ea] "\U0001F600" [\x41]`)
	checkCases(t, g,
		[]string{"bQ!é😀A", "x-zêA😀A"[:0] + "x-zê😀A"},
		[]string{"dQ!é😀A", "b5!é😀A", "bQ!e😀A", "bQ!é😀B", "bQé😀A"})
}

func TestRepetitions(t *testing.T) {
	g := mustParse(t, `root ::= "a"{2} "b"{1,3} "c"{2,} ("d" | "e")* "f"? "gh"+  # comment
`)
	checkCases(t, g,
		[]string{"aabccgh", "aabbbcccccdedfghgh", "aabbccccdgh"},
		[]string{"abccgh", "aabbbbccgh", "aabcgh", "aabccgf", "aabccg", "aabccffgh"})
	g = mustParse(t, "root ::= [0-9]{0,3} x\nx ::= (\"-\" [a-z]){1,}\n")
	checkCases(t, g, []string{"-a", "123-a-b"}, []string{"1234-a", "12", "12-"})
}

func TestUTF8Split(t *testing.T) {
	g := mustParse(t, `root ::= "é" [\u4e00-\u9fff]+ "😀"`)
	text := "é世界😀"
	m, _ := g.NewMatcher("root")
	for i := 0; i < len(text); i++ {
		if !m.Allows(text[i : i+1]) {
			t.Fatalf("byte %d not allowed", i)
		}
		if err := m.Accept(text[i : i+1]); err != nil {
			t.Fatalf("byte %d: %v", i, err)
		}
		if m.Done() != (i == len(text)-1) {
			t.Fatalf("Done wrong after byte %d", i)
		}
	}
	m, _ = g.NewMatcher("root")
	// "é" is C3 A9; a prefix C3 is fine, but "ü" (C3 BC) is not.
	if !m.Allows("\xc3") || m.Allows("\xc3\xbc") || m.Allows("\xc4") {
		t.Error("partial UTF-8 filtering wrong")
	}
	if m.Allows("\xa9") || m.Allows("\xff") {
		t.Error("invalid UTF-8 allowed")
	}
}

// TestIncremental checks that byte-by-byte and piece-by-piece matching agree
// with matching the whole text.
func TestIncremental(t *testing.T) {
	g := mustParse(t, jsonGBNF)
	for _, text := range []string{`{"a": [1, 2.5, "x\u00e9"], "b": {"c": null}}`, `{"ü": "日本"}`, `{"a":]`} {
		whole, _ := g.NewMatcher("root")
		wholeErr := whole.Accept(text)
		for _, size := range []int{1, 2, 3, 5, 7} {
			m, _ := g.NewMatcher("root")
			var err error
			for i := 0; i < len(text) && err == nil; i += size {
				err = m.Accept(text[i:min(i+size, len(text))])
			}
			if (err == nil) != (wholeErr == nil) || (err == nil && m.Done() != whole.Done()) {
				t.Errorf("%q size %d: err %v done %v; whole err %v done %v", text, size, err, m.Done(), wholeErr, whole.Done())
			}
		}
	}
}

func TestAllowsVocabulary(t *testing.T) {
	g := mustParse(t, arithmeticGBNF)
	vocab := []string{"1", "12", "a", "ab", "=", "+", "(", ")", " ", "\n", "A", "==", "1=", "=\n", "+)", "é"}
	m, _ := g.NewMatcher("root")
	if err := m.Accept("(a+1"); err != nil {
		t.Fatal(err)
	}
	for _, piece := range vocab {
		c := m.Clone()
		want := c.Accept(piece) == nil
		if got := m.Allows(piece); got != want {
			t.Errorf("Allows(%q) = %v, want %v", piece, got, want)
		}
	}
	want := map[string]bool{"1": true, "12": true, "a": false, "ab": false, "+": true, ")": true, " ": true, "\n": true, "+)": false, "=": false}
	for piece, w := range want {
		if m.Allows(piece) != w {
			t.Errorf("Allows(%q) != %v", piece, w)
		}
	}
	// Clone is independent.
	c := m.Clone()
	if err := c.Accept(")=1\n"); err != nil || !c.Done() || m.Done() {
		t.Errorf("clone: err %v, clone done %v, orig done %v", err, c.Done(), m.Done())
	}
	if err := m.Accept("=="); !errors.Is(err, ErrRejected) {
		t.Errorf("Accept(==) = %v", err)
	}
	if err := m.Accept(")"); err != nil {
		t.Errorf("state changed by failed Accept: %v", err)
	}
	if _, err := g.NewMatcher("nope"); err == nil {
		t.Error("NewMatcher on unknown rule succeeded")
	}
}
