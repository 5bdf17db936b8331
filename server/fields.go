package server

import (
	"encoding/json"
	"strings"

	"github.com/go-faster/jx"
)

// rawJSON is an encoded JSON value that encodes as itself.
type rawJSON []byte

// Encode writes r as it is.
func (r rawJSON) Encode(e *jx.Encoder) { e.Raw(r) }

// jsonArray encodes as the array of its elements.
type jsonArray []encoder

// Encode writes the elements as a JSON array.
func (a jsonArray) Encode(e *jx.Encoder) {
	e.ArrStart()
	for _, v := range a {
		var one jx.Encoder
		v.Encode(&one)
		e.Raw(one.Bytes())
	}
	e.ArrEnd()
}

// pickFields applies a native request's response_fields to v, as llama-server's
// json_get_nested_values does: without paths v is kept whole; with them the answer is an
// object holding, for each path ("a/b" names field b of object a), the value found there under
// the path itself, in the order given. Paths that name nothing are left out.
func pickFields(v encoder, paths []string) encoder {
	if len(paths) == 0 {
		return v
	}
	var whole jx.Encoder
	v.Encode(&whole)
	var keys []string
	found := map[string]json.RawMessage{}
	for _, p := range paths {
		val, ok := lookupPath(whole.Bytes(), strings.Split(p, "/"))
		if !ok {
			continue
		}
		if _, seen := found[p]; !seen {
			keys = append(keys, p)
		}
		found[p] = val
	}
	var out jx.Encoder
	out.ObjStart()
	for _, k := range keys {
		out.FieldStart(k)
		out.Raw(found[k])
	}
	out.ObjEnd()
	return rawJSON(out.Bytes())
}

// lookupPath follows keys through nested objects of doc, reporting false where a key is missing
// or the value it is looked up in is not an object.
func lookupPath(doc []byte, keys []string) (json.RawMessage, bool) {
	cur := json.RawMessage(doc)
	for _, k := range keys {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err != nil {
			return nil, false
		}
		next, ok := obj[k] // a JSON null leaves obj nil: no keys
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}
