package engine

import "testing"

func TestFindStop(t *testing.T) {
	cases := []struct {
		text  string
		stops []string
		from  int
		idx   int
		word  string
	}{
		{"hello world", []string{"wor"}, 0, 6, "wor"},
		{"hello world", []string{"xyz", "lo"}, 0, 3, "lo"},
		{"hello world", []string{"o w", "ll"}, 0, 2, "ll"},
		{"hello world", []string{"hello"}, 8, -1, ""}, // ended before from
		{"hello world", []string{"world"}, 10, 6, "world"},
		{"abc", []string{""}, 0, -1, ""},
	}
	for _, c := range cases {
		idx, word := findStop(c.text, c.stops, c.from)
		if idx != c.idx || word != c.word {
			t.Errorf("findStop(%q, %q, %d) = %d %q, want %d %q", c.text, c.stops, c.from, idx, word, c.idx, c.word)
		}
	}
}

func TestHeldBack(t *testing.T) {
	cases := []struct {
		text  string
		stops []string
		want  int
	}{
		{"hello wo", []string{"world"}, 2},
		{"hello w", []string{"world", "w"}, 1},
		{"hello", []string{"xyz"}, 0},
		{"ab", []string{"abc"}, 2},
		{"", []string{"abc"}, 0},
		{"x</", []string{"</s>", "<|end|>"}, 2},
	}
	for _, c := range cases {
		if got := heldBack(c.text, c.stops); got != c.want {
			t.Errorf("heldBack(%q, %q) = %d, want %d", c.text, c.stops, got, c.want)
		}
	}
}
