package engine

import "testing"

// TestIndentEnds follows llama-server's n_indent over text arriving piece by piece: the first
// line is never checked, a line counts once it has a character past its indentation, and a
// short indentation ends the generation with the line cut after its indentation.
func TestIndentEnds(t *testing.T) {
	for _, c := range []struct {
		name   string
		pieces []string
		stopAt int    // index of the piece after which generation ends, -1 for never
		text   string // the text when it ends
	}{
		{"indented body", []string{"def f():", "\n", "    ", "return", " 1", "\n", "    pass"}, -1, ""},
		{"dedent ends", []string{"def f():", "\n    return 1", "\n", "x = 2"}, 3, "def f():\n    return 1\n"},
		{"short indent kept", []string{"if a:", "\n", "  ", "b"}, 3, "if a:\n  "},
		{"blank indentation waits", []string{"a", "\n", "  ", " ", " ", "\t", "b"}, -1, ""},
		{"first line unchecked", []string{"x", " = ", "1"}, -1, ""},
		{"tab counts as one", []string{"if a:", "\n\t\t", "b"}, 2, "if a:\n\t\t"},
		{"two lines in one piece", []string{"a", "\n    b\nc"}, -1, ""}, // as llama-server: one newline a token
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &generation{p: Params{NIndent: 4}}
			if c.name == "tab counts as one" {
				g.p.NIndent = 3
			}
			stopped := -1
			for i, piece := range c.pieces {
				g.text = append(g.text, piece...)
				if g.indentEnds() {
					stopped = i
					break
				}
			}
			if stopped != c.stopAt || (stopped >= 0 && string(g.text) != c.text) {
				t.Errorf("stopped after piece %d with %q, want %d with %q", stopped, g.text, c.stopAt, c.text)
			}
		})
	}
}

// TestIndentKeepsDeliveredText: a cut never takes back text already sent to the client.
func TestIndentKeepsDeliveredText(t *testing.T) {
	g := &generation{p: Params{NIndent: 4}, text: []byte("a\n")}
	g.indentEnds()
	g.text = append(g.text, "bcd"...)
	g.sent = 4
	if !g.indentEnds() || string(g.text) != "a\nbc" {
		t.Errorf("text %q after the cut, want the delivered \"a\\nbc\"", g.text)
	}
}
