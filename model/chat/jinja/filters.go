package jinja

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// filterFunc implements a filter: v | name(args, kwargs).
type filterFunc func(v any, args []any, kw *Dict) (any, error)

// testFunc implements a test: v is name(args).
type testFunc func(v any, args []any) (bool, error)

var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"tojson": func(v any, args []any, kw *Dict) (any, error) {
			indent := argOr(args, 0, kw, "indent", nil)
			n, ok := toInt(indent)
			if indent == nil || isUndefined(indent) {
				n, ok = -1, true
			}
			if !ok {
				return nil, errors.New("tojson: indent must be an integer")
			}
			var b strings.Builder
			if err := writeJSON(&b, v, int(n), ""); err != nil {
				return nil, err
			}
			return b.String(), nil
		},
		"length": length,
		"count":  length,
		"trim": func(v any, args []any, kw *Dict) (any, error) {
			return stringMethod(toStr(v), "strip")(args, kw)
		},
		"string": func(v any, _ []any, _ *Dict) (any, error) { return toStr(v), nil },
		"lower":  func(v any, _ []any, _ *Dict) (any, error) { return strings.ToLower(toStr(v)), nil },
		"upper":  func(v any, _ []any, _ *Dict) (any, error) { return strings.ToUpper(toStr(v)), nil },
		"title":  func(v any, _ []any, _ *Dict) (any, error) { return title(toStr(v)), nil },
		"capitalize": func(v any, _ []any, _ *Dict) (any, error) {
			return capitalize(toStr(v)), nil
		},
		"safe":   func(v any, _ []any, _ *Dict) (any, error) { return v, nil },
		"escape": func(v any, _ []any, _ *Dict) (any, error) { return htmlEscape(toStr(v)), nil },
		"e":      func(v any, _ []any, _ *Dict) (any, error) { return htmlEscape(toStr(v)), nil },
		"items": func(v any, _ []any, _ *Dict) (any, error) {
			if isUndefined(v) || v == nil {
				return []any{}, nil
			}
			m := method(v, "items")
			if m == nil {
				return nil, fmt.Errorf("items: %s is not a mapping", typeName(v))
			}
			return m(nil, nil)
		},
		"list": func(v any, _ []any, _ *Dict) (any, error) { return iterate(v) },
		"first": func(v any, _ []any, _ *Dict) (any, error) {
			items, err := iterate(v)
			if err != nil || len(items) == 0 {
				return Undefined{}, err
			}
			return items[0], nil
		},
		"last": func(v any, _ []any, _ *Dict) (any, error) {
			items, err := iterate(v)
			if err != nil || len(items) == 0 {
				return Undefined{}, err
			}
			return items[len(items)-1], nil
		},
		"reverse": func(v any, _ []any, _ *Dict) (any, error) {
			if s, ok := v.(string); ok {
				r := []rune(s)
				for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
					r[i], r[j] = r[j], r[i]
				}
				return string(r), nil
			}
			items, err := iterate(v)
			out := make([]any, len(items))
			for i, it := range items {
				out[len(items)-1-i] = it
			}
			return out, err
		},
		"sort": func(v any, _ []any, _ *Dict) (any, error) {
			items, err := iterate(v)
			out := append([]any{}, items...)
			sortValues(out)
			return out, err
		},
		"unique": func(v any, _ []any, _ *Dict) (any, error) {
			items, err := iterate(v)
			var out []any
			for _, it := range items {
				if ok, _ := contains(out, it); !ok {
					out = append(out, it)
				}
			}
			return out, err
		},
		"join": func(v any, args []any, kw *Dict) (any, error) {
			items, err := iterate(v)
			if err != nil {
				return nil, err
			}
			attr := argOr(args, 1, kw, "attribute", nil)
			parts := make([]string, len(items))
			for i, it := range items {
				if attr != nil {
					it = getAttr(it, toStr(attr))
				}
				parts[i] = toStr(it)
			}
			return strings.Join(parts, toStr(argOr(args, 0, kw, "d", ""))), nil
		},
		"default": defaultFilter,
		"d":       defaultFilter,
		"replace": func(v any, args []any, kw *Dict) (any, error) {
			return stringMethod(toStr(v), "replace")(args, kw)
		},
		"indent": indentFilter,
		"int": func(v any, args []any, kw *Dict) (any, error) {
			if n, ok := toInt(v); ok {
				return n, nil
			}
			if n, err := strconv.ParseInt(strings.TrimSpace(toStr(v)), 10, 64); err == nil {
				return n, nil
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(toStr(v)), 64); err == nil {
				return int64(f), nil
			}
			return argOr(args, 0, kw, "default", int64(0)), nil
		},
		"float": func(v any, args []any, kw *Dict) (any, error) {
			if f, ok := toFloat(v); ok {
				return f, nil
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(toStr(v)), 64); err == nil {
				return f, nil
			}
			return argOr(args, 0, kw, "default", 0.0), nil
		},
		"abs": func(v any, _ []any, _ *Dict) (any, error) {
			switch n := v.(type) {
			case int64:
				return max(n, -n), nil
			case float64:
				return math.Abs(n), nil
			}
			return nil, fmt.Errorf("abs: %s is not a number", typeName(v))
		},
		"round": func(v any, args []any, kw *Dict) (any, error) {
			f, _ := toFloat(v)
			p, _ := toInt(argOr(args, 0, kw, "precision", int64(0)))
			scale := math.Pow(10, float64(p))
			return math.RoundToEven(f*scale) / scale, nil
		},
		"wordcount":  func(v any, _ []any, _ *Dict) (any, error) { return int64(len(strings.Fields(toStr(v)))), nil },
		"select":     func(v any, a []any, _ *Dict) (any, error) { return selectItems(v, "", a, true) },
		"reject":     func(v any, a []any, _ *Dict) (any, error) { return selectItems(v, "", a, false) },
		"selectattr": func(v any, a []any, _ *Dict) (any, error) { return selectAttr(v, a, true) },
		"rejectattr": func(v any, a []any, _ *Dict) (any, error) { return selectAttr(v, a, false) },
		"map":        mapFilter,
		"dictsort": func(v any, _ []any, _ *Dict) (any, error) {
			d, ok := v.(*Dict)
			if !ok {
				return nil, errors.New("dictsort: not a mapping")
			}
			keys := make([]any, 0, d.Len())
			for _, k := range d.Keys() {
				keys = append(keys, d.key(k))
			}
			sortValues(keys)
			out := make([]any, len(keys))
			for i, k := range keys {
				out[i] = []any{k, d.m[toStr(k)]}
			}
			return out, nil
		},
	}
}

