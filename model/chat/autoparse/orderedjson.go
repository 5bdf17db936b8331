package autoparse

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// jsonValue is a parsed JSON value whose objects keep their key order, as the tool-call
// JSON a template rendered is read field by field in order.
type jsonValue struct {
	str    *string     // set for a string
	fields []jsonField // set (maybe empty) for an object
	isObj  bool
	dump   string // compact serialization, for substring tests
}

type jsonField struct {
	key string
	val jsonValue
}

// parseOrderedJSON parses s, which must hold exactly one JSON value.
func parseOrderedJSON(s string) (jsonValue, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return jsonValue{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jsonValue{}, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

func decodeOrdered(dec *json.Decoder) (jsonValue, error) {
	t, err := dec.Token()
	if err != nil {
		return jsonValue{}, err
	}
	switch x := t.(type) {
	case json.Delim:
		var b bytes.Buffer
		switch x {
		case '{':
			v := jsonValue{isObj: true, fields: []jsonField{}}
			b.WriteByte('{')
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jsonValue{}, err
				}
				k, _ := kt.(string)
				fv, err := decodeOrdered(dec)
				if err != nil {
					return jsonValue{}, err
				}
				if len(v.fields) > 0 {
					b.WriteByte(',')
				}
				kb, _ := json.Marshal(k)
				b.Write(kb)
				b.WriteByte(':')
				b.WriteString(fv.dump)
				v.fields = append(v.fields, jsonField{k, fv})
			}
			if _, err := dec.Token(); err != nil {
				return jsonValue{}, err
			}
			b.WriteByte('}')
			v.dump = b.String()
			return v, nil
		case '[':
			b.WriteByte('[')
			for n := 0; dec.More(); n++ {
				ev, err := decodeOrdered(dec)
				if err != nil {
					return jsonValue{}, err
				}
				if n > 0 {
					b.WriteByte(',')
				}
				b.WriteString(ev.dump)
			}
			if _, err := dec.Token(); err != nil {
				return jsonValue{}, err
			}
			b.WriteByte(']')
			return jsonValue{dump: b.String()}, nil
		}
		return jsonValue{}, errors.New("unexpected delimiter")
	case string:
		d, _ := json.Marshal(x)
		return jsonValue{str: &x, dump: string(d)}, nil
	case json.Number:
		return jsonValue{dump: x.String()}, nil
	case bool:
		if x {
			return jsonValue{dump: "true"}, nil
		}
		return jsonValue{dump: "false"}, nil
	case nil:
		return jsonValue{dump: "null"}, nil
	}
	return jsonValue{}, errors.New("unexpected JSON token")
}
