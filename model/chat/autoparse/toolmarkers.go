package autoparse

import "strings"

// checkPerCallMarkers (T2) decides whether the markers around one call are repeated per call.
func (z *analyzer) checkPerCallMarkers() {
	c, ok := z.compare(toolProbe(asstCalls(firstToolCall)), toolProbe(asstCalls(firstToolCall, secondToolCall)))
	if !ok {
		return
	}
	f := &z.a.Tools.Format
	second := trimLeadingWhitespace(calculateDiffSplit(c.diff.suffix, c.diff.right).right)
	if f.SectionStart != "" && strings.HasPrefix(second, f.SectionStart) {
		f.PerCallStart, f.PerCallEnd = f.SectionStart, f.SectionEnd
		f.SectionStart, f.SectionEnd = "", ""
	}
	if f.PerCallEnd != "" {
		c1, c2 := strings.Count(c.outputA, f.PerCallEnd), strings.Count(c.outputB, f.PerCallEnd)
		if c1 > 0 && c1 == c2 {
			f.SectionEnd, f.PerCallEnd = f.PerCallEnd, ""
		}
	}
}

// extractFunctionMarkers (T3) compares calls to two functions to find the text around the
// name, the separator before the arguments and the call's closer.
func (z *analyzer) extractFunctionMarkers() {
	c, ok := z.compare(toolProbe(asstCalls(firstToolCall)), toolProbe(asstCalls(secondToolCall)))
	if !ok {
		return
	}
	d := c.diff
	if !strings.Contains(d.left, funFirst) || !strings.Contains(d.right, funSecond) {
		return
	}
	t := &z.a.Tools
	fn := &t.Function
	pm := t.Format.PerCallStart
	if pm == "" {
		pm = t.Format.SectionStart
	}
	if pm != "" {
		if i := strings.LastIndex(d.prefix, pm); i >= 0 {
			fn.NamePrefix = d.prefix[i+len(pm):]
		}
	}
	np := seq(tag("pre", until(funFirst)), lit(funFirst), tag("post", zeroOrMore(seq(negate(marker()), anyChar()))))
	if res := parseAndExtract(np, d.left); res.ok {
		fn.NamePrefix += res.tag("pre")
		fn.NameSuffix = res.tag("post")
	}
	if t.Format.Mode == FormatTagWithJSON {
		ext := zeroOrMore(choice(marker(), seq(negate(lit("{")), negate(lit("[")), anyChar())))
		p := seq(tag("ext", ext), zeroOrMore(seq(negate(marker()), anyChar())), marker())
		if res := parseAndExtract(p, d.suffix); res.ok {
			fn.NameSuffix += res.tag("ext")
		}
	} else {
		res := parseAndExtract(tag("ext", zeroOrMore(seq(negate(marker()), anyChar()))), d.suffix)
		ext := res.tag("ext")
		fn.NameSuffix += ext
		argStart := seq(marker(), space(), choice(lit(argFirst), lit(argSecond)))
		sp := seq(tag("sep", zeroOrMore(seq(negate(argStart), anyChar()))), argStart)
		if res := parseAndExtract(sp, d.suffix[len(ext):]); res.ok {
			fn.ArgsSeparator = trimWhitespace(res.tag("sep"))
		}
	}
	closer := ""
	sm := t.Format.PerCallEnd
	if sm == "" {
		sm = t.Format.SectionEnd
	}
	if sm == "" {
		if nt, ok := z.compare(toolProbe(asstCalls(firstToolCall)), toolProbe(asst(assistantMsg))); ok {
			// llama.cpp adds 4 to find()'s npos when "YYYY" is absent, which wraps to 3.
			i := strings.Index(nt.diff.left, "YYYY")
			if i < 0 {
				i = -1
			}
			closer = substr(nt.diff.left, i+4, -1)
		}
	} else if i := strings.Index(d.suffix, sm); i >= 0 {
		closer = d.suffix[:i]
	} else {
		closer = d.suffix
	}
	if closer != "" {
		if t.Format.Mode == FormatTagWithTagged {
			p := seq(until("YYYY"), lit("YYYY"), space(), marker(), space(), tag("close", rest()))
			if res := parseAndExtract(p, closer); res.ok {
				fn.Close = res.tag("close")
			}
		} else if t.Format.Mode == FormatTagWithJSON {
			p := seq(until("YYYY"), lit("YYYY"), tag("post_val", rest()))
			if res := parseAndExtract(p, closer); res.ok {
				post := res.tag("post_val")
				if i := strings.LastIndexAny(post, "}]"); i >= 0 && i < len(post)-1 {
					fn.Close = trimLeadingWhitespace(post[i+1:])
				}
			}
		}
	}
	fn.Close = trimLeadingWhitespace(fn.Close)
}

