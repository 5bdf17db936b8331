package toolcall

import "strings"

// reasoning reads <think>...</think> blocks at the current position into the message's
// reasoning (or, with ReasoningInContent, into its content with the tags), as llama.cpp's
// try_parse_reasoning: leading spaces before an opening tag stay content; with
// ThinkingForcedOpen the text starts inside a block; a tag cut off by the end of the text is
// held back; reasoning is trimmed of surrounding spaces. It reports whether it consumed
// anything.
func (p *parser) reasoning(open, close string) bool {
	if p.syn.Reasoning == ReasoningNone {
		return false
	}
	in := p.in
	add := func(text string, closed bool) {
		text = trimSpace(text)
		if text == "" {
			return
		}
		if p.syn.ReasoningInContent {
			p.msg.Content += open + text
			if closed {
				p.msg.Content += close
			}
			return
		}
		p.msg.Reasoning += text
	}

	wsEnd := p.pos
	for wsEnd < len(in) && isRegexSpace(in[wsEnd]) {
		wsEnd++
	}
	if wsEnd >= len(in) {
		if !p.syn.ThinkingForcedOpen {
			return false
		}
		add(in[p.pos:], !p.partial)
		p.pos = len(in)
		return true
	}
	cursor := wsEnd
	n := min(len(open), len(in)-cursor)
	hasOpen := in[cursor:cursor+n] == open[:n]
	switch {
	case hasOpen && n < len(open):
		p.pos = len(in) // the text ends in an unfinished opening tag
		return true
	case hasOpen:
		p.msg.Content += in[p.pos:wsEnd]
		cursor += len(open)
	case !p.syn.ThinkingForcedOpen:
		return false
	}
	for {
		if cursor >= len(in) {
			p.pos = len(in)
			return true
		}
		end := strings.Index(in[cursor:], close)
		if end < 0 {
			stop := len(in)
			if off := partialStop(in[cursor:], close); off >= 0 {
				stop = cursor + off
			}
			if stop > cursor {
				add(in[cursor:stop], stop == len(in) && !p.partial)
			}
			p.pos = len(in)
			return true
		}
		end += cursor
		add(in[cursor:end], true)
		cursor = end + len(close)
		for cursor < len(in) && isRegexSpace(in[cursor]) {
			cursor++
		}
		if cursor == len(in) {
			p.pos = cursor
			return true
		}
		n := min(len(open), len(in)-cursor)
		if in[cursor:cursor+n] != open[:n] {
			p.pos = cursor
			return true
		}
		if n < len(open) {
			p.pos = len(in)
			return true
		}
		cursor += len(open)
	}
}

// partialStop finds where text ends with the longest proper beginning of stop, or -1
// (llama.cpp's string_find_partial_stop).
func partialStop(text, stop string) int {
	for n := min(len(stop)-1, len(text)); n > 0; n-- {
		if strings.HasSuffix(text, stop[:n]) {
			return len(text) - n
		}
	}
	return -1
}

// trimSpace trims ASCII whitespace as llama.cpp's string_strip.
func trimSpace(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r < 0x80 && isRegexSpace(byte(r)) })
}
