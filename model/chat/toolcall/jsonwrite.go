package toolcall

import (
	"strconv"
	"strings"
	"unicode/utf16"
)

// dump writes v compactly as llama.cpp's nlohmann::json dump with ensure_ascii does (no spaces,
// non-ASCII as \u escapes, numbers re-serialised), stopping where an unfinished v stops being
// certain.
func dump(v *jvalue) string {
	var b strings.Builder
	writeValue(&b, v)
	return b.String()
}

// writeValue writes v and reports whether it was complete (so the caller may go on).
func writeValue(b *strings.Builder, v *jvalue) bool {
	if v == nil {
		return false
	}
	switch v.kind {
	case jString:
		writeString(b, v.text, v.complete)
	case jNumber, jLiteral:
		if !v.complete {
			return false
		}
		if v.kind == jNumber {
			b.WriteString(formatNumber(v.text))
		} else {
			b.WriteString(v.text)
		}
	case jArray:
		b.WriteByte('[')
		for i, el := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			if !writeValue(b, el) {
				return false
			}
		}
		if !v.complete {
			if v.comma {
				b.WriteByte(',')
			}
			return false
		}
		b.WriteByte(']')
	case jObject:
		b.WriteByte('{')
		for i, m := range v.members {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, m.key, m.keyDone)
			if !m.keyDone {
				return false
			}
			if !m.colon {
				return false
			}
			b.WriteByte(':')
			if !writeValue(b, m.value) {
				return false
			}
		}
		if !v.complete {
			if v.comma {
				b.WriteByte(',')
			}
			return false
		}
		b.WriteByte('}')
	}
	return v.complete
}

// writeString writes s as a JSON string with ensure_ascii escaping, without the closing quote
// when the string is unfinished.
func writeString(b *strings.Builder, s string, closed bool) {
	writeEscaped(b, s, true)
	if closed {
		b.WriteByte('"')
	}
}

// writeRawString writes s as a JSON string, leaving non-ASCII characters as they are.
func writeRawString(b *strings.Builder, s string) {
	writeEscaped(b, s, false)
	b.WriteByte('"')
}

// writeEscaped writes the opening quote and s escaped as JSON does (as nlohmann::json's dump:
// short escapes, \u00XX for other control characters), and with ascii every non-ASCII
// character as \uXXXX (surrogate pairs above U+FFFF), as its ensure_ascii does.
func writeEscaped(b *strings.Builder, s string, ascii bool) {
	const hexDigits = "0123456789abcdef"
	u := func(r rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hexDigits[(r>>shift)&0xF])
		}
	}
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			u(r)
		case r < 0x80 || !ascii:
			b.WriteRune(r)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			u(hi)
			u(lo)
		default:
			u(r)
		}
	}
}

// formatNumber re-serialises a JSON number as nlohmann::json does: integers as they are (without
// a negative zero), other numbers in the shortest form that reads back, with ".0" after integral
// values and an exponent outside 1e-5 .. 1e15.
func formatNumber(src string) string {
	if !strings.ContainsAny(src, ".eE") {
		if i, err := strconv.ParseInt(src, 10, 64); err == nil {
			return strconv.FormatInt(i, 10)
		}
		if u, err := strconv.ParseUint(src, 10, 64); err == nil {
			return strconv.FormatUint(u, 10)
		}
	}
	f, err := strconv.ParseFloat(src, 64)
	if err != nil {
		return src // out of range: keep the text rather than invent a value
	}
	if f == 0 {
		if strings.HasPrefix(src, "-") {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// Shortest digits d1..dk and the decimal point position n: value = 0.d1..dk * 10^n.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k, n := len(digits), x+1
	const minExp, maxExp = -4, 15
	var out string
	switch {
	case k <= n && n <= maxExp:
		out = digits + strings.Repeat("0", n-k) + ".0"
	case 0 < n && n <= maxExp:
		out = digits[:n] + "." + digits[n:]
	case minExp < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		m := digits[:1]
		if k > 1 {
			m += "." + digits[1:]
		}
		ex := n - 1
		es := "+"
		if ex < 0 {
			es, ex = "-", -ex
		}
		exs := strconv.Itoa(ex)
		if ex < 10 {
			exs = "0" + exs
		}
		out = m + "e" + es + exs
	}
	return sign + out
}

// pretty writes a complete value as nlohmann::json's dump(2): two-space indents, ": " after
// keys, non-ASCII text as it is.
func pretty(v *jvalue) string {
	var b strings.Builder
	writePretty(&b, v, 0)
	return b.String()
}

func writePretty(b *strings.Builder, v *jvalue, depth int) {
	indent := func(d int) { b.WriteString(strings.Repeat("  ", d)) }
	switch v.kind {
	case jString:
		writeRawString(b, v.text)
	case jNumber:
		b.WriteString(formatNumber(v.text))
	case jLiteral:
		b.WriteString(v.text)
	case jArray:
		if len(v.elems) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, el := range v.elems {
			if i > 0 {
				b.WriteString(",\n")
			}
			indent(depth + 1)
			writePretty(b, el, depth+1)
		}
		b.WriteByte('\n')
		indent(depth)
		b.WriteByte(']')
	case jObject:
		if len(v.members) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, m := range v.members {
			if i > 0 {
				b.WriteString(",\n")
			}
			indent(depth + 1)
			writeRawString(b, m.key)
			b.WriteString(": ")
			writePretty(b, m.value, depth+1)
		}
		b.WriteByte('\n')
		indent(depth)
		b.WriteByte('}')
	}
}
