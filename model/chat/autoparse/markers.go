package autoparse

import "strings"

// detectAssistantStart returns what the template writes before an assistant message's
// content (reasoning markers excluded).
func (z *analyzer) detectAssistantStart() string {
	base := probeParams{enableThinking: true}
	c, ok := z.compare(base.with(userMessage(userMsg)), base.with(userMessage(userMsg), asst(assistantMsg)))
	if !ok {
		return ""
	}
	pre := c.diff.right
	if i := strings.Index(pre, assistantMsg); i >= 0 {
		pre = pre[:i]
	}
	r := z.a.Reasoning
	for _, m := range []string{r.Start, r.End} {
		if m == "" {
			continue
		}
		if i := strings.Index(pre, trimWhitespace(m)); i >= 0 {
			pre = pre[:i]
		}
	}
	return trimWhitespace(pre)
}

// detectUserStart returns what the template writes before a user message's content,
// without the end of the previous turn.
func (z *analyzer) detectUserStart() string {
	base := probeParams{enableThinking: true}
	c, ok := z.compare(base.with(), base.with(userMessage(userMsg)))
	if !ok {
		first := []object{userMessage(userMsgTwo), asst(assistantMsg)}
		c, ok = z.compare(base.with(first...), base.with(append(first, userMessage(userMsg))...))
		if !ok {
			return ""
		}
	}
	s := c.diff.right
	if i := strings.Index(s, assistantMsg); i >= 0 {
		s = s[i+len(assistantMsg):]
	}
	cand := s
	if i := strings.Index(s, userMsg); i >= 0 {
		cand = s[:i]
	}
	var b strings.Builder
	seenMarker := false
	for _, seg := range segmentizeMarkers(cand) {
		if !seenMarker {
			if seg.kind == segMarker {
				low := strings.ToLower(seg.value)
				if strings.Contains(low, "end") || strings.Contains(low, "close") {
					continue
				}
			} else if trimWhitespace(seg.value) == "" {
				continue
			}
		}
		b.WriteString(seg.value)
		if seg.kind == segMarker {
			seenMarker = true
		}
	}
	return trimWhitespace(b.String())
}

// collectPreservedTokens lists every marker found, trimmed and without repeats.
func (z *analyzer) collectPreservedTokens() {
	a := &z.a
	t := &a.Tools
	for _, m := range []string{
		a.Reasoning.Start, a.Reasoning.End, a.Content.Start, a.Content.End,
		t.Format.SectionStart, t.Format.SectionEnd, t.Format.PerCallStart, t.Format.PerCallEnd,
		t.Function.NamePrefix, t.Function.NameSuffix, t.Function.ArgsSeparator, t.Function.Close,
		t.Arguments.Start, t.Arguments.End, t.Arguments.NamePrefix, t.Arguments.NameSuffix,
		t.Arguments.Separator, t.Arguments.ValuePrefix, t.Arguments.ValueSuffix,
		t.CallID.Prefix, t.CallID.Suffix,
	} {
		m = trimWhitespace(m)
		if m != "" && !contains(a.PreservedTokens, m) {
			a.PreservedTokens = append(a.PreservedTokens, m)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
