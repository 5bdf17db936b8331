package tools

import "testing"

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"*.cpp", "main.cpp", true},
		{"*.cpp", "src/main.cpp", false}, // '*' stays within a part
		{"**", "a/b/c", true},
		{"**", "", true},
		{"**/*.cpp", "main.cpp", true}, // "**/" takes no directory too
		{"**/*.cpp", "a/b/main.cpp", true},
		{"src/**/x", "src/x", true},
		{"src/**/x", "src/a/b/x", true},
		{"src/**/x", "srcx", false},
		{"a**b", "a/x/b", true},
		{"?.go", "a.go", true},
		{"?.go", "/.go", false},
		{"[a-c]x", "bx", true},
		{"[a-c]x", "dx", false},
		{"[!a-c]x", "dx", true},
		{"[^a-c]x", "ax", false},
		{"[]]", "]", true},
		{"[ab", "[ab", true}, // an unclosed class is literal
		{"main.cpp", "main.cpp", true},
		{"main.cpp", "Main.cpp", false},
		{"*", "", true},
		{"", "", true},
		{"", "a", false},
	} {
		if got := globMatch(c.pattern, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

func TestPathGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, rel string
		want         bool
	}{
		{"test_tools_builtin.py", "tools/server/tests/unit/test_tools_builtin.py", true}, // base name at any depth
		{"*.txt", "a/b/c.txt", true},
		{"src/*.cpp", "src/main.cpp", true}, // anchored with "**/", which takes no directory too
		{"src/*.cpp", "x/src/main.cpp", true},
		{"src/*.cpp", "x/src/a/main.cpp", false},
		{"**/a.txt", "a.txt", true},
		{"*proj*", "project-alpha", true},
	} {
		if got := pathGlobMatch(c.pattern, c.rel); got != c.want {
			t.Errorf("pathGlobMatch(%q, %q) = %v, want %v", c.pattern, c.rel, got, c.want)
		}
	}
}

// A pattern of many stars against a long name that almost matches is answered at once: the
// matcher's work is bounded by len(pattern)*len(s).
func TestGlobMatchHostile(t *testing.T) {
	pattern := ""
	for i := 0; i < 200; i++ {
		pattern += "*a"
	}
	s := ""
	for i := 0; i < 5000; i++ {
		s += "a"
	}
	if globMatch(pattern+"b", s) {
		t.Fatal("matched a name without b")
	}
}
