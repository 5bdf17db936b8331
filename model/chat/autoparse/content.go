package autoparse

import "strings"

// analyzeContent (C1) finds markers around the assistant's content by comparing plain content
// with a tool call and with reasoning only.
func (z *analyzer) analyzeContent() {
	a := toolProbe(asst(assistantMsg))
	ct, ok := z.compare(a, toolProbe(asstCalls(toolCall("test_func", object{{"arg1", "value1"}}, callID001))))
	if !ok {
		return
	}
	cr, ok := z.compare(a, toolProbe(asstReason("", thinkingContent)))
	if !ok {
		return
	}
	dt, dr := ct.diff, cr.diff
	r := z.a.Reasoning
	c := &z.a.Content
	foundPlain := false
	if trimWhitespace(dt.left) == assistantMsg {
		// llama.cpp parses diff_reasoning.left against itself here: in effect it succeeds
		// unless that text starts with whitespace.
		p1 := seq(space(), lit(dr.left), space(), optional(marker()), space(), end())
		if parseAndExtract(p1, dr.left).ok {
			c.Mode, foundPlain = ContentPlain, true
		} else if r.Mode != ReasoningNone && r.End != "" {
			p2 := seq(lit(r.End), space(), lit(assistantMsg))
			if parseAnywhere(p2, dr.left).ok {
				c.Mode, foundPlain = ContentPlain, true
			}
		}
	}
	if !foundPlain {
		rdiff := dr.left
		if r.End != "" {
			if i := strings.Index(rdiff, r.End); i >= 0 {
				rdiff = rdiff[i+len(r.End):]
			}
		}
		pure := dt.left
		if len(rdiff) > len(dt.left) {
			pure = rdiff
		}
		w := seq(tag("pre", seq(marker(), space())), lit(assistantMsg), space(),
			tag("post", seq(marker(), space())), rest())
		res := parseAnywhere(w, pure)
		c.Start, c.End = res.tag("pre"), res.tag("post")
	}
	if c.Start != "" || c.End != "" {
		c.Mode = ContentAlwaysWrapped
	}
}