func (r *renderer) applyFilter(f *filterExpr, v any, sc *scope) (any, error) {
	fn, ok := filters[f.name]
	if !ok {
		return nil, fmt.Errorf("unknown filter %q", f.name)
	}
	args, kw, err := r.evalArgs(f.args, f.kwargs, sc)
	if err != nil {
		return nil, err
	}
	return fn(v, args, kw)
}

func length(v any, _ []any, _ *Dict) (any, error) {
	switch x := v.(type) {
	case string:
		return int64(utf8.RuneCountInString(x)), nil
	case []any:
		return int64(len(x)), nil
	case *Dict:
		return int64(x.Len()), nil
	case Undefined, nil:
		return int64(0), nil
	}
	return nil, fmt.Errorf("object of type %s has no len()", typeName(v))
}

func defaultFilter(v any, args []any, kw *Dict) (any, error) {
	def := argOr(args, 0, kw, "default_value", "")
	boolean := truthy(argOr(args, 1, kw, "boolean", false))
	if isUndefined(v) || boolean && !truthy(v) {
		return def, nil
	}
	return v, nil
}

// indentFilter is Jinja's indent(width=4, first=False, blank=False).
func indentFilter(v any, args []any, kw *Dict) (any, error) {
	w := argOr(args, 0, kw, "width", int64(4))
	pad := toStr(w)
	if n, ok := w.(int64); ok {
		pad = strings.Repeat(" ", int(n))
	}
	first := truthy(argOr(args, 1, kw, "first", false))
	blank := truthy(argOr(args, 2, kw, "blank", false))
	lines := strings.Split(toStr(v), "\n")
	for i, l := range lines {
		if i == 0 && !first || !blank && strings.TrimSpace(l) == "" && i > 0 {
			continue
		}
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n"), nil
}

// selectItems keeps the items that pass (or, with keep false, fail) a test; with no test
// name, truthiness decides.
func selectItems(v any, attr string, args []any, keep bool) ([]any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	var test testFunc = func(x any, _ []any) (bool, error) { return truthy(x), nil }
	var targs []any
	if len(args) > 0 {
		name := toStr(args[0])
		t, ok := tests[name]
		if !ok {
			return nil, fmt.Errorf("unknown test %q", name)
		}
		test, targs = t, args[1:]
	}
	out := []any{}
	for _, it := range items {
		x := it
		if attr != "" {
			x = getAttr(it, attr)
		}
		ok, err := test(x, targs)
		if err != nil {
			return nil, err
		}
		if ok == keep {
			out = append(out, it)
		}
	}
	return out, nil
}

func selectAttr(v any, args []any, keep bool) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("selectattr needs an attribute name")
	}
	return selectItems(v, toStr(args[0]), args[1:], keep)
}

