package grammar

import (
	"fmt"
	"strconv"
	"strings"
)

// keywordKinds are the JSON kinds (jvalue.kind, or 'i' for a non-negative integer) each
// schema keyword the converter reads may have, and how to say so. llama.cpp's converter throws on most of these mistakes (a non-string
// "type" is an "Unrecognized schema", a non-integer "minLength" a type error) and llama-server
// answers 400; we refuse them all instead of ignoring the keyword.
var keywordKinds = map[string]struct {
	kinds, want string
}{
	"type":                 {"sa", "a string or an array of strings"},
	"enum":                 {"a", "an array"},
	"required":             {"a", "an array of strings"},
	"properties":           {"o", "an object"},
	"additionalProperties": {"ob", "a boolean or an object"},
	"items":                {"oba", "a schema or an array of schemas"},
	"prefixItems":          {"a", "an array of schemas"},
	"anyOf":                {"a", "an array of schemas"},
	"oneOf":                {"a", "an array of schemas"},
	"allOf":                {"a", "an array of schemas"},
	"$ref":                 {"s", "a string"},
	"$defs":                {"o", "an object"},
	"definitions":          {"o", "an object"},
	"format":               {"s", "a string"},
	"pattern":              {"s", "a string"},
	"minLength":            {"i", "a non-negative integer"},
	"maxLength":            {"i", "a non-negative integer"},
	"minItems":             {"i", "a non-negative integer"},
	"maxItems":             {"i", "a non-negative integer"},
	"minimum":              {"n", "a number"},
	"maximum":              {"n", "a number"},
	"exclusiveMinimum":     {"n", "a number"},
	"exclusiveMaximum":     {"n", "a number"},
}

// checkKeywords refuses keywords of s whose values have the wrong type; at names the schema
// (its rule name) for the message.
func checkKeywords(s *jvalue, at string) error {
	for i, key := range s.keys {
		spec, known := keywordKinds[key]
		if !known {
			continue
		}
		v := s.vals[i]
		ok := strings.IndexByte(spec.kinds, v.kind) >= 0
		switch {
		case spec.kinds == "i":
			ok = v.kind == 'n' && nonNegativeInteger(v.str)
		case !ok:
		case key == "type" && v.kind == 'a', key == "required":
			for _, e := range v.vals {
				ok = ok && e.kind == 's'
			}
		case key == "properties" || key == "$defs" || key == "definitions":
			for _, e := range v.vals {
				ok = ok && (e.kind == 'o' || e.kind == 'b')
			}
			if !ok {
				spec.want = "an object of schemas"
			}
		}
		if !ok {
			return fmt.Errorf("grammar: %q must be %s, not %s (in schema %s)", key, spec.want, clipJSON(v.encode()), at)
		}
	}
	return nil
}

// nonNegativeInteger reports whether the JSON number text is a whole number, 0 or more.
func nonNegativeInteger(num string) bool {
	n, err := strconv.ParseFloat(num, 64)
	return err == nil && n >= 0 && n == float64(int64(n))
}

// clipJSON shortens a value quoted in an error.
func clipJSON(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
