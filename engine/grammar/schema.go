package grammar

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Rules shared by converted schemas, as in llama.cpp's json-schema-to-grammar.
const spaceRule = `| " " | "\n"{1,2} [ \t]{0,20}`

type primitive struct {
	body string
	deps []string
}

var primitives = map[string]primitive{
	"boolean":          {`("true" | "false") space`, nil},
	"decimal-part":     {`[0-9]{1,16}`, nil},
	"integral-part":    {`[0] | [1-9] [0-9]{0,15}`, nil},
	"number":           {`("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space`, []string{"integral-part", "decimal-part"}},
	"integer":          {`("-"? integral-part) space`, []string{"integral-part"}},
	"value":            {`object | array | string | number | boolean | null`, []string{"object", "array", "string", "number", "boolean", "null"}},
	"object":           {`"{" space ( string ":" space value ("," space string ":" space value)* )? "}" space`, []string{"string", "value"}},
	"array":            {`"[" space ( value ("," space value)* )? "]" space`, []string{"value"}},
	"uuid":             {`"\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"" space`, nil},
	"char":             {`[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})`, nil},
	"string":           {`"\"" char* "\"" space`, []string{"char"}},
	"null":             {`"null" space`, nil},
	"date":             {`[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )`, nil},
	"time":             {`([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`, nil},
	"date-time":        {`date "T" time`, []string{"date", "time"}},
	"date-string":      {`"\"" date "\"" space`, []string{"date"}},
	"time-string":      {`"\"" time "\"" space`, []string{"time"}},
	"date-time-string": {`"\"" date-time "\"" space`, []string{"date-time"}},
}

// converter accumulates the rules of one FromJSONSchema call.
type converter struct {
	root  *jvalue
	rules map[string]string
	refs  map[string]string // $ref -> rule name
	depth int               // of the schema visit is in
	size  int               // bytes of the rules added so far
}

var invalidName = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// FromJSONSchema converts a JSON Schema to GBNF grammar text whose root rule
// accepts the JSON texts valid under the schema, as llama.cpp's
// json-schema-to-grammar does: objects list required properties in
// declaration order followed by any subset of the optional ones in order;
// additionalProperties is off unless given; whitespace between tokens is
// limited as in llama.cpp's "space" rule. Supported keywords: type (single
// or list), properties, required, additionalProperties, items,
// prefixItems, minItems, maxItems, enum, const, anyOf, oneOf, allOf (of
// objects), $ref to #/$defs and #/definitions, format (date, time,
// date-time, uuid), pattern, minLength, maxLength, and for integers
// minimum, maximum, exclusiveMinimum, exclusiveMaximum.
func FromJSONSchema(schema []byte) (string, error) {
	root, err := parseJSON(schema)
	if err != nil {
		return "", fmt.Errorf("grammar: bad JSON schema: %w", err)
	}
	c := &converter{root: root, rules: map[string]string{"space": spaceRule}, refs: map[string]string{}}
	r, err := c.visit(root, "")
	if err != nil {
		return "", err
	}
	c.rules["root"] = r
	if c.size > MaxSchemaGrammarBytes {
		return "", errGrammarTooLarge
	}
	names := make([]string, 0, len(c.rules))
	for name := range c.rules {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "%s ::= %s\n", name, c.rules[name])
	}
	return b.String(), nil
}

// addRule defines a rule, renaming it when the name holds a different body.
func (c *converter) addRule(name, body string) string {
	key := invalidName.ReplaceAllString(name, "-")
	_, reserved := primitives[key]
	reserved = reserved || key == "root" || key == "space" || key == "not-strings"
	if old, ok := c.rules[key]; !reserved && (!ok || old == body) {
		c.define(key, body, ok)
		return key
	}
	for i := 0; ; i++ {
		k := key + strconv.Itoa(i)
		if old, ok := c.rules[k]; !ok || old == body {
			c.define(k, body, ok)
			return k
		}
	}
}

// define sets rule key to body, counting the bytes of a new rule towards MaxSchemaGrammarBytes.
func (c *converter) define(key, body string, existed bool) {
	if !existed {
		c.size += len(key) + len(body) + len(" ::= \n")
	}
	c.rules[key] = body
}

// prim adds a primitive rule and its dependencies.
func (c *converter) prim(name string) string {
	if _, ok := c.rules[name]; ok {
		return name
	}
	p := primitives[name]
	c.rules[name] = p.body
	for _, d := range p.deps {
		c.prim(d)
	}
	return name
}

// literal returns a GBNF string literal for s.
func literal(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7F:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func child(name, suffix string) string {
	if name == "" {
		return suffix
	}
	return name + "-" + suffix
}

// resolve follows a local $ref ("#/$defs/x", "#/definitions/x", "#").
func (c *converter) resolve(ref string) (*jvalue, error) {
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("grammar: unsupported $ref %q (only local refs)", ref)
	}
	v := c.root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		if v.kind == 'a' {
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v.vals) {
				return nil, fmt.Errorf("grammar: unresolvable $ref %q", ref)
			}
			v = v.vals[i]
			continue
		}
		if v = v.get(part); v == nil {
			return nil, fmt.Errorf("grammar: unresolvable $ref %q", ref)
		}
	}
	return v, nil
}

