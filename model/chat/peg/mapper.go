package peg

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Message is what a chat parse finds in a model's output.
type Message struct {
	Content   string
	Reasoning string
	Calls     []Call
}

// Call is one tool call; Arguments is JSON text, which is still growing (unclosed) while the
// call is being generated.
type Call struct {
	ID, Name, Arguments string
}

// mapper turns tagged spans into a message as llama.cpp's common_chat_peg_mapper does.
type mapper struct {
	in        string
	msg       Message
	current   *Call // the call being read, also in msg.Calls once it has a name
	pending   bool  // current is not yet in msg.Calls
	argCount  int
	quoteOpen bool
	buffer    string // arguments read before the name
	seen      map[string]bool
	err       error
}

// Map turns the spans of a parse of in into a message.
func Map(in string, nodes []*Node) (Message, error) {
	m := &mapper{in: in}
	for _, n := range nodes {
		m.visit(n)
	}
	if m.err != nil {
		return Message{}, m.err
	}
	// A call cut off by the end of the output is already in the message, its arguments as far
	// as they go: nothing is closed here, so a later parse only ever extends them.
	if strings.TrimLeft(m.msg.Reasoning, " \n\r\t") == "" {
		m.msg.Reasoning = ""
	}
	return m.msg, nil
}

// target is where argument text goes: the named call, or the buffer before the name.
func (m *mapper) target() *string {
	if m.current != nil && m.current.Name != "" {
		if m.pending {
			return &m.current.Arguments
		}
		return &m.msg.Calls[len(m.msg.Calls)-1].Arguments
	}
	return &m.buffer
}

func (m *mapper) closeQuote() {
	if m.quoteOpen {
		*m.target() += `"`
		m.quoteOpen = false
	}
}

func (m *mapper) visit(n *Node) {
	if m.err != nil {
		return
	}
	text := m.in[n.Start:n.End]
	switch {
	case strings.HasPrefix(n.Tag, TagEmit):
		*m.target() += strings.TrimPrefix(n.Tag, TagEmit)
	case strings.HasPrefix(n.Tag, TagEmitKey):
		m.comma()
		*m.target() += jsonString(strings.TrimPrefix(n.Tag, TagEmitKey)) + ":"
	}
	switch n.Tag {
	case TagReasoning:
		m.msg.Reasoning += text
	case TagContent:
		m.msg.Content += text
	case TagToolOpen:
		m.current, m.pending = &Call{}, true
		m.argCount, m.buffer, m.quoteOpen = 0, "", false
		m.seen = map[string]bool{}
	case TagToolID:
		id := strings.TrimRight(text, " \t\n\r")
		if len(id) >= 2 && id[0] == '"' && id[len(id)-1] == '"' {
			id = id[1 : len(id)-1]
		}
		if m.current != nil {
			if m.pending {
				m.current.ID = id
			} else {
				m.msg.Calls[len(m.msg.Calls)-1].ID = id
			}
		}
	case TagToolName:
		if m.current == nil {
			m.current, m.pending = &Call{}, true
		}
		m.current.Name = strings.TrimRight(text, " \t\n\r")
		switch {
		case m.buffer != "":
			m.current.Arguments, m.buffer = m.buffer, ""
		case m.current.Arguments == "":
			m.current.Arguments = "{"
		}
		// The call is pushed at once, so a streamed call appears with its name.
		m.msg.Calls = append(m.msg.Calls, *m.current)
		m.pending = false
	case TagToolArgs:
		t := strings.TrimRight(text, " \t\n\r")
		if strings.HasPrefix(t, "{") {
			*m.target() = t
		}
	case TagArgOpen:
		m.quoteOpen = false
	case TagArgName:
		name := strings.TrimRight(strings.TrimPrefix(text, " "), " \t\n\r")
		if m.seen == nil {
			m.seen = map[string]bool{}
		}
		if m.seen[name] {
			m.err = fmt.Errorf("Duplicate tool argument: %s", name)
			return
		}
		m.seen[name] = true
		t := m.target()
		if *t == "" {
			*t = "{"
		}
		if m.argCount > 0 {
			*t += ","
		}
		key := jsonString(name)
		*t += string(key) + ":"
		m.argCount++
	case TagArgString:
		t := m.target()
		if !m.quoteOpen {
			*t += `"`
			m.quoteOpen = true
		}
		if text != "" {
			esc := jsonString(text)
			*t += esc[1 : len(esc)-1]
		}
	case TagEmitItem:
		m.comma()
	case TagArgJSON:
		if text != "" {
			*m.target() += normalizeValue(text)
		}
	case TagArgClose:
		m.closeQuote()
	case TagToolClose:
		m.closeQuote()
		if m.current != nil {
			t := m.target()
			for d := openBraces(*t); d > 0; d-- {
				*t += "}"
			}
			if m.pending && m.current.Name != "" {
				m.msg.Calls = append(m.msg.Calls, *m.current)
			}
			m.current, m.pending = nil, false
		}
	}
	for _, k := range n.Kids {
		m.visit(k)
	}
}

// comma writes the comma due before a value of an object or array being built, unless it
// opens the container.
func (m *mapper) comma() {
	t := m.target()
	if s := strings.TrimRight(*t, " "); s != "" && !strings.HasSuffix(s, "{") && !strings.HasSuffix(s, "[") {
		*t += ","
	}
}

// jsonString writes s as a JSON string as llama.cpp's JSON library does: <, > and & as they
// are (encoding/json would escape them for HTML).
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// openBraces counts the braces of s not yet closed, outside strings.
func openBraces(s string) int {
	depth, inStr, esc := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{':
			depth++
		case c == '}':
			depth--
		}
	}
	return depth
}

// normalizeValue turns a Python literal (single-quoted strings, True, False, None) into JSON;
// JSON passes through. As llama.cpp's normalize_quotes_to_json it keeps escapes as written
// (a single-quoted string's \' becomes ', a " inside it gets escaped) and converts a word that
// is only the start of True, False or None to the start of its JSON word, so a value cut off
// while streaming only ever grows.
func normalizeValue(v string) string {
	t := strings.TrimSpace(v)
	if json.Valid([]byte(t)) {
		return t
	}
	var b strings.Builder
	inSingle, inDouble := false, false
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c == '\\' && i+1 < len(t):
			switch next := t[i+1]; {
			case inSingle && next == '\'':
				b.WriteByte('\'')
				i++
			case inSingle || inDouble:
				b.WriteByte(c)
				b.WriteByte(next)
				i++
			default:
				b.WriteByte(c)
			}
		case c == '"':
			if inSingle {
				b.WriteString(`\"`)
			} else {
				inDouble = !inDouble
				b.WriteByte(c)
			}
		case c == '\'':
			switch {
			case inDouble:
				b.WriteByte(c)
			default:
				inSingle = !inSingle
				b.WriteByte('"')
			}
		case !inSingle && !inDouble && (c == 'T' || c == 'F' || c == 'N') && (i == 0 || !isWordChar(t[i-1])):
			n := 0
			for i+n < len(t) && isWordChar(t[i+n]) {
				n++
			}
			word, converted := t[i:i+n], ""
			for _, l := range [][2]string{{"True", "true"}, {"False", "false"}, {"None", "null"}} {
				if n <= len(l[0]) && l[0][:n] == word {
					converted = l[1][:n]
					break
				}
			}
			if converted == "" {
				b.WriteByte(c)
				continue
			}
			b.WriteString(converted)
			i += n - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}
