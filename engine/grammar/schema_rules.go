package grammar

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// object builds the rule for an object schema with properties and/or
// additionalProperties, following llama.cpp's _build_object_rule.
func (c *converter) object(s *jvalue, name, ruleName string) (string, error) {
	required := map[string]bool{}
	if r := s.get("required"); r != nil && r.kind == 'a' {
		for _, k := range r.vals {
			required[k.text()] = true
		}
	}
	var reqKeys, optKeys []string
	kvRule := map[string]string{}
	props := s.get("properties")
	if props != nil && props.kind == 'o' {
		for i, k := range props.keys {
			val, err := c.visit(props.vals[i], child(name, k))
			if err != nil {
				return "", err
			}
			kvRule[k] = c.addRule(child(name, k)+"-kv", literal(jsonString(k))+` space ":" space `+val)
			if required[k] {
				reqKeys = append(reqKeys, k)
			} else {
				optKeys = append(optKeys, k)
			}
		}
	}
	if ap := s.get("additionalProperties"); ap != nil && !(ap.kind == 'b' && !ap.b) {
		sub := ap
		if ap.kind == 'b' {
			sub = &jvalue{kind: 'o'}
		}
		val, err := c.visit(sub, child(name, "additional"))
		if err != nil {
			return "", err
		}
		key := c.prim("string")
		if props != nil && len(props.keys) > 0 {
			key = c.notStrings(props.keys)
		}
		kvRule["*"] = c.addRule(child(name, "additional-kv"), key+` ":" space `+val)
		optKeys = append(optKeys, "*")
	}

	// rest(ks, firstOptional) accepts, in order, any subset of the optional
	// keys ks, each preceded by a comma; "*" (additional) may repeat. ks is
	// always a suffix of optKeys; the rule of each suffix is built once
	// (restRules, by length), which keeps the work linear in the keys where
	// rebuilding it for every alternative is quadratic.
	restRules := map[int]string{}
	var rest func(ks []string, firstOptional bool) string
	rest = func(ks []string, firstOptional bool) string {
		k := ks[0]
		kv := kvRule[k]
		comma := `( "," space ` + kv + ` )`
		var res string
		switch {
		case firstOptional && k == "*":
			res = comma + "*"
		case firstOptional:
			res = comma + "?"
		case k == "*":
			res = kv + " " + comma + "*"
		default:
			res = kv
		}
		if len(ks) > 1 {
			next, ok := restRules[len(ks)-1]
			if !ok {
				next = c.addRule(child(name, restName(k)), rest(ks[1:], true))
				restRules[len(ks)-1] = next
			}
			res += " " + next
		}
		return res
	}

	var b strings.Builder
	b.WriteString(`"{" space `)
	for i, k := range reqKeys {
		if i > 0 {
			b.WriteString(` "," space `)
		}
		b.WriteString(kvRule[k])
	}
	if len(optKeys) > 0 {
		b.WriteString(" (")
		if len(reqKeys) > 0 {
			b.WriteString(` "," space ( `)
		}
		for i := range optKeys {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(rest(optKeys[i:], false))
		}
		if len(reqKeys) > 0 {
			b.WriteString(" )")
		}
		b.WriteString(" )?")
	}
	b.WriteString(` "}" space`)
	return c.addRule(ruleName, b.String()), nil
}

func restName(k string) string {
	if k == "*" {
		return "additional-rest"
	}
	return k + "-rest"
}

