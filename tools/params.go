package tools

import (
	"encoding/json"
	"fmt"
	"math"
)

// params reads a call's parameters, keeping the first problem: a tool reads all it takes, then
// checks err once.
type params struct {
	p   map[string]any
	err error
}

// str is the string parameter name: def when absent.
func (r *params) str(name string, required bool, def string) string {
	v, err := str(r.p, name, required, def)
	r.keep(err)
	return v
}

// int is the integer parameter name: def when absent.
func (r *params) int(name string, def int) int {
	v, err := integer(r.p, name, def)
	r.keep(err)
	return v
}

// bool is the boolean parameter name: false when absent.
func (r *params) bool(name string) bool {
	v, err := boolean(r.p, name)
	r.keep(err)
	return v
}

func (r *params) keep(err error) {
	if r.err == nil {
		r.err = err
	}
}

// str returns the string parameter name: def when absent, a BadParams when required and absent
// or when not a string.
func str(p map[string]any, name string, required bool, def string) (string, error) {
	v, ok := p[name]
	if !ok || v == nil {
		if required {
			return "", &BadParams{Msg: fmt.Sprintf("missing parameter %q", name)}
		}
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", &BadParams{Msg: fmt.Sprintf("parameter %q must be a string, not %s", name, jsonType(v))}
	}
	return s, nil
}

// integer returns the integer parameter name, def when absent.
func integer(p map[string]any, name string, def int) (int, error) {
	v, ok := p[name]
	if !ok || v == nil {
		return def, nil
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case json.Number:
		g, err := n.Float64()
		if err != nil {
			return 0, &BadParams{Msg: fmt.Sprintf("parameter %q: %v", name, err)}
		}
		f = g
	case int:
		return n, nil
	default:
		return 0, &BadParams{Msg: fmt.Sprintf("parameter %q must be an integer, not %s", name, jsonType(v))}
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<31 {
		return 0, &BadParams{Msg: fmt.Sprintf("parameter %q must be an integer, not %v", name, f)}
	}
	return int(f), nil
}

// boolean returns the boolean parameter name, false when absent.
func boolean(p map[string]any, name string) (bool, error) {
	v, ok := p[name]
	if !ok || v == nil {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, &BadParams{Msg: fmt.Sprintf("parameter %q must be a boolean, not %s", name, jsonType(v))}
	}
	return b, nil
}

// jsonType names the JSON type of a decoded value.
func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case float64, json.Number, int:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// marshalCompact is v as compact JSON.
func marshalCompact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
