package jinja

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Values inside templates are plain Go values: nil (none), bool, int64, float64, string,
// []any (a list or tuple), *Dict (a mapping that keeps insertion order), Func (a callable) and
// Undefined (a name or attribute that does not exist).

// Undefined is the value of a missing variable, attribute or key. It prints as "", is false and
// iterates as empty, as Jinja's default Undefined does.
type Undefined struct{}

// Func is a callable value: a global function, a macro or a bound method.
type Func func(args []any, kwargs *Dict) (any, error)

// Dict is a mapping with string keys that remembers insertion order, as Python dicts do, so
// tojson and items() see the keys in the order a request sent them.
type Dict struct {
	keys []string
	m    map[string]any
	// typed remembers keys written as numbers or booleans in a dict literal ({0: ...}), which
	// iteration gives back with their type, so they compare as numbers.
	typed map[string]any
}

// setTyped sets key k (any scalar) to v, remembering a key that is not a string.
func (d *Dict) setTyped(k, v any) {
	ks := toStr(k)
	d.Set(ks, v)
	if _, isStr := k.(string); !isStr {
		if d.typed == nil {
			d.typed = map[string]any{}
		}
		d.typed[ks] = k
	}
}

// key is key k as written: its number or boolean when it was one.
func (d *Dict) key(k string) any {
	if t, ok := d.typed[k]; ok {
		return t
	}
	return k
}

// NewDict returns an empty Dict.
func NewDict() *Dict { return &Dict{m: map[string]any{}} }

// Set sets key to v, appending key when it is new.
func (d *Dict) Set(key string, v any) {
	if _, ok := d.m[key]; !ok {
		d.keys = append(d.keys, key)
	}
	d.m[key] = v
}

// Get returns the value of key and whether it is present.
func (d *Dict) Get(key string) (any, bool) {
	if d == nil {
		return nil, false
	}
	v, ok := d.m[key]
	return v, ok
}

// Keys returns the keys in insertion order.
func (d *Dict) Keys() []string {
	if d == nil {
		return nil
	}
	return d.keys
}

// Len returns the number of keys.
func (d *Dict) Len() int {
	if d == nil {
		return 0
	}
	return len(d.keys)
}

func isUndefined(v any) bool { _, ok := v.(Undefined); return ok }

// truthy is Python's truth value of v.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil, Undefined:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case *Dict:
		return x.Len() > 0
	}
	return true
}

// toStr is Python's str(v), with Jinja's "" for undefined.
func toStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case Undefined:
		return ""
	}
	return repr(v, false)
}

// repr is Python's repr(v) (quoted strings) or, with top false, str for the outer value.
func repr(v any, quote bool) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case Undefined:
		return ""
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return formatFloat(x)
	case string:
		if !quote {
			return x
		}
		if strings.Contains(x, "'") && !strings.Contains(x, "\"") {
			return "\"" + x + "\""
		}
		return "'" + strings.ReplaceAll(strings.ReplaceAll(x, "\\", "\\\\"), "'", "\\'") + "'"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = repr(e, true)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *Dict:
		parts := make([]string, 0, x.Len())
		for _, k := range x.keys {
			parts = append(parts, repr(k, true)+": "+repr(x.m[k], true))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case Func:
		return "<function>"
	}
	return fmt.Sprint(v)
}

// formatFloat writes f as Python's repr does (18.0, 0.5, 1e+20).
func formatFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		switch {
		case math.IsNaN(f):
			return "nan"
		case f > 0:
			return "inf"
		}
		return "-inf"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// toFloat converts a number (or bool) to float64.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// toInt converts a number (or bool) to int64.
func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		return int64(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// equal is Python's ==.
func equal(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		if fb, ok := toFloat(b); ok {
			return fa == fb
		}
		return false
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case Undefined:
		return isUndefined(b)
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.keys {
			w, ok := y.m[k]
			if !ok || !equal(x.m[k], w) {
				return false
			}
		}
		return true
	}
	return false
}

// compare orders a and b (numbers, strings, lists) as Python's < does.
func compare(a, b any) (int, error) {
	if fa, ok := toFloat(a); ok {
		if fb, ok := toFloat(b); ok {
			switch {
			case fa < fb:
				return -1, nil
			case fa > fb:
				return 1, nil
			}
			return 0, nil
		}
	}
	if sa, ok := a.(string); ok {
		if sb, ok := b.(string); ok {
			return strings.Compare(sa, sb), nil
		}
	}
	return 0, fmt.Errorf("cannot compare %s with %s", typeName(a), typeName(b))
}

// typeName names v's type as Python would.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case Undefined:
		return "undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case *Dict:
		return "dict"
	case Func:
		return "function"
	}
	return fmt.Sprintf("%T", v)
}

// iterate returns the items a for loop over v visits: list elements, dict keys, string
// characters; undefined and none give nothing.
func iterate(v any) ([]any, error) {
	switch x := v.(type) {
	case nil, Undefined:
		return nil, nil
	case []any:
		return x, nil
	case *Dict:
		out := make([]any, len(x.keys))
		for i, k := range x.keys {
			out[i] = x.key(k)
		}
		return out, nil
	case string:
		out := make([]any, 0, len(x))
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s is not iterable", typeName(v))
}

// contains is Python's "needle in hay".
func contains(hay, needle any) (bool, error) {
	switch x := hay.(type) {
	case string:
		s, ok := needle.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", typeName(needle))
		}
		return strings.Contains(x, s), nil
	case []any:
		for _, e := range x {
			if equal(e, needle) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		s, ok := needle.(string)
		if !ok {
			return false, nil
		}
		_, has := x.m[s]
		return has, nil
	case nil, Undefined:
		return false, nil
	}
	return false, fmt.Errorf("argument of type %s is not iterable", typeName(hay))
}

// sortValues sorts vs in place by Python ordering.
func sortValues(vs []any) {
	sort.SliceStable(vs, func(i, j int) bool {
		c, _ := compare(vs[i], vs[j])
		return c < 0
	})
}
