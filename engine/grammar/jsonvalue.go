package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/go-faster/jx"
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
	d := jx.DecodeBytes(data)
	v, err := readValue(d)
	if err != nil {
		return nil, err
	}
	// At the end only whitespace may remain: Skip then finds nothing at all.
	if err := d.Skip(); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, errors.New("trailing data after the schema")
	}
	return v, nil
}

// readValue decodes one value with jx, which is many times faster than encoding/json's
// tokenizer on the megabytes a schema may hold.
func readValue(d *jx.Decoder) (*jvalue, error) {
	switch d.Next() {
	case jx.Object:
		v := &jvalue{kind: 'o'}
		err := d.Obj(func(d *jx.Decoder, key string) error {
			val, err := readValue(d)
			if err != nil {
				return err
			}
			v.keys = append(v.keys, key)
			v.vals = append(v.vals, val)
			return nil
		})
		return v, err
	case jx.Array:
		v := &jvalue{kind: 'a'}
		err := d.Arr(func(d *jx.Decoder) error {
			val, err := readValue(d)
			if err != nil {
				return err
			}
			v.vals = append(v.vals, val)
			return nil
		})
		return v, err
	case jx.String:
		str, err := d.Str()
		return &jvalue{kind: 's', str: str}, err
	case jx.Number:
		n, err := d.Num()
		return &jvalue{kind: 'n', str: n.String()}, err
	case jx.Bool:
		b, err := d.Bool()
		return &jvalue{kind: 'b', b: b}, err
	case jx.Null:
		return &jvalue{kind: 'z'}, d.Null()
	}
	// Invalid: let jx describe what it found.
	if err := d.Skip(); err != nil {
		return nil, err
	}
	return nil, errors.New("expecting a JSON value")
}
