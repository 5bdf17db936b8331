package grammar

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSchemaDepthLimit: a schema nested deeper than MaxSchemaDepth is refused, naming the
// limit, instead of building a grammar quadratic in the depth.
func TestSchemaDepthLimit(t *testing.T) {
	nested := func(depth int) string {
		return strings.Repeat(`{"type":"object","properties":{"a":`, depth) + `{"type":"string"}` + strings.Repeat(`}}`, depth)
	}
	if _, err := FromJSONSchema([]byte(nested(MaxSchemaDepth - 1))); err != nil {
		t.Fatalf("depth %d: %v", MaxSchemaDepth-1, err)
	}
	_, err := FromJSONSchema([]byte(nested(2000)))
	want := fmt.Sprintf("the schema nests deeper than %d levels", MaxSchemaDepth)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("depth 2000: err = %v, want %q", err, want)
	}
}

// TestSchemaGrammarSizeLimit: a schema whose grammar text would pass MaxSchemaGrammarBytes is
// refused, naming the limit.
func TestSchemaGrammarSizeLimit(t *testing.T) {
	var enum []string
	for i := range 40000 {
		enum = append(enum, fmt.Sprintf(`"value number %d"`, i))
	}
	_, err := FromJSONSchema([]byte(`{"enum":[` + strings.Join(enum, ",") + `]}`))
	want := fmt.Sprintf("the schema's grammar is larger than %d bytes", MaxSchemaGrammarBytes)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// TestGrammarExpansionLimit: a grammar of more than MaxGrammarElements elements, whether its
// repetitions expand a short text (or a schema's) or its text is that long, is refused with
// an *Error naming the limit.
func TestGrammarExpansionLimit(t *testing.T) {
	want := fmt.Sprintf("the grammar expands to more than %d elements", MaxGrammarElements)
	for name, src := range map[string]string{
		"long literal":  `root ::= "` + strings.Repeat("a", 2000) + `"{10000}`,
		"optional tail": `root ::= "` + strings.Repeat("a", 2000) + `"{0,10000}`,
		"many repeats":  "root ::= " + strings.Repeat(`[a-z]{0,10000} `, 200),
		// Plain text counts too: a few megabytes of grammar fail at the limit, not after
		// being parsed into as many elements.
		"long literal text": `root ::= "` + strings.Repeat("a", 3<<20) + `"`,
		"many alternates":   `root ::= "a"` + strings.Repeat(` | [b-c]`, 600000),
		"schema strings":    "",
	} {
		if name == "schema strings" {
			var props, names []string
			for i := range 200 {
				props = append(props, fmt.Sprintf(`"p%d":{"type":"string","maxLength":10000}`, i))
				names = append(names, fmt.Sprintf(`"p%d"`, i))
			}
			schema := `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(names, ",") + `]}`
			var err error
			if src, err = FromJSONSchema([]byte(schema)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		_, err := Parse(src)
		var gerr *Error
		if !errors.As(err, &gerr) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want an *Error with %q", name, err, want)
		}
	}
	// A grammar just inside the limit parses.
	if _, err := Parse(`root ::= [a-z]{0,10000} "` + strings.Repeat("b", 50) + `"{1000}`); err != nil {
		t.Errorf("small grammar: %v", err)
	}
}

// TestSchemaKeywordTypes: a keyword whose value has the wrong type is an error naming the
// keyword, the type it takes and the schema, not a keyword silently ignored.
func TestSchemaKeywordTypes(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type":123}`:          `"type" must be a string or an array of strings, not 123 (in schema root)`,
		`{"type":["string",1]}`: `"type" must be a string or an array of strings`,
		`{"enum":5}`:            `"enum" must be an array, not 5`,
		`{"type":"object","properties":{"a":{}},"required":"a"}`: `"required" must be an array of strings, not "a"`,
		`{"required":[1]}`: `"required" must be an array of strings`,
		`{"properties":{"a":{"type":"string","maxLength":"9"}}}`: `"maxLength" must be a non-negative integer, not "9" (in schema a)`,
		`{"type":"array","items":{},"minItems":1.5}`:             `"minItems" must be a non-negative integer, not 1.5`,
		`{"type":"integer","minimum":"0"}`:                       `"minimum" must be a number`,
		`{"properties":[]}`:                                      `"properties" must be an object`,
		`{"properties":{"a":3}}`:                                 `"properties" must be an object of schemas`,
		`{"anyOf":{}}`:                                           `"anyOf" must be an array of schemas`,
		`{"type":"string","format":7}`:                           `"format" must be a string`,
		`{"type":"string","pattern":null}`:                       `"pattern" must be a string`,
		`{"additionalProperties":"no"}`:                          `"additionalProperties" must be a boolean or an object`,
	} {
		_, err := FromJSONSchema([]byte(schema))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", schema, err, want)
		}
	}
}

// TestSchemaOptionalPropertiesLinear: the grammar of an object with many optional properties
// grows linearly with them (each suffix's rule is built once), so a 50 KB schema of 2000
// optional properties converts, within the size limit, instead of taking seconds and failing.
func TestSchemaOptionalPropertiesLinear(t *testing.T) {
	var props []string
	for i := range 2000 {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string"}`, i))
	}
	src, err := FromJSONSchema([]byte(`{"type":"object","properties":{` + strings.Join(props, ",") + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(src) > 2000*150 {
		t.Errorf("the grammar is %d bytes, over 150 per property", len(src))
	}
	g := mustParse(t, src)
	checkCases(t, g, []string{`{}`, `{"p0":"a"}`, `{"p5":"a","p1999":"b"}`}, []string{`{"p5":"a","p4":"b"}`, `{"x":1}`})
}

// TestSchemaAllOfRefCycle: an allOf part whose $refs lead back to themselves is an error, not
// a request that spins for ever.
func TestSchemaAllOfRefCycle(t *testing.T) {
	for _, schema := range []string{
		`{"$defs":{"a":{"$ref":"#/$defs/a"}},"allOf":[{"$ref":"#/$defs/a"}]}`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"allOf":[{"$ref":"#/$defs/a"}]}`,
		`{"allOf":[{"$ref":"#/allOf/0"}]}`,
	} {
		done := make(chan error, 1)
		go func() { _, err := FromJSONSchema([]byte(schema)); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "leads back to itself") {
				t.Errorf("%s: err = %v, want the $ref cycle named", schema, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still converting after 5 s", schema)
		}
	}
}
