package server

import (
	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/gen"
)

// jsonObject is a JSON object whose fields keep their order, for rewriting requests the way
// llama-server rewrites its ordered JSON.
type jsonObject struct {
	keys []string
	vals map[string]jx.Raw
	// lists are arrays that appendItems grows, encoded only when the object is: a
	// conversation of many assistant items joins them into one message, and re-encoding its
	// array for each would cost time quadratic in the items (seconds for a 400 KB request).
	lists map[string][]jx.Raw
}

func newObject() *jsonObject { return &jsonObject{vals: map[string]jx.Raw{}} }

// parseObject reads an object; ok is false for any other JSON value.
func parseObject(raw jx.Raw) (o *jsonObject, ok bool) {
	if raw.Type() != jx.Object {
		return nil, false
	}
	o = newObject()
	err := jx.DecodeBytes(raw).ObjBytes(func(d *jx.Decoder, key []byte) error {
		v, err := d.Raw()
		o.set(string(key), append(jx.Raw(nil), v...))
		return err
	})
	return o, err == nil
}

func (o *jsonObject) get(key string) (jx.Raw, bool) {
	if l, ok := o.lists[key]; ok {
		return rawArrayOf(l), true
	}
	v, ok := o.vals[key]
	return v, ok
}

// str is a field's value when it is a string.
func (o *jsonObject) str(key string) (string, bool) {
	v, ok := o.get(key)
	if !ok || v.Type() != jx.String {
		return "", false
	}
	s, err := jx.DecodeBytes(v).Str()
	return s, err == nil
}

// is reports whether a field holds the string want.
func (o *jsonObject) is(key, want string) bool {
	s, ok := o.str(key)
	return ok && s == want
}

// array is a field's elements when it is an array.
func (o *jsonObject) array(key string) ([]jx.Raw, bool) {
	if l, ok := o.lists[key]; ok {
		return l, true
	}
	v, ok := o.vals[key]
	if !ok {
		return nil, false
	}
	return rawArray(v)
}

func (o *jsonObject) set(key string, v jx.Raw) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
	delete(o.lists, key)
}

// appendItems adds items to the array field key, which it starts when there is none (or
// the field is not an array).
func (o *jsonObject) appendItems(key string, items ...jx.Raw) {
	l, ok := o.lists[key]
	if !ok {
		l, _ = o.array(key)
		o.set(key, nil)
		if o.lists == nil {
			o.lists = map[string][]jx.Raw{}
		}
	}
	o.lists[key] = append(l, items...)
}

func (o *jsonObject) del(key string) {
	if _, ok := o.vals[key]; !ok {
		return
	}
	delete(o.vals, key)
	delete(o.lists, key)
	for i, k := range o.keys {
		if k == key {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			break
		}
	}
}

func (o *jsonObject) encode(e *jx.Encoder) {
	e.ObjStart()
	for _, k := range o.keys {
		e.FieldStart(k)
		if l, ok := o.lists[k]; ok {
			e.ArrStart()
			for _, it := range l {
				e.Raw(it)
			}
			e.ArrEnd()
			continue
		}
		e.Raw(o.vals[k])
	}
	e.ObjEnd()
}

func (o *jsonObject) raw() jx.Raw {
	e := &jx.Encoder{}
	o.encode(e)
	return e.Bytes()
}

// rawArray splits an array into its elements; ok is false for any other JSON value.
func rawArray(v jx.Raw) ([]jx.Raw, bool) {
	if v.Type() != jx.Array {
		return nil, false
	}
	var out []jx.Raw
	err := jx.DecodeBytes(v).Arr(func(d *jx.Decoder) error {
		r, err := d.Raw()
		out = append(out, append(jx.Raw(nil), r...))
		return err
	})
	return out, err == nil
}

func rawString(s string) jx.Raw {
	e := &jx.Encoder{}
	e.Str(s)
	return e.Bytes()
}

func rawArrayOf(items []jx.Raw) jx.Raw {
	e := &jx.Encoder{}
	e.ArrStart()
	for _, it := range items {
		e.Raw(it)
	}
	e.ArrEnd()
	return e.Bytes()
}

// textPart is a chat content part {"text": text, "type": kind}; text is raw JSON.
func textPart(text jx.Raw, kind string) jx.Raw {
	p := newObject()
	p.set("text", text)
	p.set("type", rawString(kind))
	return p.raw()
}

