package jinja

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// globals are the functions every template sees.
var globals = map[string]any{
	"range": Func(func(args []any, _ *Dict) (any, error) {
		var lo, hi, step int64 = 0, 0, 1
		ints := make([]int64, len(args))
		for i, a := range args {
			n, ok := a.(int64)
			if !ok {
				return nil, errors.New("range() needs integer arguments")
			}
			ints[i] = n
		}
		switch len(ints) {
		case 1:
			hi = ints[0]
		case 2:
			lo, hi = ints[0], ints[1]
		case 3:
			lo, hi, step = ints[0], ints[1], ints[2]
		default:
			return nil, errors.New("range() takes 1 to 3 arguments")
		}
		if step == 0 {
			return nil, errors.New("range() step must not be zero")
		}
		var out []any
		for i := lo; step > 0 && i < hi || step < 0 && i > hi; i += step {
			out = append(out, i)
		}
		return out, nil
	}),
	"namespace": Func(func(args []any, kwargs *Dict) (any, error) {
		ns := NewDict()
		for _, a := range args {
			if d, ok := a.(*Dict); ok {
				for _, k := range d.Keys() {
					ns.Set(k, d.m[k])
				}
			}
		}
		for _, k := range kwargs.Keys() {
			ns.Set(k, kwargs.m[k])
		}
		return ns, nil
	}),
	"dict": Func(func(_ []any, kwargs *Dict) (any, error) {
		d := NewDict()
		for _, k := range kwargs.Keys() {
			d.Set(k, kwargs.m[k])
		}
		return d, nil
	}),
	"raise_exception": Func(func(args []any, _ *Dict) (any, error) {
		msg := ""
		if len(args) > 0 {
			msg = toStr(args[0])
		}
		return nil, &Exception{Msg: msg}
	}),
	"strftime_now": Func(func(args []any, _ *Dict) (any, error) {
		if len(args) != 1 {
			return nil, errors.New("strftime_now() takes one format argument")
		}
		return Strftime(time.Now(), toStr(args[0])), nil
	}),
}

// Strftime formats t with a C strftime format (the common directives).
func Strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'B':
			b.WriteString(t.Month().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'Z':
			b.WriteString(t.Format("MST"))
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

// getAttr is obj.name: a mapping's key, else a method of the value, else undefined.
func getAttr(obj any, name string) any {
	if d, ok := obj.(*Dict); ok {
		if v, ok := d.Get(name); ok {
			return v
		}
	}
	if m := method(obj, name); m != nil {
		return m
	}
	return Undefined{}
}

// getItem is obj[idx].
func getItem(obj, idx any) any {
	switch o := obj.(type) {
	case *Dict:
		if v, ok := o.Get(toStr(idx)); ok {
			return v
		}
		if s, ok := idx.(string); ok {
			if m := method(obj, s); m != nil {
				return m
			}
		}
	case []any:
		if i, ok := idx.(int64); ok {
			if i < 0 {
				i += int64(len(o))
			}
			if i >= 0 && i < int64(len(o)) {
				return o[i]
			}
		}
	case string:
		if i, ok := idx.(int64); ok {
			r := []rune(o)
			if i < 0 {
				i += int64(len(r))
			}
			if i >= 0 && i < int64(len(r)) {
				return string(r[i])
			}
		}
	}
	return Undefined{}
}

// argOr returns args[i], or def when there are fewer arguments.
func argOr(args []any, i int, kwargs *Dict, name string, def any) any {
	if i < len(args) {
		return args[i]
	}
	if v, ok := kwargs.Get(name); ok {
		return v
	}
	return def
}

// method returns obj's Python method name bound to obj, or nil.
func method(obj any, name string) Func {
	switch o := obj.(type) {
	case string:
		return stringMethod(o, name)
	case *Dict:
		switch name {
		case "items":
			return func([]any, *Dict) (any, error) {
				out := make([]any, 0, o.Len())
				for _, k := range o.Keys() {
					out = append(out, []any{o.key(k), o.m[k]})
				}
				return out, nil
			}
		case "keys":
			return func([]any, *Dict) (any, error) { return iterate(o) }
		case "values":
			return func([]any, *Dict) (any, error) {
				out := make([]any, 0, o.Len())
				for _, k := range o.Keys() {
					out = append(out, o.m[k])
				}
				return out, nil
			}
		case "get":
			return func(args []any, kw *Dict) (any, error) {
				if len(args) == 0 {
					return nil, errors.New("get() needs a key")
				}
				if v, ok := o.Get(toStr(args[0])); ok {
					return v, nil
				}
				return argOr(args, 1, kw, "default", nil), nil
			}
		}
	case []any:
		switch name {
		case "index":
			return func(args []any, _ *Dict) (any, error) {
				for i, e := range o {
					if len(args) > 0 && equal(e, args[0]) {
						return int64(i), nil
					}
				}
				return nil, errors.New("value is not in list")
			}
		case "count":
			return func(args []any, _ *Dict) (any, error) {
				n := int64(0)
				for _, e := range o {
					if len(args) > 0 && equal(e, args[0]) {
						n++
					}
				}
				return n, nil
			}
		}
	}
	return nil
}

// stringMethod returns the Python str method name bound to s, or nil.
func stringMethod(s, name string) Func {
	strip := func(f func(string, string) string, def func(string) string) Func {
		return func(args []any, kw *Dict) (any, error) {
			if c := argOr(args, 0, kw, "chars", nil); c != nil && !isUndefined(c) {
				return f(s, toStr(c)), nil
			}
			return def(s), nil
		}
	}
	space := func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' }
	switch name {
	case "format":
		return func(args []any, kw *Dict) (any, error) { return formatString(s, args, kw) }
	case "strip":
		return strip(strings.Trim, func(s string) string { return strings.TrimFunc(s, space) })
	case "lstrip":
		return strip(strings.TrimLeft, func(s string) string { return strings.TrimLeftFunc(s, space) })
	case "rstrip":
		return strip(strings.TrimRight, func(s string) string { return strings.TrimRightFunc(s, space) })
	case "upper":
		return func([]any, *Dict) (any, error) { return strings.ToUpper(s), nil }
	case "lower":
		return func([]any, *Dict) (any, error) { return strings.ToLower(s), nil }
	case "title":
		return func([]any, *Dict) (any, error) { return title(s), nil }
	case "capitalize":
		return func([]any, *Dict) (any, error) { return capitalize(s), nil }
	case "startswith", "endswith":
		return func(args []any, _ *Dict) (any, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("%s() needs an argument", name)
			}
			prefixes := []any{args[0]}
			if l, ok := args[0].([]any); ok {
				prefixes = l
			}
			for _, p := range prefixes {
				if name == "startswith" && strings.HasPrefix(s, toStr(p)) || name == "endswith" && strings.HasSuffix(s, toStr(p)) {
					return true, nil
				}
			}
			return false, nil
		}
	case "split", "rsplit":
		return func(args []any, kw *Dict) (any, error) {
			sep := argOr(args, 0, kw, "sep", nil)
			limit, _ := toInt(argOr(args, 1, kw, "maxsplit", int64(-1)))
			var parts []string
			switch {
			case sep == nil || isUndefined(sep):
				parts = strings.FieldsFunc(s, space)
			case limit >= 0 && name == "split":
				parts = strings.SplitN(s, toStr(sep), int(limit)+1)
			case limit >= 0:
				parts = rsplitN(s, toStr(sep), int(limit)+1)
			default:
				parts = strings.Split(s, toStr(sep))
			}
			out := make([]any, len(parts))
			for i, p := range parts {
				out[i] = p
			}
			return out, nil
		}
	case "replace":
		return func(args []any, _ *Dict) (any, error) {
			if len(args) < 2 {
				return nil, errors.New("replace() needs two arguments")
			}
			n := -1
			if len(args) > 2 {
				c, _ := toInt(args[2])
				n = int(c)
			}
			return strings.Replace(s, toStr(args[0]), toStr(args[1]), n), nil
		}
	case "find":
		return func(args []any, _ *Dict) (any, error) {
			if len(args) == 0 {
				return nil, errors.New("find() needs an argument")
			}
			return int64(strings.Index(s, toStr(args[0]))), nil
		}
	case "count":
		return func(args []any, _ *Dict) (any, error) {
			if len(args) == 0 {
				return nil, errors.New("count() needs an argument")
			}
			return int64(strings.Count(s, toStr(args[0]))), nil
		}
	case "join":
		return func(args []any, _ *Dict) (any, error) {
			items, err := iterate(argOr(args, 0, nil, "", nil))
			if err != nil {
				return nil, err
			}
			parts := make([]string, len(items))
			for i, it := range items {
				parts[i] = toStr(it)
			}
			return strings.Join(parts, s), nil
		}
	case "splitlines":
		return func([]any, *Dict) (any, error) {
			var out []any
			for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
				out = append(out, l)
			}
			if s == "" {
				out = nil
			}
			return out, nil
		}
	}
	return nil
}

