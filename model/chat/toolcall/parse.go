package toolcall

import (
	"errors"
	"strings"
)

// Call is one parsed tool call.
type Call struct {
	// ID is the id the model wrote, or (after a Stream assigns one) a generated one.
	ID   string
	Name string // the function called
	// Arguments is the arguments' JSON text, re-serialised compactly; while the call is still
	// being written, a prefix of its final value.
	Arguments string
}

// Message is the assistant message parsed from generated text.
type Message struct {
	Content   string // the text outside reasoning and tool calls
	Reasoning string // the <think> text without its tags, unless Syntax keeps it in Content
	Calls     []Call // tool calls in the order written
}

// empty reports whether m holds nothing.
func (m Message) empty() bool { return m.Content == "" && m.Reasoning == "" && len(m.Calls) == 0 }

// errIncomplete stops a parse at text that is not finished yet (llama.cpp's
// common_chat_msg_partial_exception). On complete text it means the output did not have the
// format's shape, and the whole text is read again as plain content.
var errIncomplete = errors.New("toolcall: incomplete output")

// Parse reads generated text in the given syntax. With partial set the text is still growing:
// whatever could still turn out to be part of a tool call (or of a tag) is held back, and the
// last tool call may be unfinished.
func Parse(text string, partial bool, syn Syntax) Message {
	if syn.Format == PEGNative && syn.Parser != nil {
		return parsePEG(text, partial, syn)
	}
	p := &parser{in: text, partial: partial, syn: syn}
	if err := p.run(); err != nil && !partial {
		p = &parser{in: text, syn: syn}
		p.contentOnly()
	}
	return p.msg
}

// parser walks the text once, collecting the message.
type parser struct {
	in      string
	pos     int
	partial bool
	syn     Syntax
	msg     Message
}

func (p *parser) run() error {
	switch p.syn.Format {
	case Generic:
		return p.generic()
	case Hermes2Pro:
		return p.hermes()
	case Llama3, Llama3Builtin:
		return p.llama3()
	case MistralNemo:
		return p.mistral()
	}
	p.contentOnly()
	return nil
}

func (p *parser) rest() string {
	r := p.in[p.pos:]
	p.pos = len(p.in)
	return r
}

func (p *parser) consumeSpaces() {
	for p.pos < len(p.in) && isRegexSpace(p.in[p.pos]) {
		p.pos++
	}
}

// consumeLiteral consumes s at the current position; anything else means the text is not (yet)
// what the format needs.
func (p *parser) consumeLiteral(s string) error {
	if !strings.HasPrefix(p.in[p.pos:], s) {
		return errIncomplete
	}
	p.pos += len(s)
	return nil
}

// find searches for pt from the current position. The text before a match becomes content and
// the position moves past the match. A match cut short by the end of growing text holds that
// text back (errIncomplete); at the end of complete text it is no match.
func (p *parser) find(pt pattern) (found, bool, error) {
	f := pt.search(p.in, p.pos)
	switch {
	case f.outcome == noMatch, f.outcome == partialMatch && !p.partial:
		return f, false, nil
	}
	p.msg.Content += p.in[p.pos:f.start]
	p.pos = f.end
	if f.outcome == partialMatch {
		return f, false, errIncomplete
	}
	return f, true, nil
}

// consumeAt matches pt at exactly the current position.
func (p *parser) consumeAt(pt pattern) (found, bool, error) {
	f := pt.matchAt(p.in, p.pos)
	switch f.outcome {
	case fullMatch:
		p.pos = f.end
		return f, true, nil
	case partialMatch:
		if p.partial {
			return f, false, errIncomplete
		}
	}
	return f, false, nil
}

// json reads a JSON value at the current position; invalid JSON is errIncomplete.
func (p *parser) json() (*jvalue, bool, error) {
	v, end, r := parseJSON(p.in, p.pos)
	if r == jsonInvalid {
		return nil, false, errIncomplete
	}
	p.pos = end
	if r == jsonIncomplete && !p.partial {
		return nil, false, errIncomplete
	}
	return v, r == jsonComplete, nil
}

