package autoparse

import "testing"

func TestMiniPEG(t *testing.T) {
	// space() takes spaces, tabs and newlines but not carriage returns.
	if r := parseAndExtract(seq(tag("s", space()), end()), " \t\n\r"); r.ok {
		t.Errorf("space() consumed a carriage return")
	}
	if r := parseAndExtract(tag("s", space()), " \t\n\rx"); r.tag("s") != " \t\n" {
		t.Errorf("space() = %q, want %q", r.tag("s"), " \t\n")
	}
	// marker() runs to the first closer, across other openers and newlines.
	if r := parseAndExtract(tag("m", marker()), "<a\n<b>c>"); r.tag("m") != "<a\n<b>" {
		t.Errorf("marker() = %q", r.tag("m"))
	}
	if r := parseAndExtract(tag("m", marker()), "[x>y]z"); r.tag("m") != "[x>y]" {
		t.Errorf("marker() = %q", r.tag("m"))
	}
	if parseAndExtract(marker(), "<abc").ok {
		t.Errorf("marker() matched an unclosed tag")
	}
	// until() also stops where the rest of the input begins the delimiter.
	if r := parseAndExtract(tag("u", until("END")), "abcEN"); r.tag("u") != "abc" {
		t.Errorf("until() = %q, want %q", r.tag("u"), "abc")
	}
	if r := parseAndExtract(tag("u", until("END")), "abc"); r.tag("u") != "abc" {
		t.Errorf("until() without the delimiter = %q", r.tag("u"))
	}
	// A failed parse has no tags; a tag inside a failed branch is dropped.
	if r := parseAndExtract(seq(tag("a", lit("x")), lit("y")), "xz"); r.ok || r.tag("a") != "" {
		t.Errorf("failed parse = %+v", r)
	}
	if r := parseAndExtract(choice(seq(tag("a", lit("x")), lit("y")), tag("b", lit("xz"))), "xz"); r.tag("a") != "" || r.tag("b") != "xz" {
		t.Errorf("choice kept a failed branch's tag: %+v", r)
	}
	// Nested tags of one name: the inner one is visited last and wins.
	if r := parseAndExtract(tag("t", seq(lit("a"), tag("t", lit("b")))), "ab"); r.tag("t") != "b" {
		t.Errorf("duplicate tag = %q, want %q", r.tag("t"), "b")
	}
	// parseAnywhere never starts at the end of a non-empty input.
	if parseAnywhere(end(), "ab").ok {
		t.Errorf("parseAnywhere tried the end position")
	}
	if !parseAnywhere(end(), "").ok {
		t.Errorf("parseAnywhere on empty input should parse it once")
	}
	if r := parseAnywhere(tag("m", marker()), "ab<c>d"); r.tag("m") != "<c>" {
		t.Errorf("parseAnywhere marker = %q", r.tag("m"))
	}
	// anyChar() takes whole UTF-8 code points.
	if r := parseAndExtract(tag("c", anyChar()), "｜x"); r.tag("c") != "｜" {
		t.Errorf("anyChar() = %q", r.tag("c"))
	}
}

func TestMarkerFinders(t *testing.T) {
	if got := findLastMarker("a<x>b<y>c"); got != "<y>" {
		t.Errorf("findLastMarker = %q", got)
	}
	if got := findLastMarker("plain"); got != "" {
		t.Errorf("findLastMarker without markers = %q", got)
	}
	if got := findFirstMarker("a<x>b<y>c"); got != "<x>" {
		t.Errorf("findFirstMarker = %q", got)
	}
	if got, ok := lastMarkerAndTail("a<x>b<y>c d"); !ok || got != "<y>c d" {
		t.Errorf("lastMarkerAndTail = %q, %v", got, ok)
	}
	if _, ok := lastMarkerAndTail("no markers"); ok {
		t.Errorf("lastMarkerAndTail succeeded without markers")
	}
}