// rsplitN splits s on sep at most n-1 times, from the right.
func rsplitN(s, sep string, n int) []string {
	var rev []string
	for len(rev) < n-1 {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		rev = append(rev, s[i+len(sep):])
		s = s[:i]
	}
	out := []string{s}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

// title upper-cases the first letter of each word and lower-cases the rest.
func title(s string) string {
	var b strings.Builder
	prevLetter := false
	for _, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127
		switch {
		case letter && !prevLetter:
			b.WriteString(strings.ToUpper(string(r)))
		case letter:
			b.WriteString(strings.ToLower(string(r)))
		default:
			b.WriteRune(r)
		}
		prevLetter = letter || r >= '0' && r <= '9'
	}
	return b.String()
}

// capitalize upper-cases the first character and lower-cases the rest.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	return strings.ToUpper(string(r[0])) + strings.ToLower(string(r[1:]))
}

// formatString is Python's str.format for the fields templates use: {} in turn, {N} by
// position and {name} by keyword, with {{ and }} for braces.
func formatString(s string, args []any, kw *Dict) (string, error) {
	var b strings.Builder
	next := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{', c == '}' && i+1 < len(s) && s[i+1] == '}':
			b.WriteByte(c)
			i++
		case c == '{':
			j := strings.IndexByte(s[i:], '}')
			if j < 0 {
				return "", errors.New("format: single '{' encountered in format string")
			}
			field := s[i+1 : i+j]
			i += j
			var v any
			switch n, err := strconv.Atoi(field); {
			case field == "":
				if next >= len(args) {
					return "", fmt.Errorf("format: replacement index %d out of range", next)
				}
				v = args[next]
				next++
			case err == nil:
				if n < 0 || n >= len(args) {
					return "", fmt.Errorf("format: replacement index %d out of range", n)
				}
				v = args[n]
			default:
				val, ok := kw.Get(field)
				if !ok {
					return "", fmt.Errorf("format: no value for field %q", field)
				}
				v = val
			}
			b.WriteString(toStr(v))
		case c == '}':
			return "", errors.New("format: single '}' encountered in format string")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
