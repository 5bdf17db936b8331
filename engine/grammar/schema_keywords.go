package grammar

import (
	"fmt"
	"strconv"
)

// keywordKinds are the JSON kinds (jvalue.kind) each schema keyword the converter reads may
// have, and how to say so. llama.cpp's converter throws on most of these mistakes (a non-string
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
	"minLength":            {"n", "a non-negative integer"},
	"maxLength":            {"n", "a non-negative integer"},
	"minItems":             {"n", "a non-negative integer"},
	"maxItems":             {"n", "a non-negative integer"},
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
		ok := false
		for j := range len(spec.kinds) {
			ok = ok || v.kind == spec.kinds[j]
		}
		switch {
		case !ok:
		case spec.want == "a non-negative integer":
			n, err := strconv.ParseFloat(v.str, 64)
			ok = err == nil && n >= 0 && n == float64(int64(n))
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

// clipJSON shortens a value quoted in an error.
func clipJSON(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
