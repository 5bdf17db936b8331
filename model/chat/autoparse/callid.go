package autoparse

import "strings"

// extractArgsMarkers (T6) would find markers around the arguments object. In the llama.cpp
// version this ports, its body only runs for JSON_NATIVE, and it is only called for the other
// formats, so it never sets anything; the body is kept for when that guard changes.
func (z *analyzer) extractArgsMarkers() {
	c, ok := z.compare(toolProbe(asstCalls(firstToolCallZeroArgs)), toolProbe(asstCalls(firstToolCallOneArg)))
	if !ok {
		return
	}
	f := z.a.Tools.Format
	if f.Mode != FormatJSONNative {
		return
	}
	d := c.diff
	pm := f.SectionStart
	if pm == "" {
		pm = f.PerCallStart
	}
	sm := f.SectionEnd
	if sm == "" {
		sm = f.PerCallEnd
	}
	ppos := 0
	if pm != "" {
		if i := strings.LastIndex(d.prefix, pm); i >= 0 {
			ppos = i
		}
	}
	spos := len(d.suffix)
	if sm != "" {
		if i := strings.Index(d.suffix, sm); i >= 0 {
			spos = i
		}
	}
	pcut := substr(d.prefix, ppos+len(pm), -1)
	scut := d.suffix[:spos]
	as := untilCommonPrefix(pcut, "{}", `{"first":`)
	ae := afterCommonSuffix(scut, "{}", `"XXXX"}`)
	if as == "" && ae == "" {
		return
	}
	for _, cut := range []string{funFirst, callID001} {
		if i := strings.Index(as, cut); i >= 0 {
			as = as[i+len(cut):]
		}
	}
	z.a.Tools.Arguments.Start, z.a.Tools.Arguments.End = as, ae
}

// extractCallIDMarkers (T7) compares two call ids to find where the id is written and the
// markers around it.
func (z *analyzer) extractCallIDMarkers() {
	c, ok := z.compare(toolProbe(asstCalls(firstToolCall)), toolProbe(asstCalls(firstToolCallAltID)))
	if !ok {
		return
	}
	d := c.diff
	if d.left == "" && d.right == "" {
		return
	}
	const commonID = "call"
	t := &z.a.Tools
	id := &t.CallID
	fp := strings.LastIndex(d.prefix, funFirst)
	fs := strings.Index(d.suffix, funFirst)
	switch {
	case fp >= 0 && fs < 0:
		ap := -1
		if i := strings.IndexByte(d.prefix[fp:], '{'); i >= 0 {
			ap = fp + i
		}
		as := strings.IndexByte(d.suffix, '{')
		if as >= 0 && ap < 0 {
			id.Pos = CallIDBetweenFuncAndArgs
			after := d.prefix[fp+len(funFirst):]
			pp := seq(tag("prefix", marker()), zeroOrMore(seq(negate(marker()), negate(lit(commonID)), anyChar())), lit(commonID))
			if res := parseAnywhere(pp, after); res.ok {
				id.Prefix = res.tag("prefix")
			} else {
				id.Prefix = findLastMarker(after)
			}
			sp := seq(zeroOrMore(seq(negate(marker()), negate(lit("{")), anyChar())), tag("suffix", marker()))
			if res := parseAnywhere(sp, d.suffix); res.ok {
				id.Suffix = res.tag("suffix")
			}
		} else if ap >= 0 {
			id.Pos = CallIDPostArgs
			after := d.prefix[ap:]
			if cb := strings.LastIndexByte(after, '}'); cb >= 0 {
				id.Prefix = findLastMarker(after[cb+1:])
			}
			id.Suffix = findFirstMarker(d.suffix)
		}
	case fs >= 0 && fp < 0:
		id.Pos = CallIDPreFuncName
		id.Prefix = findLastMarker(d.prefix)
		id.Suffix = findFirstMarker(d.suffix[:fs])
	}
	if id.Prefix == t.Arguments.End {
		id.Prefix = ""
	}
	if id.Suffix == t.Arguments.Start {
		id.Suffix = ""
	}
	if id.Pos != CallIDNone && id.Suffix != "" && strings.HasPrefix(t.Format.PerCallEnd, id.Suffix) {
		t.Format.PerCallEnd = ""
	}
}