// responsesToChat converts a Responses API request to the chat completion request it stands
// for, as llama-server's convert_responses_to_chatcmpl does, with its error messages (400s).
// The request's other fields stay, as chat completion fields.
func responsesToChat(req *gen.ResponsesRequest) (jx.Raw, error) {
	e := &jx.Encoder{}
	req.Encode(e)
	body, _ := parseObject(e.Bytes())
	if id, _ := body.str("previous_response_id"); id != "" {
		return nil, invalidRequest("llama.cpp does not support 'previous_response_id'.")
	}
	input, _ := body.get("input")
	body.del("input")
	var msgs []*jsonObject

	if _, ok := body.get("instructions"); ok {
		instructions, _ := body.str("instructions")
		sys := newObject()
		sys.set("role", rawString("system"))
		sys.set("content", rawString(instructions))
		msgs = append(msgs, sys)
		body.del("instructions")
	}

	switch input.Type() {
	case jx.String:
		user := newObject()
		user.set("role", rawString("user"))
		user.set("content", input)
		msgs = append(msgs, user)
	case jx.Array:
		items, _ := rawArray(input)
		for _, raw := range items {
			var err error
			if msgs, err = addInputItem(msgs, raw); err != nil {
				return nil, err
			}
		}
	default:
		return nil, invalidRequest("'input' must be a string or array of objects")
	}
	msgRaws := make([]jx.Raw, len(msgs))
	for i, m := range msgs {
		msgRaws[i] = m.raw()
	}
	body.set("messages", rawArrayOf(msgRaws))

	if tools, ok := body.get("tools"); ok && tools.Type() != jx.Null {
		list, ok := rawArray(tools)
		if !ok {
			return nil, invalidRequest("'tools' must be an array of objects")
		}
		var chatTools []jx.Raw
		for _, t := range list {
			tool, ok := parseObject(t)
			if !ok || !tool.is("type", "function") {
				continue // no chat equivalent: llama-server warns and skips it
			}
			tool.del("type")
			if _, ok := tool.get("strict"); !ok {
				tool.set("strict", jx.Raw("true"))
			}
			ct := newObject()
			ct.set("type", rawString("function"))
			ct.set("function", tool.raw())
			chatTools = append(chatTools, ct.raw())
		}
		body.del("tools")
		if len(chatTools) > 0 {
			body.set("tools", rawArrayOf(chatTools))
		}
	}
	if v, ok := body.get("max_output_tokens"); ok {
		body.del("max_output_tokens")
		body.set("max_tokens", v)
	}
	if v, ok := body.get("reasoning"); ok {
		if r, ok := parseObject(v); ok {
			if effort, ok := r.get("effort"); ok {
				body.set("reasoning_effort", effort)
			}
		}
		body.del("reasoning")
	}
	return body.raw(), nil
}

