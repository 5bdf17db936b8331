package toolcall

import "strings"

// Delta is one change to the message being streamed: a piece of reasoning, a piece of content,
// or a change to tool call ToolIndex. The first delta of a tool call carries its ID and Name
// (and no arguments); later ones carry pieces of its arguments text.
type Delta struct {
	Reasoning string // a piece of reasoning text to append
	Content   string // a piece of content text to append
	// ToolIndex is the tool call the delta is about, -1 for reasoning and content deltas.
	ToolIndex int
	ToolID    string // set only on a call's first delta
	ToolName  string // set only on a call's first delta
	ToolArgs  string // a piece of the call's arguments JSON text to append
}

// IsTool reports whether d is about a tool call.
func (d Delta) IsTool() bool { return d.ToolIndex >= 0 }

// Stream parses text as it is generated and reports what changed, as llama-server's
// task_result_state::update_chat_msg: the whole text is parsed again at each step and compared
// with the previous parse. A tool call is announced (id and name) once its arguments start (or
// a later call starts, or the text ends), then its arguments follow in pieces. Unlike
// llama-server, which announces pending calls before any other delta, text written before a
// call goes out before the call is announced.
type Stream struct {
	syn   Syntax
	newID func() string
	text  strings.Builder
	msg   Message
	ids   []string // tool call ids by index, fixed when a call is first seen
	sent  []bool   // whether a tool call's id and name went out
}

// NewStream starts a stream; newID makes ids for tool calls the model gives none.
func NewStream(syn Syntax, newID func() string) *Stream {
	return &Stream{syn: syn, newID: newID}
}

// Add appends a piece of generated text and returns the deltas it caused.
func (s *Stream) Add(piece string) []Delta {
	s.text.WriteString(piece)
	return s.update(true)
}

// Finish parses the complete text and returns the final message and the last deltas.
func (s *Stream) Finish() (Message, []Delta) {
	d := s.update(false)
	return s.msg, d
}

// Message is the message as parsed so far.
func (s *Stream) Message() Message { return s.msg }

func (s *Stream) update(partial bool) []Delta {
	next := Parse(s.text.String(), partial, s.syn)
	if next.empty() {
		return nil
	}
	for i := range next.Calls {
		if i >= len(s.ids) {
			id := next.Calls[i].ID
			if id == "" {
				id = s.newID()
			}
			s.ids = append(s.ids, id)
			s.sent = append(s.sent, false)
		}
		next.Calls[i].ID = s.ids[i]
	}
	all := diff(s.msg, next)
	s.msg = next

	var out []Delta
	header := func(i int) {
		c := next.Calls[i]
		out = append(out, Delta{ToolIndex: i, ToolID: c.ID, ToolName: c.Name})
		s.sent[i] = true
	}
	for _, d := range all {
		if !d.IsTool() {
			out = append(out, d)
			continue
		}
		// Calls before this one are announced now even if their arguments never came.
		for i := 0; i < d.ToolIndex; i++ {
			if !s.sent[i] && next.Calls[i].Name != "" {
				header(i)
			}
		}
		i := d.ToolIndex
		if !s.sent[i] && (d.ToolArgs != "" || !partial) {
			header(i)
		}
		if s.sent[i] && d.ToolArgs != "" {
			out = append(out, Delta{ToolIndex: i, ToolArgs: d.ToolArgs})
		}
	}
	if !partial {
		for i, c := range next.Calls {
			if !s.sent[i] && c.Name != "" {
				header(i)
			}
		}
	}
	return out
}

// diff lists what changed from prev to next (common_chat_msg_diff::compute_diffs). Text that
// does not extend what was there before cannot be streamed and is left out.
func diff(prev, next Message) []Delta {
	var out []Delta
	if d := extension(prev.Reasoning, next.Reasoning); d != "" {
		out = append(out, Delta{Reasoning: d, ToolIndex: -1})
	}
	if d := extension(prev.Content, next.Content); d != "" {
		out = append(out, Delta{Content: d, ToolIndex: -1})
	}
	if n := min(len(prev.Calls), len(next.Calls)); n > 0 {
		i := n - 1
		if d := extension(prev.Calls[i].Arguments, next.Calls[i].Arguments); d != "" {
			out = append(out, Delta{ToolIndex: i, ToolArgs: d})
		}
	}
	for i := len(prev.Calls); i < len(next.Calls); i++ {
		c := next.Calls[i]
		out = append(out, Delta{ToolIndex: i, ToolID: c.ID, ToolName: c.Name, ToolArgs: c.Arguments})
	}
	return out
}

// extension is what next adds to prev, or "" when next does not extend it.
func extension(prev, next string) string {
	if len(next) <= len(prev) || !strings.HasPrefix(next, prev) {
		return ""
	}
	return next[len(prev):]
}