// notStrings returns a rule for JSON strings (with trailing space) other
// than the given keys, used for additional property names.
func (c *converter) notStrings(keys []string) string {
	type trie struct {
		kids  map[rune]*trie
		order []rune
		end   bool
	}
	root := &trie{kids: map[rune]*trie{}}
	for _, k := range keys {
		enc := jsonString(k)
		n := root
		for _, r := range enc[1 : len(enc)-1] {
			if n.kids[r] == nil {
				n.kids[r] = &trie{kids: map[rune]*trie{}}
				n.order = append(n.order, r)
			}
			n = n.kids[r]
		}
		n.end = true
	}
	char := c.prim("char")
	var visit func(n *trie) string
	visit = func(n *trie) string {
		var alts []string
		exclude := ""
		escape := true
		for _, r := range n.order {
			kid := n.kids[r]
			lit := literal(string(r))
			exclude += strings.Trim(literal(string(r)), `"`)
			if r == '\\' {
				escape = false
			}
			if r == ']' || r == '-' || r == '^' {
				exclude = exclude[:len(exclude)-1] + `\` + string(r)
			}
			if kid.end {
				alts = append(alts, lit+" ("+visit(kid)+")")
			} else {
				alts = append(alts, lit+" ("+visit(kid)+")?")
			}
		}
		// Any other first character, then anything.
		other := `[^"\\\x7F\x00-\x1F` + exclude + `]`
		if escape {
			other = `(` + other + ` | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4}))`
		}
		alts = append(alts, other+" "+char+"*")
		return strings.Join(alts, " | ")
	}
	body := `"\"" (` + visit(root) + `)`
	if !root.end {
		body += "?"
	}
	return c.addRule("key", body+` "\"" space`)
}

// array builds the rule for a tuple (prefixItems or items as a list) or a
// list with minItems/maxItems.
func (c *converter) array(s *jvalue, name, ruleName string) (string, error) {
	items := s.get("prefixItems")
	if items == nil {
		items = s.get("items")
	}
	if items.kind == 'a' {
		parts := []string{`"[" space`}
		for i, it := range items.vals {
			if i > 0 {
				parts = append(parts, `"," space`)
			}
			r, err := c.visit(it, child(name, "tuple-"+strconv.Itoa(i)))
			if err != nil {
				return "", err
			}
			parts = append(parts, r)
		}
		parts = append(parts, `"]" space`)
		return c.addRule(ruleName, strings.Join(parts, " ")), nil
	}
	item, err := c.visit(items, child(name, "item"))
	if err != nil {
		return "", err
	}
	lo, _ := intMember(s, "minItems")
	hi, bounded := intMember(s, "maxItems")
	if bounded && hi < lo {
		return "", fmt.Errorf("grammar: %s: maxItems < minItems", ruleName)
	}
	body := `"[" space `
	if !bounded || hi > 0 {
		rep := fmt.Sprintf("{%d,}", max(lo-1, 0))
		if bounded {
			rep = fmt.Sprintf("{%d,%d}", max(lo-1, 0), hi-1)
		}
		seq := item + ` ( "," space ` + item + ` )` + rep
		if lo == 0 {
			seq = "( " + seq + " )?"
		}
		body += seq + " "
	}
	return c.addRule(ruleName, body+`"]" space`), nil
}

// mergeAllOf merges allOf object schemas (properties and required lists).
func (c *converter) mergeAllOf(all *jvalue) (*jvalue, error) {
	props := &jvalue{kind: 'o'}
	req := &jvalue{kind: 'a'}
	if all.kind != 'a' {
		return nil, fmt.Errorf("grammar: allOf must be a list")
	}
	for _, s := range all.vals {
		// A request's refs may form a cycle ({"$ref":"#/allOf/0"} inside allOf[0]), which
		// would otherwise be followed for ever.
		seen := map[string]bool{}
		for ref := s.get("$ref"); ref != nil; ref = s.get("$ref") {
			if seen[ref.text()] {
				return nil, fmt.Errorf("grammar: allOf: $ref %q leads back to itself", ref.text())
			}
			seen[ref.text()] = true
			var err error
			if s, err = c.resolve(ref.text()); err != nil {
				return nil, err
			}
		}
		if t := s.get("type").text(); t != "" && t != "object" || s.get("properties") == nil {
			return nil, fmt.Errorf("grammar: allOf supports only object schemas with properties")
		}
		p := s.get("properties")
		props.keys = append(props.keys, p.keys...)
		props.vals = append(props.vals, p.vals...)
		if r := s.get("required"); r != nil && r.kind == 'a' {
			req.vals = append(req.vals, r.vals...)
		}
	}
	return &jvalue{kind: 'o', keys: []string{"type", "properties", "required"},
		vals: []*jvalue{{kind: 's', str: "object"}, props, req}}, nil
}

// integerRange builds the rule for an integer with bounds.
func (c *converter) integerRange(s *jvalue) (string, error) {
	var lo, hi *int64
	for _, key := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		v := s.get(key)
		if v == nil || v.kind != 'n' {
			continue
		}
		f, err := strconv.ParseFloat(v.str, 64)
		if err != nil || math.Abs(f) > 1e18 {
			return "", fmt.Errorf("grammar: bad %s %s", key, v.str)
		}
		var n int64
		switch key {
		case "minimum":
			n = int64(math.Ceil(f))
		case "exclusiveMinimum":
			n = int64(math.Floor(f)) + 1
		case "maximum":
			n = int64(math.Floor(f))
		default:
			n = int64(math.Ceil(f)) - 1
		}
		if key == "minimum" || key == "exclusiveMinimum" {
			if lo == nil || n > *lo {
				lo = &n
			}
		} else if hi == nil || n < *hi {
			hi = &n
		}
	}
	if lo != nil && hi != nil && *lo > *hi {
		return "", fmt.Errorf("grammar: empty integer range [%d, %d]", *lo, *hi)
	}
	var alts []string
	if lo == nil || *lo < 0 {
		a := uint64(1)
		if hi != nil && *hi < 0 {
			a = uint64(-*hi)
		}
		b := uint64(math.MaxUint64)
		if lo != nil {
			b = uint64(-*lo)
		}
		alts = append(alts, `"-" (`+nonNegRange(a, b)+`)`)
	}
	if hi == nil || *hi >= 0 {
		a := uint64(0)
		if lo != nil && *lo > 0 {
			a = uint64(*lo)
		}
		b := uint64(math.MaxUint64)
		if hi != nil {
			b = uint64(*hi)
		}
		alts = append(alts, nonNegRange(a, b))
	}
	return "(" + strings.Join(alts, " | ") + ") space", nil
}

// nonNegRange returns an expression for the decimal numerals (no leading
// zeros) of the integers in [a, b]; b == MaxUint64 means unbounded, where
// numerals have at most 16 digits like llama.cpp's integral-part.
func nonNegRange(a, b uint64) string {
	const maxDigits = 16
	unbounded := b == math.MaxUint64
	hiLen := len(strconv.FormatUint(b, 10))
	if unbounded {
		hiLen = max(maxDigits, len(strconv.FormatUint(a, 10)))
	}
	var alts []string
	pow := uint64(1)
	for l := 1; l <= hiLen; l++ {
		first, last := pow, pow*10-1
		if l == 1 {
			first = 0
		}
		pow *= 10
		from, to := max(a, first), min(b, last)
		if from > to {
			continue
		}
		alts = append(alts, digitsRange(strconv.FormatUint(from, 10), strconv.FormatUint(to, 10)))
	}
	return strings.Join(alts, " | ")
}

// digitsRange returns an expression for the digit strings of len(a) between
// a and b (same length, a <= b), leading zeros included.
func digitsRange(a, b string) string {
	if a == b {
		return literal(a)
	}
	i := 0
	for a[i] == b[i] {
		i++
	}
	prefix := ""
	if i > 0 {
		prefix = literal(a[:i]) + " "
	}
	da, db, ra, rb := a[i], b[i], a[i+1:], b[i+1:]
	n := len(ra)
	if n == 0 {
		return prefix + fmt.Sprintf("[%c-%c]", da, db)
	}
	zeros, nines := strings.Repeat("0", n), strings.Repeat("9", n)
	var alts []string
	lowStart, highEnd := da, db
	if ra != zeros {
		alts = append(alts, literal(string(da))+" ("+digitsRange(ra, nines)+")")
		lowStart++
	}
	if rb != nines {
		highEnd--
	}
	if lowStart <= highEnd {
		alts = append(alts, fmt.Sprintf("[%c-%c] [0-9]{%d}", lowStart, highEnd, n))
	}
	if rb != nines {
		alts = append(alts, literal(string(db))+" ("+digitsRange(zeros, rb)+")")
	}
	return prefix + "(" + strings.Join(alts, " | ") + ")"
}