// visit converts schema s into a rule named after name and returns the rule's name.
func (c *converter) visit(s *jvalue, name string) (string, error) {
	if c.depth++; c.depth > MaxSchemaDepth {
		return "", fmt.Errorf("grammar: the schema nests deeper than %d levels", MaxSchemaDepth)
	}
	defer func() { c.depth-- }()
	if c.size > MaxSchemaGrammarBytes {
		return "", errGrammarTooLarge
	}
	ruleName := name
	if ruleName == "" {
		ruleName = "root"
	}
	if s.kind == 'b' {
		if !s.b {
			return "", fmt.Errorf("grammar: schema false accepts nothing")
		}
		return c.addRule(ruleName, c.prim("value")), nil
	}
	if s.kind != 'o' {
		return "", fmt.Errorf("grammar: schema %s is not an object", ruleName)
	}
	if err := checkKeywords(s, ruleName); err != nil {
		return "", err
	}
	typ := s.get("type") // a string or an array of strings (checkKeywords)
	if ref := s.get("$ref").text(); ref != "" {
		if r, ok := c.refs[ref]; ok {
			return c.addRule(ruleName, r), nil
		}
		target, err := c.resolve(ref)
		if err != nil {
			return "", err
		}
		refName := ref[strings.LastIndexByte(ref, '/')+1:]
		if refName == "#" || refName == "" {
			refName = "root"
		}
		refName = invalidName.ReplaceAllString("ref-"+refName, "-")
		for i := 0; c.rules[refName] != ""; i++ {
			refName = invalidName.ReplaceAllString(ref[strings.LastIndexByte(ref, '/')+1:], "-")
			refName = "ref-" + refName + strconv.Itoa(i)
		}
		c.refs[ref] = refName // before visiting, for recursive schemas
		body, err := c.visit(target, refName)
		if err != nil {
			return "", err
		}
		if body != refName {
			c.rules[refName] = body
		}
		return c.addRule(ruleName, refName), nil
	}
	alts := s.get("oneOf")
	if alts == nil {
		alts = s.get("anyOf")
	}
	switch {
	case alts != nil && alts.kind == 'a':
		var parts []string
		for i, a := range alts.vals {
			r, err := c.visit(a, child(name, strconv.Itoa(i)))
			if err != nil {
				return "", err
			}
			parts = append(parts, r)
		}
		return c.addRule(ruleName, strings.Join(parts, " | ")), nil
	case s.get("allOf") != nil:
		merged, err := c.mergeAllOf(s.get("allOf"))
		if err != nil {
			return "", err
		}
		return c.visit(merged, name)
	case s.get("const") != nil:
		return c.addRule(ruleName, literal(s.get("const").encode())+" space"), nil
	case s.get("enum") != nil && s.get("enum").kind == 'a':
		var parts []string
		size := c.size
		for _, v := range s.get("enum").vals {
			parts = append(parts, literal(v.encode()))
			if size += len(parts[len(parts)-1]) + len(" | "); size > MaxSchemaGrammarBytes {
				return "", errGrammarTooLarge
			}
		}
		return c.addRule(ruleName, "("+strings.Join(parts, " | ")+") space"), nil
	case typ != nil && typ.kind == 'a':
		var parts []string
		for _, t := range typ.vals {
			sub := &jvalue{kind: 'o', keys: append([]string(nil), s.keys...), vals: append([]*jvalue(nil), s.vals...)}
			for i, k := range sub.keys {
				if k == "type" {
					sub.vals[i] = t
				}
			}
			r, err := c.visit(sub, child(name, t.text()))
			if err != nil {
				return "", err
			}
			parts = append(parts, r)
		}
		return c.addRule(ruleName, strings.Join(parts, " | ")), nil
	}
	t := typ.text()
	ap := s.get("additionalProperties")
	switch {
	case (t == "" || t == "object") && (s.get("properties") != nil || (ap != nil && !(ap.kind == 'b' && ap.b))):
		return c.object(s, name, ruleName)
	case (t == "" || t == "array") && (s.get("items") != nil || s.get("prefixItems") != nil):
		return c.array(s, name, ruleName)
	case (t == "" || t == "string") && s.get("pattern") != nil:
		body, err := c.pattern(s.get("pattern").text())
		if err != nil {
			return "", err
		}
		return c.addRule(ruleName, body), nil
	case t == "string" && s.get("format") != nil:
		switch f := s.get("format").text(); f {
		case "uuid":
			return c.addRule(ruleName, c.prim("uuid")), nil
		case "date", "time", "date-time":
			return c.addRule(ruleName, c.prim(f+"-string")), nil
		}
		return c.addRule(ruleName, c.prim("string")), nil
	case t == "string" && (s.get("minLength") != nil || s.get("maxLength") != nil):
		lo, _ := intMember(s, "minLength")
		rep := fmt.Sprintf("{%d,}", lo)
		if hi, ok := intMember(s, "maxLength"); ok {
			rep = fmt.Sprintf("{%d,%d}", lo, hi)
		}
		return c.addRule(ruleName, `"\"" `+c.prim("char")+rep+` "\"" space`), nil
	case t == "integer" && hasAny(s, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
		body, err := c.integerRange(s)
		if err != nil {
			return "", err
		}
		return c.addRule(ruleName, body), nil
	case t == "":
		return c.addRule(ruleName, c.prim("value")), nil
	case t == "object" || t == "array" || t == "string" || t == "number" || t == "integer" || t == "boolean" || t == "null":
		return c.addRule(ruleName, c.prim(t)), nil
	}
	return "", fmt.Errorf("grammar: unsupported schema type %q", t)
}

func hasAny(s *jvalue, keys ...string) bool {
	for _, k := range keys {
		if s.get(k) != nil {
			return true
		}
	}
	return false
}

// intMember returns a non-negative integer member of s.
func intMember(s *jvalue, key string) (int, bool) {
	v := s.get(key)
	if v == nil || v.kind != 'n' {
		return 0, false
	}
	f, err := strconv.ParseFloat(v.str, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	return int(f), true
}
