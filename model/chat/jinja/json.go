package jinja

import (
	"fmt"
	"strings"
)

// writeJSON writes v as llama.cpp's tojson does (like Python's json.dumps with
// ensure_ascii=False): ", " and ": " separators on one line, or with indent >= 0 one item per
// line, "," and ": " separators; keys in insertion order; "/" and non-ASCII left as they are.
func writeJSON(b *strings.Builder, v any, indent int, prefix string) error {
	switch x := v.(type) {
	case nil, Undefined:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64, float64:
		b.WriteString(repr(x, false))
	case string:
		writeJSONString(b, x)
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		inner := prefix + strings.Repeat(" ", max(indent, 0))
		for i, e := range x {
			writeSep(b, i, indent, inner)
			if err := writeJSON(b, e, indent, inner); err != nil {
				return err
			}
		}
		if indent >= 0 {
			b.WriteString("\n" + prefix)
		}
		b.WriteByte(']')
	case *Dict:
		if x.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		inner := prefix + strings.Repeat(" ", max(indent, 0))
		for i, k := range x.Keys() {
			writeSep(b, i, indent, inner)
			writeJSONString(b, k)
			b.WriteString(": ")
			if err := writeJSON(b, x.m[k], indent, inner); err != nil {
				return err
			}
		}
		if indent >= 0 {
			b.WriteString("\n" + prefix)
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("tojson: cannot serialise %s", typeName(v))
	}
	return nil
}

func writeSep(b *strings.Builder, i, indent int, inner string) {
	if i > 0 {
		b.WriteByte(',')
		if indent < 0 {
			b.WriteByte(' ')
		}
	}
	if indent >= 0 {
		b.WriteString("\n" + inner)
	}
}

func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