// addCall adds a tool call; a call without a name cannot be added yet.
func (p *parser) addCall(name, id, args string) bool {
	if name == "" {
		return false
	}
	p.msg.Calls = append(p.msg.Calls, Call{ID: id, Name: name, Arguments: args})
	return true
}

// addCallObject adds the call described by an object {"name", "arguments", "id"}: arguments
// given as an object are re-serialised, as a string taken as written.
func (p *parser) addCallObject(v *jvalue, argsKey string) bool {
	name, ok := v.field("name").completeString()
	if !ok {
		return false
	}
	id, _ := v.field("id").completeString()
	return p.addCall(name, id, arguments(v.field(argsKey)))
}

// arguments is the arguments text of a (possibly unfinished) arguments value.
func arguments(v *jvalue) string {
	if v == nil {
		return ""
	}
	if v.kind == jString {
		return v.text
	}
	return dump(v)
}

// contentOnly is llama.cpp's content-only parse: reasoning, then everything as content.
func (p *parser) contentOnly() {
	p.reasoning("<think>", "</think>")
	p.msg.Content += p.rest()
}

// generic parses llama.cpp's generic JSON answer: {"tool_calls": [...]}, {"tool_call": {...}}
// or {"response": ...}.
func (p *parser) generic() error {
	if !p.syn.ParseToolCalls {
		p.msg.Content += p.rest()
		return nil
	}
	v, complete, err := p.json()
	if err != nil {
		return err
	}
	if v == nil || v.kind != jObject {
		return errIncomplete
	}
	switch {
	case v.has("tool_calls"):
		calls := v.field("tool_calls")
		if calls == nil || calls.kind != jArray {
			return errIncomplete
		}
		for _, c := range calls.elems {
			if c == nil || c.kind != jObject || !p.addCallObject(c, "arguments") {
				return errIncomplete
			}
		}
	case v.has("tool_call"):
		c := v.field("tool_call")
		if c == nil || c.kind != jObject || !p.addCallObject(c, "arguments") {
			return errIncomplete
		}
	case v.has("response"):
		r := v.field("response")
		switch {
		case r != nil && r.kind == jString:
			p.msg.Content += r.text
		case r != nil && r.complete:
			p.msg.Content += pretty(r)
		default:
			return errIncomplete
		}
	default:
		return errIncomplete
	}
	if !complete {
		return errIncomplete
	}
	p.consumeSpaces()
	if p.pos != len(p.in) {
		return errIncomplete // more than one JSON answer: not the generic shape
	}
	return nil
}

// hermes parses Hermes 2 Pro / Qwen output: reasoning, then content with <tool_call>{"name",
// "arguments"}</tool_call> calls (or the other wrappings such models write) anywhere in it.
func (p *parser) hermes() error {
	p.reasoning("<think>", "</think>")
	if !p.syn.ParseToolCalls {
		p.msg.Content += p.rest()
		return nil
	}
	for {
		f, ok, err := p.find(hermesOpen)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		blockEnd := ""
		if f.group(1).set() {
			blockEnd = "```"
		}
		if g := f.group(3); g.set() {
			p.pos = g.start
			closeTag := ""
			if t := f.group(2); t.set() {
				closeTag = "</" + p.in[t.start+1:t.end]
			}
			v, complete, err := p.json()
			if err != nil {
				return err
			}
			if v == nil || v.kind != jObject || !p.addCallObject(v, "arguments") || !complete {
				return errIncomplete
			}
			if err := p.closeCall(closeTag, blockEnd); err != nil {
				return err
			}
			continue
		}
		g := f.group(4)
		if !g.set() {
			g = f.group(5)
		}
		name := p.in[g.start:g.end]
		v, end, r := parseJSON(p.in, p.pos)
		if r == jsonInvalid || (r == jsonIncomplete && !p.partial) {
			continue // not a JSON body: llama.cpp moves on
		}
		p.pos = end
		if !p.addCall(name, "", arguments(v)) || r != jsonComplete {
			return errIncomplete
		}
		if err := p.closeCall("</function>", blockEnd); err != nil {
			return err
		}
	}
	p.msg.Content += p.rest()
	return nil
}

