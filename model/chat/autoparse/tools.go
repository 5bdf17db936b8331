package autoparse

import (
	"sort"
	"strings"
)

// analyzeTools runs the tool-call analysis (only for templates that render tool calls).
func (z *analyzer) analyzeTools() {
	z.analyzeToolCalls()
	mode := z.a.Tools.Format.Mode
	if mode == FormatNone || mode == FormatJSONNative {
		return
	}
	if z.caps.ParallelToolCalls {
		z.checkPerCallMarkers()
	}
	z.extractFunctionMarkers()
	if mode == FormatTagWithTagged {
		z.extractArgumentNameMarkers()
		z.extractArgumentValueMarkers()
	}
	z.extractArgumentSeparator()
	z.extractArgsMarkers()
	z.extractCallIDMarkers()
}

// analyzeToolCalls (T1) compares plain content with one tool call, classifies the format and
// finds the section and per-call markers.
func (z *analyzer) analyzeToolCalls() {
	c, ok := z.compare(toolProbe(asst(assistantMsg)), toolProbe(asstCalls(firstToolCall)))
	if !ok || c.diff.right == "" {
		return
	}
	haystack := c.diff.right
	inJSON := func(needle string) bool {
		p := seq(choice(lit("{"), lit(":")), space(), tag("dq", lit(`"`+needle+`"`)))
		return parseAnywhere(p, haystack).ok
	}
	f := &z.a.Tools.Format
	switch {
	case inJSON(funFirst):
		f.Mode = FormatJSONNative
	case inJSON(argFirst):
		f.Mode = FormatTagWithJSON
	default:
		f.Mode = FormatTagWithTagged
	}
	clean := haystack
	r := z.a.Reasoning
	if r.Start != "" && strings.Contains(clean, r.Start) {
		clean = strings.Replace(clean, r.Start, "", 1)
	}
	if r.End != "" && strings.Contains(clean, r.End) {
		clean = strings.Replace(clean, r.End, "", 1)
	}
	if f.Mode == FormatJSONNative {
		z.analyzeJSONNative(clean)
		if z.caps.ParallelToolCalls {
			z.analyzeJSONNativeParallelCalls()
		}
	} else {
		z.analyzeNonJSON(clean)
	}
	f.SectionEnd = trimWhitespace(f.SectionEnd)
	f.PerCallEnd = trimWhitespace(f.PerCallEnd)
}

// analyzeJSONNative reads the call's JSON object: which keys hold the name, the arguments
// and the id, and what surrounds the object.
func (z *analyzer) analyzeJSONNative(clean string) {
	f := &z.a.Tools.Format
	js := strings.IndexByte(clean, '{')
	je := strings.LastIndexByte(clean, '}')
	if js < 0 {
		throwf("tool call JSON: no '{' in %q", clean)
	}
	cut := clean[js:]
	if je >= js {
		cut = clean[js : je+1]
	}
	call, err := parseOrderedJSON(cut)
	if err != nil {
		throwf("tool call JSON %q: %v", cut, err)
	}
	register := func(prefix, k string, v jsonValue) {
		name := k
		if prefix != "" {
			name = prefix + "." + k
		}
		switch {
		case v.str != nil && strings.Contains(*v.str, "call0000"):
			f.IDField = name
		case v.str != nil && *v.str == funFirst:
			f.NameField = name
		case strings.Contains(v.dump, argFirst):
			f.ArgsField = name
		case strings.Contains(k, "id"):
			f.GenIDField = name
		}
	}
	for _, kv := range call.fields {
		if kv.key == funFirst {
			f.FunNameIsKey = true
			f.NameField, f.ArgsField = "", ""
			continue
		}
		if kv.val.isObj && !strings.Contains(kv.val.dump, argFirst) {
			f.FunctionField = kv.key
			for _, sub := range kv.val.fields {
				register(kv.key, sub.key, sub.val)
			}
		}
		register("", kv.key, kv.val)
	}
	wrap := seq(tag("pre", seq(lit("["), space())), lit(cut), tag("post", seq(space(), lit("]"))))
	if res := parseAnywhere(wrap, clean); res.ok {
		f.ToolsArrayWrapped = true
		js -= len(res.tag("pre"))
		je += len(res.tag("post"))
	}
	je++
	type located struct {
		pos  int
		name string
	}
	var order []located
	for _, name := range []string{f.NameField, f.ArgsField, f.IDField, f.GenIDField} {
		if name == "" {
			continue
		}
		pos := strings.Index(clean, name)
		if pos < 0 {
			pos = int(^uint(0) >> 1) // npos sorts last
		}
		order = append(order, located{pos, name})
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].pos != order[j].pos {
			return order[i].pos < order[j].pos
		}
		return order[i].name < order[j].name
	})
	f.ParameterOrder = []string{}
	for _, l := range order {
		f.ParameterOrder = append(f.ParameterOrder, l.name)
	}
	f.SectionStart = trimLeadingWhitespace(substr(clean, 0, js))
	f.SectionEnd = trimWhitespace(substr(clean, je, -1))
	if f.ToolsArrayWrapped && f.SectionEnd == "]" {
		f.SectionEnd = ""
	}
}

