package toolcall

import "github.com/wgpu-llama/wgpu-llama/model/chat/peg"

// parsePEG reads text with the template's PEG parser, after the generation prompt, as
// llama.cpp's common_chat_peg_parse does (always leniently: a marker cut off at the end is held
// back). Where llama.cpp throws on a complete output that does not parse, the text is read as
// plain content instead, so an answer is never lost; a partial one that does not parse yet
// shows nothing new.
func parsePEG(text string, partial bool, syn Syntax) Message {
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