// closeCall consumes a tool call's closing tag and code-block end, with the spaces around them.
func (p *parser) closeCall(closeTag, blockEnd string) error {
	p.consumeSpaces()
	if err := p.consumeLiteral(closeTag); err != nil {
		return err
	}
	p.consumeSpaces()
	if blockEnd != "" {
		if err := p.consumeLiteral(blockEnd); err != nil {
			return err
		}
		p.consumeSpaces()
	}
	return nil
}

// llama3 parses Llama 3.x output: a {"name": ..., "parameters": {...}} call at the very start
// (content may follow it), or with built-in tools a <|python_tag|>NAME.call(ARG=JSON, ...) call.
func (p *parser) llama3() error {
	p.reasoning("<think>", "</think>")
	if !p.syn.ParseToolCalls {
		p.msg.Content += p.rest()
		return nil
	}
	if p.syn.Format == Llama3Builtin {
		_, ok, err := p.find(pythonTag)
		if err != nil {
			return err
		}
		if ok {
			return p.builtinCall()
		}
	}
	start := p.pos
	f, ok, err := p.consumeAt(llama3Call)
	if err != nil {
		return err
	}
	if ok {
		name := p.in[f.group(1).start:f.group(1).end]
		v, complete, err := p.json()
		if err != nil {
			return err
		}
		if !p.addCall(name, "", arguments(v)) || !complete {
			return errIncomplete
		}
		if p.pos >= len(p.in) || p.in[p.pos] != '}' {
			return errIncomplete
		}
		p.pos++
		p.consumeSpaces()
	} else {
		p.pos = start
	}
	p.consumeSpaces()
	p.msg.Content += p.rest()
	return nil
}

// builtinCall parses NAME.call(ARG=JSON, ...) after <|python_tag|>; the call only counts once
// its closing parenthesis is there.
func (p *parser) builtinCall() error {
	f, ok, err := p.consumeAt(builtinCall)
	if err != nil {
		return err
	}
	if !ok {
		return errIncomplete
	}
	name := p.in[f.group(1).start:f.group(1).end]
	args := &jvalue{kind: jObject, complete: true}
	for {
		a, ok, err := p.consumeAt(builtinArg)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		v, complete, err := p.json()
		if err != nil {
			return err
		}
		if !complete {
			return errIncomplete
		}
		key := p.in[a.group(1).start:a.group(1).end]
		args.members = append(args.members, jmember{key: key, keyDone: true, colon: true, value: v})
		p.consumeSpaces()
		if p.pos >= len(p.in) || p.in[p.pos] != ',' {
			break
		}
		p.pos++
	}
	if err := p.consumeLiteral(")"); err != nil {
		return err
	}
	p.consumeSpaces()
	if !p.addCall(name, "", dump(args)) {
		return errIncomplete
	}
	p.msg.Content += p.rest()
	return nil
}

// mistral parses Mistral Nemo output: content, then [TOOL_CALLS] and a JSON array of
// {"name", "arguments", "id"} calls.
func (p *parser) mistral() error {
	if !p.syn.ParseToolCalls {
		p.msg.Content += p.rest()
		return nil
	}
	_, ok, err := p.find(mistralPrefix)
	if err != nil {
		return err
	}
	if !ok {
		p.msg.Content += p.rest()
		return nil
	}
	v, complete, err := p.json()
	if err != nil {
		return err
	}
	if v == nil || v.kind != jArray {
		return errIncomplete
	}
	for _, c := range v.elems {
		if c == nil || c.kind != jObject || !p.addCallObject(c, "arguments") {
			return errIncomplete
		}
	}
	if !complete {
		return errIncomplete
	}
	p.msg.Content += p.rest()
	return nil
}
