package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// jvalue is a JSON value that keeps the order of object keys, which the
// schema converter needs (properties are emitted in source order).
type jvalue struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	keys []string
	vals []*jvalue // object values (parallel to keys) or array elements
	str  string    // string contents or number text
	b    bool
}

// get returns the member named key of an object, or nil.
func (v *jvalue) get(key string) *jvalue {
	if v == nil || v.kind != 'o' {
		return nil
	}
	for i, k := range v.keys {
		if k == key {
			return v.vals[i]
		}
	}
	return nil
}

// text returns the string value, or "" for anything else.
func (v *jvalue) text() string {
	if v == nil || v.kind != 's' {
		return ""
	}
	return v.str
}

// encode returns the compact JSON encoding of v (as json.Marshal would
// write it, keys in source order).
func (v *jvalue) encode() string {
	var b bytes.Buffer
	v.write(&b)
	return b.String()
}

func (v *jvalue) write(b *bytes.Buffer) {
	switch v.kind {
	case 'o':
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(k))
			b.WriteByte(':')
			v.vals[i].write(b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, e := range v.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			e.write(b)
		}
		b.WriteByte(']')
	case 's':
		b.WriteString(jsonString(v.str))
	case 'n':
		b.WriteString(v.str)
	case 'b':
		fmt.Fprint(b, v.b)
	default:
		b.WriteString("null")
	}
}

// jsonString encodes s as a JSON string without HTML escaping.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return string(bytes.TrimRight(b.Bytes(), "\n"))
}

// parseJSON decodes data into a jvalue.
func parseJSON(data []byte) (*jvalue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("grammar: trailing data after JSON schema")
	}
	return v, nil
}

func readValue(dec *json.Decoder) (*jvalue, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			v := &jvalue{kind: 'o'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				val, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, kt.(string))
				v.vals = append(v.vals, val)
			}
			_, err := dec.Token()
			return v, err
		}
		v := &jvalue{kind: 'a'}
		for dec.More() {
			val, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			v.vals = append(v.vals, val)
		}
		_, err := dec.Token()
		return v, err
	case string:
		return &jvalue{kind: 's', str: t}, nil
	case json.Number:
		return &jvalue{kind: 'n', str: t.String()}, nil
	case bool:
		return &jvalue{kind: 'b', b: t}, nil
	default:
		return &jvalue{kind: 'z'}, nil
	}
}
