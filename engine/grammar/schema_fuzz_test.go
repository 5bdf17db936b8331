package grammar

import (
	"testing"
	"time"
)

// FuzzJSONSchema turns JSON schemas into GBNF and parses the result: never a panic, and
// bounded time. A grammar made may still fail to parse, as llama.cpp's does for the same
// schemas: a schema that refers to itself consuming nothing (`{"$ref": "#"}`, left recursion)
// or an empty oneOf (an empty rule), both kept in testdata; the request then gets the parse
// error.
func FuzzJSONSchema(f *testing.F) {
	for _, seed := range []string{
		`{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}}, "required": ["name"]}`,
		`{"type": "array", "items": {"enum": ["a", "b", 3, null]}, "minItems": 1, "maxItems": 3}`,
		`{"oneOf": [{"type": "number"}, {"type": "string", "pattern": "^[a-z]{2,5}$"}]}`,
		`{"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}`,
		`{"type": "string", "format": "date-time"}`,
		`{"type": "integer", "minimum": -5, "maximum": 120}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		if len(schema) > 4096 {
			return
		}
		start := time.Now()
		src, err := FromJSONSchema(schema)
		if err != nil {
			return
		}
		if _, err := Parse(src); err != nil && err.Error() == "" {
			t.Fatalf("the grammar of %s: an empty error", schema)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%v for a %d-byte schema", d, len(schema))
		}
	})
}