// extractArgumentNameMarkers (A1) compares a call with one argument and with another to find
// the text around argument names.
func (z *analyzer) extractArgumentNameMarkers() {
	c, ok := z.compare(toolProbe(asstCalls(firstToolCallOneArg)), toolProbe(asstCalls(firstToolCallOtherArg)))
	if !ok || c.diff.left == "" || c.diff.right == "" {
		return
	}
	d := c.diff
	args := &z.a.Tools.Arguments
	lp := parseAnywhere(seq(tag("pre", until(argFirst)), lit(argFirst), tag("suffix", untilOneOf(`"`, "X"))), d.left)
	rp := parseAnywhere(seq(tag("pre", until(argSecond)), lit(argSecond), tag("suffix", untilOneOf(`"`, "Y"))), d.right)
	if lp.ok && rp.ok && lp.tag("pre") != "" && lp.tag("pre") == rp.tag("pre") && lp.tag("suffix") == rp.tag("suffix") {
		args.NamePrefix, args.NameSuffix = lp.tag("pre"), lp.tag("suffix")
		return
	}
	if strings.HasPrefix(d.left, argFirst) && strings.HasPrefix(d.right, argSecond) {
		if t, ok := lastMarkerAndTail(d.prefix); ok {
			args.NamePrefix = t
		} else {
			args.NamePrefix = d.prefix
		}
		after := d.left[len(argFirst):] + d.suffix
		p := tag("suffix", seq(zeroOrMore(seq(negate(marker()), anyChar())), marker(), space()))
		if res := parseAnywhere(p, after); res.ok {
			args.NameSuffix = res.tag("suffix")
		}
	}
}

// extractArgumentValueMarkers (A2) compares two values of one argument to find the text
// around argument values.
func (z *analyzer) extractArgumentValueMarkers() {
	c, ok := z.compare(toolProbe(asstCalls(firstToolCallOneArg)), toolProbe(asstCalls(firstToolCallOneArgOtherVal)))
	if !ok || c.diff.left != "XXXX" || c.diff.right != "YYYY" {
		return
	}
	t := &z.a.Tools
	pre := c.diff.prefix
	if k := argFirst + t.Arguments.NameSuffix; strings.Contains(pre, k) {
		pre = pre[strings.LastIndex(pre, k)+len(k):]
	}
	if pre != "" {
		if tail, ok := lastMarkerAndTail(pre); ok {
			t.Arguments.ValuePrefix = tail
		} else {
			t.Arguments.ValuePrefix = pre
		}
	}
	vs := c.diff.suffix
	if t.Function.Close != "" && strings.Contains(vs, t.Function.Close) {
		vs = vs[:strings.Index(vs, t.Function.Close)]
	} else {
		end := t.Format.PerCallEnd
		if end == "" {
			end = t.Format.SectionEnd
		}
		if end != "" && strings.Contains(vs, end) {
			vs = vs[:strings.Index(vs, end)]
		}
	}
	if trimWhitespace(vs) != "" {
		t.Arguments.ValueSuffix = vs
	}
}

// extractArgumentSeparator (T5) compares one and two arguments. The probe argument names
// share no prefix, so llama.cpp always finds "" here; kept for fidelity.
func (z *analyzer) extractArgumentSeparator() {
	c, ok := z.compare(toolProbe(asstCalls(firstToolCallOneArg)), toolProbe(asstCalls(firstToolCall)))
	if !ok {
		return
	}
	if c.diff.right != "" {
		z.a.Tools.Arguments.Separator = untilCommonPrefix(c.diff.right, argFirst, argSecond)
	}
}
