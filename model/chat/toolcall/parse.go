package toolcall

import "github.com/wgpu-llama/wgpu-llama/model/chat/peg"

// Call is one parsed tool call.
type Call struct {
	// ID is the id the model wrote, or (after a Stream assigns one) a generated one.
	ID   string
	Name string // the function called
	// Arguments is the arguments' JSON text as the model wrote it; while the call is still
	// being written, a prefix of its final value.
	Arguments string
}

// Message is the assistant message parsed from generated text.
type Message struct {
	Content   string // the text outside reasoning and tool calls
	Reasoning string // the reasoning text without its tags, unless Syntax keeps it in Content
	Calls     []Call // tool calls in the order written
}

// empty reports whether m holds nothing.
func (m Message) empty() bool { return m.Content == "" && m.Reasoning == "" && len(m.Calls) == 0 }

// Parse reads generated text in the given syntax. With partial set the text is still growing.
// The parse is lenient either way, as llama.cpp's common_chat_peg_parse: a marker cut off at
// the end is held back, and a call is read as far as it goes. Where llama.cpp throws on a
// complete output that does not parse, the text is read as plain content instead, so an answer
// is never lost; a partial one that does not parse yet shows nothing new.
func Parse(text string, partial bool, syn Syntax) Message {
	if syn.Parser == nil {
		return Message{Content: text}
	}
	in := syn.GenerationPrompt + text
	nodes, failed, _ := peg.Parse(syn.Parser, in)
	var m peg.Message
	var err error
	if !failed {
		m, err = peg.Map(in, nodes)
	}
	if failed || err != nil {
		if partial {
			return Message{}
		}
		return Message{Content: text}
	}
	msg := Message{Content: m.Content, Reasoning: m.Reasoning}
	if syn.ReasoningInContent && m.Reasoning != "" {
		// The closing tag follows once the reasoning is over: when an answer or a call follows.
		text := syn.ReasoningTags[0] + m.Reasoning
		if m.Content != "" || len(m.Calls) > 0 || !partial {
			text += syn.ReasoningTags[1]
		}
		msg.Content, msg.Reasoning = text+m.Content, ""
	}
	for _, c := range m.Calls {
		msg.Calls = append(msg.Calls, Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return msg
}
