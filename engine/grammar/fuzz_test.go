package grammar

import (
	"testing"
	"time"
)

// FuzzGrammar parses GBNF sources and, when one parses, matches text against its root: never a
// panic, and bounded time for each.
func FuzzGrammar(f *testing.F) {
	for _, seed := range []struct{ src, text string }{
		{`root ::= "yes" | "no"`, "yes"},
		{`root ::= [a-z]+ ("," [a-z]+)*`, "ab,cd"},
		{`root ::= item{2,4}
item ::= [0-9] | "(" root ")"`, "1(23)4"},
		{`root ::= [^"\\] | "\\" ["\\/bfnrt]`, `\n`},
		{`root ::= "\u00e9"? [\u4e00-\u9fff]*`, "é中文"},
	} {
		f.Add(seed.src, seed.text)
	}
	f.Fuzz(func(t *testing.T, src, text string) {
		if len(src) > 4096 || len(text) > 256 {
			return
		}
		start := time.Now()
		g, err := Parse(src)
		if err != nil {
			return
		}
		m, err := g.NewMatcher("root")
		if err != nil {
			return
		}
		for i := 0; i < len(text) && !m.Dead(); i++ {
			_ = m.Allows(text[i : i+1])
			if m.Accept(text[i:i+1]) != nil {
				break
			}
		}
		m.Done()
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%v for a %d-byte grammar and %d bytes of text", d, len(src), len(text))
		}
	})
}
