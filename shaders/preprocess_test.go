package shaders

import (
	"strings"
	"testing"
)

func TestPreprocess(t *testing.T) {
	src := "a\n#ifdef X\nx\n#ifndef Y\nnoty\n#else\ny\n#endif\n#else\nnotx\n#endif\nb"
	cases := []struct {
		defs []string
		want string
	}{
		{nil, "a\nnotx\nb\n"},
		{[]string{"X"}, "a\nx\nnoty\nb\n"},
		{[]string{"X", "Y"}, "a\nx\ny\nb\n"},
		{[]string{"Y"}, "a\nnotx\nb\n"},
	}
	for _, c := range cases {
		set := map[string]bool{}
		for _, d := range c.defs {
			set[d] = true
		}
		got, err := Preprocess(src, set)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("defs %v: got %q want %q", c.defs, got, c.want)
		}
	}
}

func TestPreprocessErrors(t *testing.T) {
	for _, src := range []string{"#ifdef X\n", "#endif\n", "#else\n", "#ifdef\n#endif", "#ifdef X\n#else\n#else\n#endif", "#include foo"} {
		if _, err := Preprocess(src, nil); err == nil {
			t.Errorf("%q: expected an error", src)
		}
	}
}

func TestEveryFamilyPreprocesses(t *testing.T) {
	fams := Families()
	if len(fams) == 0 {
		t.Fatal("no kernel families embedded")
	}
	for _, f := range fams {
		for _, defs := range [][]string{nil, {"W_F16"}, {"ADD"}, {"W_F16", "ADD"}, {"TO_CACHE"}} {
			src, err := Source(f, defs...)
			if err != nil {
				t.Fatalf("%s %v: %v", f, defs, err)
			}
			if !strings.Contains(src, "@compute") {
				t.Errorf("%s %v: no entry point", f, defs)
			}
		}
	}
	if _, err := Source("nope"); err == nil {
		t.Error("unknown family: expected an error")
	}
}

// TestValueDefines checks that NAME=N declares a u32 constant after the source (so enable
// directives stay first) and that a malformed one fails.
func TestValueDefines(t *testing.T) {
	src, err := Source("attention_lanes", "HEAD_DIM=64", "KV_F16")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(src, "const HEAD_DIM: u32 = 64u;\n") {
		t.Errorf("no HEAD_DIM constant at the end: %q", src[max(0, len(src)-80):])
	}
	if _, err := Source("attention_lanes", "HEAD_DIM=x"); err == nil {
		t.Error("HEAD_DIM=x: expected an error")
	}
	if _, err := Source("attention_lanes", "=4"); err == nil {
		t.Error("=4: expected an error")
	}
}
