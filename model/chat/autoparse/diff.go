package autoparse

import "strings"

// isSpace is C's isspace on a byte, which the trim helpers use.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func trimWhitespace(s string) string { return trimTrailingWhitespace(trimLeadingWhitespace(s)) }

func trimLeadingWhitespace(s string) string {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return s[i:]
}

func trimTrailingWhitespace(s string) string {
	i := len(s)
	for i > 0 && isSpace(s[i-1]) {
		i--
	}
	return s[:i]
}

// segmentKind tells text from a marker (a <...> or [...] run).
type segmentKind int

const (
	segText segmentKind = iota
	segMarker
)

type segment struct {
	kind  segmentKind
	value string
}

// segmentizeMarkers splits text into markers and the text between them. An opener inside a
// marker is ignored, and an unclosed marker at the end is text.
func segmentizeMarkers(text string) []segment {
	var segs []segment
	inMarker := false
	var opener byte
	last := 0
	for pos := 0; pos < len(text); pos++ {
		c := text[pos]
		switch {
		case !inMarker && (c == '<' || c == '['):
			if last < pos {
				segs = append(segs, segment{segText, text[last:pos]})
			}
			last = pos
			inMarker = true
			opener = c
		case inMarker && (opener == '<' && c == '>' || opener == '[' && c == ']'):
			segs = append(segs, segment{segMarker, text[last : pos+1]})
			last = pos + 1
			inMarker = false
		}
	}
	if last < len(text) {
		segs = append(segs, segment{segText, text[last:]})
	}
	return segs
}

// pruneWhitespaceSegments drops the segments that are only whitespace.
func pruneWhitespaceSegments(segs []segment) []segment {
	var out []segment
	for _, s := range segs {
		if trimWhitespace(s.value) != "" {
			out = append(out, s)
		}
	}
	return out
}

// diffSplit is two texts as a common prefix, the differing middles and a common suffix.
type diffSplit struct {
	prefix, suffix, left, right string
}

func concatSegments(segs []segment, from, to int) string { // inclusive range
	var b strings.Builder
	for i := from; i <= to; i++ {
		b.WriteString(segs[i].value)
	}
	return b.String()
}

func commonPrefixLen(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func commonSuffixLen(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

// calculateDiffSplit diffs left and right segment by segment, so markers are never split, and
// splits text byte-wise only at the edges of the differing region. It keeps llama.cpp's
// quirks (a segment may be added to the suffix twice).
func calculateDiffSplit(left, right string) diffSplit {
	L, R := segmentizeMarkers(left), segmentizeMarkers(right)
	if len(L) == 0 {
		return diffSplit{right: right}
	}
	if len(R) == 0 {
		return diffSplit{left: left}
	}
	ls, le, rs, re := 0, len(L)-1, 0, len(R)-1
	lfc, rfc := false, false
	prefix, suffix := "", ""
	for ls != le && rs != re {
		adv := false
		if L[ls] == R[rs] {
			prefix += L[ls].value
			ls++
			rs++
			adv = true
		}
		if L[le] == R[re] {
			suffix = L[le].value + suffix
			if ls != le {
				le--
			} else {
				lfc = true
			}
			if rs != re {
				re--
			} else {
				rfc = true
			}
			adv = true
		}
		if !adv {
			break
		}
	}
	switch {
	case ls == le && rs != re:
		if L[ls] == R[re] {
			suffix = R[re].value + suffix
			re--
			lfc = true
		} else if L[ls] == R[rs] {
			prefix += R[rs].value
			rs++
			lfc = true
		}
	case rs == re && ls != le:
		if L[le] == R[rs] {
			suffix = L[le].value + suffix
			le--
			rfc = true
		} else if L[ls] == R[rs] {
			prefix += L[ls].value
			ls++
			rfc = true
		}
	case ls == le && rs == re && L[ls] == R[rs] && L[ls].kind == segMarker:
		prefix += R[rs].value
		lfc, rfc = true, true
	}
	canTextSuffix := L[le].kind == segText && R[re].kind == segText
	canTextPrefix := R[rs].kind == segText && L[ls].kind == segText
	lEnd, rEnd := le, re
	if lfc {
		lEnd--
	}
	if rfc {
		rEnd--
	}
	remL, remR := concatSegments(L, ls, lEnd), concatSegments(R, rs, rEnd)
	sl, pl := 0, 0
	if canTextSuffix {
		sl = commonSuffixLen(remL, remR)
	}
	if canTextPrefix {
		pl = commonPrefixLen(remL[:len(remL)-sl], remR[:len(remR)-sl])
	}
	out := diffSplit{
		prefix: prefix + remL[:pl],
		suffix: remL[len(remL)-sl:] + suffix,
		left:   remL[pl : len(remL)-sl],
		right:  remR[pl : len(remR)-sl],
	}
	if out.left == "" && out.right == "" {
		out.prefix, out.suffix = left, ""
	}
	if out.left == "" && out.right != "" && len(left) <= len(right) && strings.HasPrefix(right, left) {
		out.prefix, out.suffix, out.right = left, "", right[len(left):]
	}
	return out
}

// untilCommonPrefix returns full up to the first occurrence of the common prefix of a and b.
func untilCommonPrefix(full, a, b string) string {
	n := commonPrefixLen(a, b)
	if n == 0 {
		return ""
	}
	p := strings.Index(full, a[:n])
	if p < 0 {
		return ""
	}
	return full[:p]
}

// afterCommonSuffix returns full after the last occurrence of the common suffix of a and b.
func afterCommonSuffix(full, a, b string) string {
	n := commonSuffixLen(a, b)
	if n == 0 {
		return ""
	}
	p := strings.LastIndex(full, a[len(a)-n:])
	if p < 0 {
		return ""
	}
	return full[p+n:]
}
