package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseDesktopFlags(t *testing.T) {
	o, rest, err := parseDesktopFlags([]string{"serve", "-m", "x.gguf", "--screenshot", "a.png", "-after=7", "--port", "9000", "--window-size", "800x600"})
	if err != nil || o.screenshot != "a.png" || o.after != 7 || o.width != 800 || o.height != 600 {
		t.Fatalf("%+v %v", o, err)
	}
	if !slices.Equal(rest, []string{"-m", "x.gguf", "--port", "9000"}) {
		t.Errorf("server args %q", rest)
	}
	o, rest, err = parseDesktopFlags([]string{"-m", "x.gguf"})
	if err != nil || o.screenshot != "" || o.after != 1 || o.width != 1600 || len(rest) != 2 {
		t.Errorf("defaults: %+v %q %v", o, rest, err)
	}
	for _, bad := range [][]string{{"--after", "0"}, {"--after", "x"}, {"--screenshot"}, {"--screenshot="}, {"--window-size", "10x10"}, {"--window-size", "800"}} {
		if _, _, err := parseDesktopFlags(bad); err == nil || !strings.Contains(err.Error(), "--") {
			t.Errorf("%q: error %v", bad, err)
		}
	}
}

func TestHeadless(t *testing.T) {
	for args, want := range map[string]bool{
		"":                             false,
		"-m x.gguf":                    false,
		"serve -m x.gguf":              false,
		"serve --router-child --no-ui": true,
		"download --progress-lines":    true,
		"bench -m x.gguf":              true,
	} {
		if got := headless(strings.Fields(args)); got != want {
			t.Errorf("headless(%q) = %v", args, got)
		}
	}
}
