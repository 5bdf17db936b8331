package autoparse

import "testing"

func TestCalculateDiffSplit(t *testing.T) {
	for _, c := range []struct{ left, right, prefix, l, r, suffix string }{
		{"hello world", "hello test", "hello ", "world", "test", ""},
		{"abc", "xyz", "", "abc", "xyz", ""},
		{"prefixA suffix", "prefixB suffix", "prefix", "A", "B", " suffix"},
		{"hello", "hello", "hello", "", "", ""},
		{"", "", "", "", "", ""},
		{"<row><row><row><your><boat><gently>", "<row><row><row><your><boat><gently>", "<row><row><row><your><boat><gently>", "", "", ""},
		{"same", "sameagain", "same", "", "again", ""},
		{"123end", "456end", "", "123", "456", "end"},
		{"aa", "ab", "a", "a", "b", ""},
		{"", "hello", "", "", "hello", ""},
		{"hello", "", "", "hello", "", ""},
		{"left", "right", "", "lef", "righ", "t"},
		{"ab", "a", "a", "b", "", ""},
		{"Xtest", "Ytest", "", "X", "Y", "test"},
		{"<tag>left</tag>", "<tag>righ</tag>", "<tag>", "left", "righ", "</tag>"},
		{"PREFIX</think>Sure", "PREFIX<think>Lemme think</think>Sure", "PREFIX", "", "<think>Lemme think", "</think>Sure"},
		// Markers are never split: the common "ent</div>" of a byte diff stays whole here.
		{"prefix<div>content</div>", "prefix<div>different</div>", "prefix<div>", "cont", "differ", "ent</div>"},
		{"Hello <world>", "Hello test", "Hello ", "<world>", "test", ""},
		// A marker that differs is taken whole, with no byte-wise split inside it.
		{"x<a1>y", "x<a2>y", "x", "<a1>", "<a2>", "y"},
		// The post-loop block adds left's last marker to the suffix a second time, so
		// prefix+left+suffix is not the left text any more (llama.cpp's quirk, kept).
		{"<x><b>", "<x><y><b><b>", "<x>", "", "<y>", "<b><b>"},
		{"<a><b>", "<c><b><b>", "", "<a>", "<c><b>", "<b>"},
	} {
		got := calculateDiffSplit(c.left, c.right)
		want := diffSplit{prefix: c.prefix, suffix: c.suffix, left: c.l, right: c.r}
		if got != want {
			t.Errorf("calculateDiffSplit(%q, %q) = %+v, want %+v", c.left, c.right, got, want)
		}
	}
}

func TestSegmentizeMarkers(t *testing.T) {
	got := segmentizeMarkers("im<blue>daba<dee>da[hey]<a<b>[x")
	want := []segment{{segText, "im"}, {segMarker, "<blue>"}, {segText, "daba"}, {segMarker, "<dee>"},
		{segText, "da"}, {segMarker, "[hey]"}, {segMarker, "<a<b>"}, {segText, "[x"}}
	if len(got) != len(want) {
		t.Fatalf("segmentizeMarkers = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("segment %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestCommonPrefixSuffixHelpers(t *testing.T) {
	for _, c := range []struct{ full, a, b, want string }{
		{"<function name=foo><arg name=bar>", "<arg name=bar>", "<arg name=baz>", "<function name=foo>"},
		{"prefix<test>suffix", "<test>different", "<test>other", "prefix"},
		{"<common>rest", "<common>left", "<common>right", ""},
		{"something", "left", "right", ""},
		{"test", "", "right", ""},
	} {
		if got := untilCommonPrefix(c.full, c.a, c.b); got != c.want {
			t.Errorf("untilCommonPrefix(%q, %q, %q) = %q, want %q", c.full, c.a, c.b, got, c.want)
		}
	}
	for _, c := range []struct{ full, a, b, want string }{
		{"<function name=foo><arg name=bar>100</arg></function>", "<arg name=bar>100</arg>", "<arg name=baz>535</arg>", "</function>"},
		{"rest<common>", "left<common>", "right<common>", ""},
		{"test", "left", "", ""},
		{"<tag>content</tag><extra>", "<tag>value</tag>", "<tag>other</tag>", "<extra>"},
	} {
		if got := afterCommonSuffix(c.full, c.a, c.b); got != c.want {
			t.Errorf("afterCommonSuffix(%q, %q, %q) = %q, want %q", c.full, c.a, c.b, got, c.want)
		}
	}
}