// addInputItem converts one input item and adds it to the chat messages: an assistant item
// (message, function call or reasoning) right after an assistant message joins that message.
func addInputItem(msgs []*jsonObject, raw jx.Raw) ([]*jsonObject, error) {
	item, ok := parseObject(raw)
	if !ok {
		return nil, invalidRequest("Cannot determine type of 'item'")
	}
	var prev *jsonObject
	if n := len(msgs); n > 0 && msgs[n-1].is("role", "assistant") {
		prev = msgs[n-1]
	}
	if c, ok := item.get("content"); ok && c.Type() == jx.String {
		// A message's text content stands for one input_text part.
		item.set("content", rawArrayOf([]jx.Raw{textPart(c, "input_text")}))
	}
	content, hasParts := item.array("content")
	role, _ := item.str("role")
	callID, hasCallID := item.str("call_id")
	_, hasSummary := item.array("summary")

	switch {
	case hasParts && (role == "user" || role == "system" || role == "developer"):
		parts := make([]jx.Raw, 0, len(content))
		for _, p := range content {
			part, _ := parseObject(p)
			if part == nil {
				part = newObject()
			}
			kind, _ := part.str("type")
			switch kind {
			case "input_text":
				text, ok := part.get("text")
				if !ok {
					return nil, invalidRequest("'Input text' requires 'text'")
				}
				parts = append(parts, textPart(text, "text"))
			case "input_image":
				url, ok := part.get("image_url")
				if !ok {
					return nil, invalidRequest("'image_url' is required")
				}
				image := newObject()
				image.set("url", url)
				ip := newObject()
				ip.set("image_url", image.raw())
				ip.set("type", rawString("image_url"))
				parts = append(parts, ip.raw())
			case "input_file":
				return nil, invalidRequest("'input_file' is not supported by llamacpp at this moment")
			default:
				return nil, invalidRequest("'type' must be one of 'input_text', 'input_image', or 'input_file'")
			}
		}
		item.del("type")
		item.del("status")
		item.set("content", rawArrayOf(parts))
		return append(msgs, item), nil

	case role == "assistant" && item.is("type", "message"):
		parts := []jx.Raw{}
		for _, p := range content {
			part, _ := parseObject(p)
			if part == nil {
				part = newObject()
			}
			switch kind, _ := part.str("type"); kind {
			case "output_text", "input_text":
				if _, ok := part.str("text"); !ok {
					return nil, invalidRequest("'Output text' requires 'text'")
				}
				text, _ := part.get("text")
				parts = append(parts, textPart(text, "text"))
			case "refusal":
				if _, ok := part.str("refusal"); !ok {
					return nil, invalidRequest("'Refusal' requires 'refusal'")
				}
				refusal, _ := part.get("refusal")
				rp := newObject()
				rp.set("refusal", refusal)
				rp.set("type", rawString("refusal"))
				parts = append(parts, rp.raw())
			default:
				return nil, invalidRequest("'type' must be one of 'output_text' or 'refusal'")
			}
		}
		if prev != nil {
			prev.appendItems("content", parts...)
			return msgs, nil
		}
		item.del("status")
		item.del("type")
		item.set("content", rawArrayOf(parts))
		return append(msgs, item), nil

	case item.is("type", "function_call") && hasCallID:
		args, okArgs := item.str("arguments")
		name, okName := item.str("name")
		if !okArgs || !okName {
			return nil, invalidRequest("Cannot determine type of 'item'")
		}
		fn := newObject()
		fn.set("arguments", rawString(args))
		fn.set("name", rawString(name))
		call := newObject()
		call.set("function", fn.raw())
		call.set("id", rawString(callID))
		call.set("type", rawString("function"))
		if prev != nil {
			prev.appendItems("tool_calls", call.raw())
			return msgs, nil
		}
		m := newObject()
		m.set("role", rawString("assistant"))
		m.set("tool_calls", rawArrayOf([]jx.Raw{call.raw()}))
		return append(msgs, m), nil

	case item.is("type", "function_call_output") && hasCallID:
		out, _ := item.get("output")
		m := newObject()
		switch out.Type() {
		case jx.String:
			m.set("content", out)
		case jx.Array:
			list, _ := rawArray(out)
			parts := make([]jx.Raw, 0, len(list))
			for _, p := range list {
				part, ok := parseObject(p)
				if !ok || !part.is("type", "input_text") {
					return nil, invalidRequest("Output of tool call should be 'Input text'")
				}
				part.set("type", rawString("text"))
				parts = append(parts, part.raw())
			}
			m.set("content", rawArrayOf(parts))
		default:
			return nil, invalidRequest("Cannot determine type of 'item'")
		}
		m.set("role", rawString("tool"))
		m.set("tool_call_id", rawString(callID))
		return append(msgs, m), nil

	case hasSummary && item.is("type", "reasoning"):
		if !hasParts {
			return nil, invalidRequest("item['content'] is not an array")
		}
		if len(content) == 0 {
			return nil, invalidRequest("item['content'] is empty")
		}
		first, _ := parseObject(content[0])
		if first == nil {
			first = newObject()
		}
		if _, ok := first.str("text"); !ok {
			return nil, invalidRequest("item['content']['text'] is not a string")
		}
		text, _ := first.get("text")
		if prev != nil {
			prev.set("reasoning_content", text)
			return msgs, nil
		}
		m := newObject()
		m.set("role", rawString("assistant"))
		m.set("content", jx.Raw("[]"))
		m.set("reasoning_content", text)
		return append(msgs, m), nil
	}
	return nil, invalidRequest("Cannot determine type of 'item'")
}
