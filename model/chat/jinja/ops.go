package jinja

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// sliceItems is Python's items[start:stop:step].
func sliceItems(items []any, start, stop, step any) []any {
	n := int64(len(items))
	st := int64(1)
	if v, ok := toInt(step); ok && v != 0 {
		st = v
	}
	norm := func(v any, def int64) int64 {
		i, ok := toInt(v)
		if !ok {
			return def
		}
		if i < 0 {
			i += n
		}
		lo, hi := int64(0), n
		if st < 0 {
			lo, hi = -1, n-1
		}
		return max(lo, min(i, hi))
	}
	var out []any
	if st > 0 {
		for i := norm(start, 0); i < norm(stop, n); i += st {
			out = append(out, items[i])
		}
	} else {
		for i := norm(start, n-1); i > norm(stop, -1); i += st {
			out = append(out, items[i])
		}
	}
	return out
}

// concatMissing joins a string with none or undefined as llama.cpp's Jinja engine does for + and
// ~: the missing side counts as "" (templates such as firefunction-v2's add an undefined
// variable to a string).
func concatMissing(l, r any) (string, bool) {
	missing := func(v any) bool { return v == nil || isUndefined(v) }
	ls, lStr := l.(string)
	rs, rStr := r.(string)
	switch {
	case lStr && missing(r):
		return ls, true
	case rStr && missing(l):
		return rs, true
	}
	return "", false
}

// binary applies a non-short-circuit operator.
func binary(op string, l, r any) (any, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "<", ">", "<=", ">=":
		c, err := compare(l, r)
		if err != nil {
			return nil, err
		}
		return op == "<" && c < 0 || op == ">" && c > 0 || op == "<=" && c <= 0 || op == ">=" && c >= 0, nil
	case "in", "not in":
		ok, err := contains(r, l)
		return ok != (op == "not in"), err
	case "~":
		if s, ok := concatMissing(l, r); ok {
			return s, nil
		}
		return toStr(l) + toStr(r), nil
	case "+":
		if s, ok := concatMissing(l, r); ok {
			return s, nil
		}
		if ls, ok := l.(string); ok {
			if rs, ok := r.(string); ok {
				return ls + rs, nil
			}
		}
		if ll, ok := l.([]any); ok {
			if rl, ok := r.([]any); ok {
				return append(append([]any{}, ll...), rl...), nil
			}
		}
	case "*":
		if s, ok := l.(string); ok {
			if n, ok := r.(int64); ok {
				return strings.Repeat(s, int(max(n, 0))), nil
			}
		}
	}
	li, lInt := l.(int64)
	ri, rInt := r.(int64)
	lf, lNum := toFloat(l)
	rf, rNum := toFloat(r)
	if !lNum || !rNum || isBool(l) && isBool(r) {
		return nil, fmt.Errorf("unsupported operand types for %s: %s and %s", op, typeName(l), typeName(r))
	}
	both := lInt && rInt
	switch op {
	case "+":
		if both {
			return li + ri, nil
		}
		return lf + rf, nil
	case "-":
		if both {
			return li - ri, nil
		}
		return lf - rf, nil
	case "*":
		if both {
			return li * ri, nil
		}
		return lf * rf, nil
	case "/":
		if rf == 0 {
			return nil, errors.New("division by zero")
		}
		return lf / rf, nil
	case "//", "%":
		if rf == 0 {
			return nil, errors.New("integer division or modulo by zero")
		}
		if both {
			q := li / ri
			if (li%ri != 0) && ((li < 0) != (ri < 0)) {
				q--
			}
			if op == "//" {
				return q, nil
			}
			return li - q*ri, nil
		}
		q := math.Floor(lf / rf)
		if op == "//" {
			return q, nil
		}
		return lf - q*rf, nil
	case "**":
		if both && ri >= 0 {
			return int64(math.Pow(float64(li), float64(ri))), nil
		}
		return math.Pow(lf, rf), nil
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}

func isBool(v any) bool { _, ok := v.(bool); return ok }
