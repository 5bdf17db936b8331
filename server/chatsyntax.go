package server

import (
	"encoding/json"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/model/chat/autoparse"
	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
)

// generationPrompt is what add_generation_prompt added to the prompt text (llama.cpp's
// common_chat_template_generation_prompt): the output continues it, so the parser reads it
// first. It is "" when the conversation was rendered without one.
func (l *loaded) generationPrompt(in chat.Input, text string) string {
	if !in.AddGenerationPrompt {
		return ""
	}
	in.AddGenerationPrompt = false
	base, err := l.renderChat(in)
	if err != nil {
		return ""
	}
	n := 0
	for n < len(base) && n < len(text) && base[n] == text[n] {
		n++
	}
	return text[n:]
}

// planOutput sets how the output of a Jinja template is read and constrained, as llama.cpp's
// peg_generator does with the template's analysis: the PEG parser of its reasoning, content and
// tool-call syntax; with tools that may be called, a grammar that starts at the first tool
// marker (lazy); with tools that must be, one over the whole output.
func (l *loaded) planOutput(pl *chatPlan, tools []autoparse.Tool, choice toolChoice, parallel bool, schema []byte, field, gp string) error {
	p := autoparse.Params{
		Choice:           autoparse.ChoiceAuto,
		Parallel:         parallel,
		ExtractReasoning: pl.syntax.Reasoning != toolcall.ReasoningNone,
		ResponseSchema:   json.RawMessage(schema),
		GenerationPrompt: gp,
		Tools:            tools,
	}
	switch choice {
	case choiceNone:
		p.Choice = autoparse.ChoiceNone
	case choiceRequired:
		p.Choice = autoparse.ChoiceRequired
	}
	out := l.format.Build(p)
	pl.syntax.Parser = out.Parser
	pl.syntax.GenerationPrompt = gp
	pl.syntax.ReasoningTags[0], pl.syntax.ReasoningTags[1] = l.format.ReasoningTags()
	if !out.Grammar || schema != nil {
		return nil // a response format's grammar is the schema's own
	}
	root := out.Parser
	if !out.Lazy {
		// The grammar starts where the output does: without the generation prompt, which the
		// engine does not feed it.
		p.GenerationPrompt = ""
		root = l.format.Build(p).Parser
	}
	src, err := peg.Grammar(root, out.Lazy, func(s json.RawMessage) (string, error) { return grammar.FromJSONSchema(s) })
	if err != nil {
		return invalidRequest("'tools': %v", err)
	}
	if pl.params.Grammar, err = grammar.Parse(src); err != nil {
		return invalidRequest("'tools': %v", err)
	}
	for _, t := range out.Triggers {
		pl.params.GrammarTriggers = append(pl.params.GrammarTriggers, engine.GrammarTrigger{Word: t})
	}
	return nil
}
