package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

func schemaGrammar(t *testing.T, schema string) *Grammar {
	t.Helper()
	src, err := FromJSONSchema([]byte(schema))
	if err != nil {
		t.Fatalf("FromJSONSchema: %v", err)
	}
	return mustParse(t, src)
}

func TestSchemaObject(t *testing.T) {
	g := schemaGrammar(t, `{"type":"object","properties":{
		"name":{"type":"string"},"age":{"type":"integer"},"email":{"type":"string"},"ok":{"type":"boolean"}},
		"required":["name","age"]}`)
	checkCases(t, g,
		[]string{`{"name":"a","age":3}`, `{"name": "a", "age": -3, "ok": true}`, `{"name":"","age":0,"email":"x@y","ok":false}`,
			"{\n  \"name\": \"b\",\n  \"age\": 1\n}", `{"name":"a","age":1,"email":"e"}`},
		[]string{`{"age":3,"name":"a"}`, `{"name":"a"}`, `{"name":"a","age":1.5}`, `{"name":"a","age":1,"ok":true,"email":"e"}`,
			`{"name":"a","age":1,"x":1}`, `{"name":1,"age":1}`, `{"name":"a","age":01}`, `{"name":"a","age":1,}`})

	g = schemaGrammar(t, `{"properties":{"a":{"type":"null"}},"additionalProperties":{"type":"number"}}`)
	checkCases(t, g,
		[]string{`{}`, `{"a":null}`, `{"a":null,"b":1.5,"ab":2}`, `{"x":-1e5}`, `{"":1}`},
		[]string{`{"a":1}`, `{"b":"s"}`, `{"b":1,"a":null}`})

	g = schemaGrammar(t, `{"type":"object","additionalProperties":false}`)
	checkCases(t, g, []string{`{}`, `{ }`}, []string{`{"a":1}`})
}

func TestSchemaArraysEnums(t *testing.T) {
	g := schemaGrammar(t, `{"type":"array","items":{"type":"number"},"minItems":1,"maxItems":3}`)
	checkCases(t, g,
		[]string{`[1]`, `[1, 2.5, -3e2]`, `[ 0 ]`},
		[]string{`[]`, `[1,2,3,4]`, `[1,]`, `["a"]`})
	g = schemaGrammar(t, `{"type":"array","items":{"enum":["red","green",3,null]}}`)
	checkCases(t, g,
		[]string{`[]`, `["red"]`, `["green", 3, null, "red"]`},
		[]string{`["blue"]`, `[4]`, `["Red"]`})
	g = schemaGrammar(t, `{"prefixItems":[{"const":"x"},{"type":"boolean"}]}`)
	checkCases(t, g, []string{`["x",true]`, `[ "x", false ]`}, []string{`["x"]`, `["y",true]`, `["x",true,1]`})
	g = schemaGrammar(t, `{"oneOf":[{"type":"string","minLength":2,"maxLength":3},{"type":"integer","minimum":-12,"exclusiveMaximum":100}]}`)
	checkCases(t, g,
		[]string{`"ab"`, `"a\"c"`, `-12`, `-1`, `0`, `7`, `99`},
		[]string{`"a"`, `"abcd"`, `-13`, `100`, `-0`, `007`, `1.0`})
	g = schemaGrammar(t, `{"type":"integer","minimum":95,"maximum":1234}`)
	checkCases(t, g,
		[]string{"95", "99", "100", "999", "1000", "1199", "1234"},
		[]string{"94", "1235", "1300", "2000", "-100", "0095"})
	g = schemaGrammar(t, `{"type":"integer","exclusiveMinimum":9}`)
	checkCases(t, g, []string{"10", "99", "123456"}, []string{"9", "0", "-10"})
}

func TestSchemaRefsFormats(t *testing.T) {
	g := schemaGrammar(t, `{"$defs":{"node":{"type":"object","properties":{
		"v":{"$ref":"#/definitions/leaf"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},
		"definitions":{"leaf":{"type":["integer","null"]}},
		"$ref":"#/$defs/node"}`)
	checkCases(t, g,
		[]string{`{"v":1}`, `{"v":null,"kids":[]}`, `{"v":1,"kids":[{"v":2,"kids":[{"v":null}]}]}`},
		[]string{`{"kids":[]}`, `{"v":"x"}`, `{"v":1,"kids":[{}]}`})
	g = schemaGrammar(t, `{"type":"object","properties":{
		"d":{"type":"string","format":"date"},"t":{"type":"string","format":"time"},
		"dt":{"type":"string","format":"date-time"},"id":{"type":"string","format":"uuid"},
		"p":{"type":"string","pattern":"^(ab|c)+-\\d{2}[x-z]?$"}},"required":["d","t","dt","id","p"]}`)
	checkCases(t, g,
		[]string{`{"d":"2024-02-29","t":"23:59:01Z","dt":"1999-12-31T00:00:00.123+05:30","id":"123e4567-e89b-12d3-a456-426614174000","p":"abcab-42y"}`},
		[]string{`{"d":"2024-13-01","t":"23:59:01Z","dt":"1999-12-31T00:00:00Z","id":"123e4567-e89b-12d3-a456-426614174000","p":"c-42"}`,
			`{"d":"2024-12-01","t":"24:00:00Z","dt":"1999-12-31T00:00:00Z","id":"123e4567-e89b-12d3-a456-426614174000","p":"c-42"}`,
			`{"d":"2024-12-01","t":"23:00:00Z","dt":"1999-12-31T00:00:00Z","id":"123e4567-e89b-12d3-a456-42661417400","p":"c-42"}`,
			`{"d":"2024-12-01","t":"23:00:00Z","dt":"1999-12-31T00:00:00Z","id":"123e4567-e89b-12d3-a456-426614174000","p":"abd-42"}`})
	g = schemaGrammar(t, `{"allOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"boolean"}}}]}`)
	checkCases(t, g, []string{`{"a":1}`, `{"a":1,"b":true}`}, []string{`{"b":true}`, `{}`})
	g = schemaGrammar(t, `{}`)
	checkCases(t, g, []string{`{"x":[1,"a",null,{"y":false}]}`, `"s"`, `12`}, []string{`{x}`, `nul`})
}