// analyzeJSONNativeParallelCalls turns the section markers into per-call markers when a second
// call repeats them.
func (z *analyzer) analyzeJSONNativeParallelCalls() {
	c, ok := z.compare(toolProbe(asstCalls(firstToolCall)), toolProbe(asstCalls(firstToolCall, secondToolCall)))
	if !ok {
		return
	}
	f := &z.a.Tools.Format
	if f.SectionStart != "" && strings.Contains(c.diff.right, f.SectionStart) {
		f.PerCallStart, f.PerCallEnd = f.SectionStart, f.SectionEnd
		f.SectionStart, f.SectionEnd = "", ""
	}
}

// analyzeNonJSON finds the function-name marker and the section and per-call markers around
// a tagged call.
func (z *analyzer) analyzeNonJSON(clean string) {
	funPost := seq(negate(seq(space(), lit("<"))), until(">"), lit(">"))
	funMarkerParser := tag("fun_marker", choice(
		seq(tag("fun_pre", seq(lit("<"), untilOneOf(">", funFirst))), lit(funFirst),
			tag("fun_post", funPost), space()),
		seq(tag("fun_pre", seq(lit("["), untilOneOf("]", funFirst))), lit(funFirst),
			tag("fun_post", seq(negate(seq(space(), lit("["), until("]"), lit("]"))), space())))))
	funRes := parseAnywhere(funMarkerParser, clean)
	funMarker := funFirst
	if funRes.ok {
		funMarker = funRes.tag("fun_marker")
	}
	perTool := seq(tag("sec_start", seq(marker(), space())), tag("call_start", seq(marker(), space())),
		until(funMarker), lit(funMarker), tag("rest", rest()))
	section := seq(tag("sec_start", seq(marker(), space())), lit(funMarker), tag("rest", rest()))
	r := parseAnywhere(perTool, clean)
	var re pegResult
	if r.ok {
		re = parseAnywhere(seq(tag("call_end", seq(marker(), space())), tag("sec_end", seq(marker(), space())), end()),
			r.tag("rest"))
		z.a.Tools.Function.NamePrefix = funRes.tag("fun_pre") + z.a.Tools.Function.NamePrefix
	} else {
		r = parseAnywhere(section, clean)
		re = parseAnywhere(seq(tag("sec_end", seq(marker(), space())), end()), r.tag("rest"))
	}
	f := &z.a.Tools.Format
	f.PerCallStart, f.PerCallEnd = r.tag("call_start"), re.tag("call_end")
	f.SectionStart, f.SectionEnd = r.tag("sec_start"), re.tag("sec_end")
}

// substr is C++'s std::string::substr: it throws when pos is past the end and clamps n
// (n < 0 means to the end).
func substr(s string, pos, n int) string {
	if pos < 0 || pos > len(s) {
		throwf("substr: position %d out of range (length %d)", pos, len(s))
	}
	if n < 0 || pos+n > len(s) {
		return s[pos:]
	}
	return s[pos : pos+n]
}