func mapFilter(v any, args []any, kw *Dict) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	if attr, ok := kw.Get("attribute"); ok {
		def, hasDef := kw.Get("default")
		for i, it := range items {
			out[i] = getAttr(it, toStr(attr))
			if hasDef && isUndefined(out[i]) {
				out[i] = def
			}
		}
		return out, nil
	}
	if len(args) == 0 {
		return nil, errors.New("map needs a filter name or attribute=")
	}
	f, ok := filters[toStr(args[0])]
	if !ok {
		return nil, fmt.Errorf("unknown filter %q", toStr(args[0]))
	}
	for i, it := range items {
		if out[i], err = f(it, args[1:], NewDict()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\"", "&#34;", "'", "&#39;").Replace(s)
}

var tests = map[string]testFunc{
	"defined":   func(v any, _ []any) (bool, error) { return !isUndefined(v), nil },
	"undefined": func(v any, _ []any) (bool, error) { return isUndefined(v), nil },
	"none":      func(v any, _ []any) (bool, error) { return v == nil, nil },
	"string":    func(v any, _ []any) (bool, error) { _, ok := v.(string); return ok, nil },
	"number": func(v any, _ []any) (bool, error) {
		switch v.(type) {
		case int64, float64:
			return true, nil
		}
		return false, nil
	},
	"integer":  func(v any, _ []any) (bool, error) { _, ok := v.(int64); return ok, nil },
	"float":    func(v any, _ []any) (bool, error) { _, ok := v.(float64); return ok, nil },
	"boolean":  func(v any, _ []any) (bool, error) { return isBool(v), nil },
	"true":     func(v any, _ []any) (bool, error) { return v == true, nil },
	"false":    func(v any, _ []any) (bool, error) { return v == false, nil },
	"mapping":  func(v any, _ []any) (bool, error) { _, ok := v.(*Dict); return ok, nil },
	"callable": func(v any, _ []any) (bool, error) { _, ok := v.(Func); return ok, nil },
	"iterable": func(v any, _ []any) (bool, error) {
		switch v.(type) {
		case string, []any, *Dict:
			return true, nil
		}
		return false, nil
	},
	"sequence": func(v any, _ []any) (bool, error) {
		switch v.(type) {
		case string, []any, *Dict:
			return true, nil
		}
		return false, nil
	},
	"odd":  func(v any, _ []any) (bool, error) { n, _ := toInt(v); return n%2 != 0, nil },
	"even": func(v any, _ []any) (bool, error) { n, _ := toInt(v); return n%2 == 0, nil },
	"divisibleby": func(v any, a []any) (bool, error) {
		n, _ := toInt(v)
		if len(a) == 0 {
			return false, errors.New("divisibleby needs an argument")
		}
		d, _ := toInt(a[0])
		return d != 0 && n%d == 0, nil
	},
	"lower": func(v any, _ []any) (bool, error) { s := toStr(v); return s == strings.ToLower(s), nil },
	"upper": func(v any, _ []any) (bool, error) { s := toStr(v); return s == strings.ToUpper(s), nil },
	"in": func(v any, a []any) (bool, error) {
		if len(a) == 0 {
			return false, errors.New("in needs an argument")
		}
		return contains(a[0], v)
	},
	"sameas": func(v any, a []any) (bool, error) { return len(a) > 0 && v == a[0], nil },
}

func init() {
	cmp := func(op string) testFunc {
		return func(v any, a []any) (bool, error) {
			if len(a) == 0 {
				return false, fmt.Errorf("test %s needs an argument", op)
			}
			r, err := binary(op, v, a[0])
			return r == true, err
		}
	}
	for _, names := range [][]string{{"==", "eq", "equalto"}, {"!=", "ne"}, {"<", "lt", "lessthan"},
		{">", "gt", "greaterthan"}, {"<=", "le"}, {">=", "ge"}} {
		for _, n := range names {
			tests[n] = cmp(names[0])
		}
	}
}