func TestSchemaErrors(t *testing.T) {
	for _, s := range []string{`{"$ref":"#/$defs/missing"}`, `{"type":"string","pattern":"abc"}`, `{"type":"widget"}`,
		`{"type":"integer","minimum":5,"maximum":1}`, `not json`, `{"type":"string","pattern":"^(a$"}`,
		`{"type":123}`, `{"properties":{"a":{"type":{"x":1}}}}`} {
		if _, err := FromJSONSchema([]byte(s)); err == nil {
			t.Errorf("%s: no error", s)
		}
	}
}

// TestSchemaRandomWalk generates texts by picking random allowed pieces and
// checks that every completed text is valid JSON satisfying the schema.
func TestSchemaRandomWalk(t *testing.T) {
	g := schemaGrammar(t, `{"type":"object","properties":{
		"name":{"type":"string","maxLength":6},
		"age":{"type":"integer","minimum":0,"maximum":150},
		"tags":{"type":"array","items":{"enum":["a","bc"]},"maxItems":3},
		"active":{"type":"boolean"}},"required":["name","age"]}`)
	vocab := []string{"{", "}", "[", "]", ",", ":", " ", "\n", `"`, `"name"`, `"age"`, `"tags"`, `"active"`, `":`, `",`,
		"a", "b", "c", "bc", "x", "é", "\\n", "0", "1", "5", "15", "-", ".", "e", "true", "false", "null", `"a"`, `"bc"`, "na", "me", "g", "ge", "t", "ags", "ctive", "s", "i", "v", "n", "m"}
	for c := 'a'; c <= 'z'; c++ { // every letter, so no word is left unfinishable
		vocab = append(vocab, string(c))
	}
	closers := map[string]bool{"}": true, "]": true, `"`: true, ",": true, `",`: true, "1": true, "true": true, `"a"`: true}
	for seed := range 100 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		m, _ := g.NewMatcher("root")
		var out strings.Builder
		for step := 0; ; step++ {
			if m.Done() && (step > 80 || rng.IntN(3) == 0) {
				break
			}
			if step > 400 {
				t.Fatalf("seed %d: no end after 400 steps: %q", seed, out.String())
			}
			var allowed, closing []string
			for _, p := range vocab {
				if m.Allows(p) {
					allowed = append(allowed, p)
					if closers[p] {
						closing = append(closing, p)
					}
				}
			}
			if step > 60 && len(closing) > 0 {
				allowed = closing
			}
			if len(allowed) == 0 && m.Done() {
				break
			}
			if len(allowed) == 0 {
				t.Fatalf("seed %d: stuck after %q (done %v)", seed, out.String(), m.Done())
			}
			p := allowed[rng.IntN(len(allowed))]
			if err := m.Accept(p); err != nil {
				t.Fatalf("seed %d: Allows(%q) but Accept: %v", seed, p, err)
			}
			out.WriteString(p)
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(out.String()), &obj); err != nil {
			t.Fatalf("seed %d: %q is not JSON: %v", seed, out.String(), err)
		}
		name, ok := obj["name"].(string)
		age, ok2 := obj["age"].(float64)
		if !ok || !ok2 || len([]rune(name)) > 6 || age < 0 || age > 150 || age != float64(int(age)) {
			t.Fatalf("seed %d: bad required fields in %q", seed, out.String())
		}
		for k, v := range obj {
			switch k {
			case "name", "age":
			case "active":
				if _, ok := v.(bool); !ok {
					t.Fatalf("seed %d: active not bool in %q", seed, out.String())
				}
			case "tags":
				tags, ok := v.([]any)
				if !ok || len(tags) > 3 {
					t.Fatalf("seed %d: bad tags in %q", seed, out.String())
				}
				for _, tag := range tags {
					if tag != "a" && tag != "bc" {
						t.Fatalf("seed %d: bad tag in %q", seed, out.String())
					}
				}
			default:
				t.Fatalf("seed %d: unexpected key %q in %q", seed, k, out.String())
			}
		}
	}
}

func TestSchemaNameCollisions(t *testing.T) {
	g := schemaGrammar(t, `{"type":"object","properties":{"root":{"type":"integer"},"string":{"const":1},"value":{"type":"string"}},"required":["root","string","value"]}`)
	checkCases(t, g, []string{`{"root":1,"string":1,"value":"v"}`}, []string{`{"root":1,"string":"s","value":"v"}`, `1`})
}
