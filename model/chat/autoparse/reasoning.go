package autoparse

import "strings"

// analyzeReasoning finds the reasoning markers: R1 from rendering reasoning_content, R2 from
// toggling enable_thinking, R3 from reasoning that only shows beside tool calls.
func (z *analyzer) analyzeReasoning() {
	z.compareReasoningPresence()
	z.compareThinkingEnabled()
	if z.caps.ToolCalls {
		z.compareReasoningScope()
	}
}

// compareReasoningPresence (R1) renders an assistant message without and with reasoning.
func (z *analyzer) compareReasoningPresence() {
	base := probeParams{enableThinking: true}
	c, ok := z.compare(
		base.with(userMessage(userMsg), asst(assistantMsg)),
		base.with(userMessage(userMsg), asstReason(assistantMsg, thinkingContent)))
	if !ok || c.diff.right == "" || !strings.Contains(c.diff.right, thinkingContent) {
		return
	}
	wrapped := seq(tag("pre", seq(marker(), space())), lit(thinkingContent),
		tag("post", seq(space(), marker(), space())), rest())
	delimiter := seq(lit(thinkingContent), space(), optional(tag("post", seq(marker(), space()))), rest())
	res := parseAnywhere(wrapped, c.outputB)
	if !res.ok {
		res = parseAnywhere(delimiter, c.outputB)
	}
	if !res.ok {
		return
	}
	r := &z.a.Reasoning
	pre, post := res.tag("pre"), res.tag("post")
	switch {
	case pre != "" && post != "":
		r.Mode, r.Start, r.End = ReasoningTagBased, pre, post
	case post != "":
		r.Mode, r.End = ReasoningTagBased, post
	}
}

// compareThinkingEnabled (R2) renders the generation prompt with thinking off and on.
func (z *analyzer) compareThinkingEnabled() {
	a := probeParams{messages: []object{userMessage(userMsg)}, addGenerationPrompt: true}
	b := a
	b.enableThinking = true
	c, ok := z.compare(a, b)
	if !ok {
		return
	}
	r := &z.a.Reasoning
	d := c.diff
	lt, rt := trimWhitespace(d.left), trimWhitespace(d.right)
	switch {
	case lt == "" && d.right != "":
		if rt != "" && strings.HasSuffix(c.outputB, rt) && r.Start == "" {
			r.Start, r.Mode = d.right, ReasoningTagBased
		}
	case rt == "" && d.left != "":
		if lt != "" && strings.HasSuffix(c.outputA, lt) && r.End == "" {
			seg := pruneWhitespaceSegments(segmentizeMarkers(c.outputA))
			if n := len(seg); n >= 2 && seg[n-1].value == lt && seg[n-2].kind == segMarker {
				r.Start = seg[n-2].value
			}
			r.End, r.Mode = d.left, ReasoningTagBased
		}
	case lt != "" && rt != "":
		// Noisy diffs (a system block that changes too): anchor on the tail of one render and
		// look for exactly two markers the other adds after it.
		for dir := 0; dir < 2; dir++ {
			base, ext := c.outputB, c.outputA
			if dir == 1 {
				base, ext = c.outputA, c.outputB
			}
			n := min(len(base), 64)
			anchor := base[len(base)-n:]
			p := strings.LastIndex(ext, anchor)
			if p < 0 || p+n >= len(ext) {
				continue
			}
			extra := trimWhitespace(ext[p+n:])
			if extra == "" {
				continue
			}
			seg := pruneWhitespaceSegments(segmentizeMarkers(extra))
			if len(seg) == 2 && seg[0].kind == segMarker && seg[1].kind == segMarker {
				if r.Start == "" {
					r.Start = seg[0].value
				}
				if r.End == "" {
					r.End = seg[1].value
				}
				r.Mode = ReasoningTagBased
				break
			}
		}
	}
	if r.Mode == ReasoningNone && r.Start == "" && r.End != "" {
		r.Mode = ReasoningTagBased
	}
}

// compareReasoningScope (R3) finds reasoning that is only rendered beside tool calls.
func (z *analyzer) compareReasoningScope() {
	call := toolCall(funFirst, object{{argFirst, "VVVV"}, {argSecond, "XXXX"}}, callID001)
	withCall := object{{"role", "assistant"}, {"content", nil}, {"reasoning_content", thinkingContent},
		{"tool_calls", []object{call}}}
	c, ok := z.compare(toolProbe(asstReason(assistantMsg, thinkingContent)), toolProbe(withCall))
	if !ok || strings.Contains(c.outputA, thinkingContent) || !strings.Contains(c.outputB, thinkingContent) {
		return
	}
	r := &z.a.Reasoning
	r.Mode = ReasoningToolsOnly
	wrapped := seq(tag("pre", seq(marker(), space())), lit(thinkingContent), space(),
		tag("post", seq(marker(), space())))
	if res := parseAnywhere(wrapped, c.outputB); res.ok {
		r.Start, r.End = res.tag("pre"), res.tag("post")
		return
	}
	delim := seq(lit(thinkingContent), space(), optional(tag("post", seq(marker(), space()))))
	if res := parseAnywhere(delim, c.outputB); res.ok {
		r.End = res.tag("post")
	} else {
		r.Mode = ReasoningNone
	}
}
