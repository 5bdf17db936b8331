// Package toolcall reads an assistant message out of the text a chat model generates, as
// llama-server does (common_chat_peg_parse and task_result_state in llama.cpp): the template's
// PEG parser (model/chat/peg, built by model/chat/autoparse) splits the output into content,
// reasoning_content and tool calls, and successive parses of a growing output become streaming
// deltas. Without a parser (llama.cpp's built-in, non-Jinja formats) the output is content.
package toolcall

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

// ReasoningFormat says what happens to reasoning blocks (llama-server's --reasoning-format).
type ReasoningFormat int

// Reasoning formats. Auto behaves as Deepseek.
const (
	ReasoningAuto           ReasoningFormat = iota
	ReasoningNone                           // leave reasoning in the content
	ReasoningDeepseek                       // move it to reasoning_content
	ReasoningDeepseekLegacy                 // as Deepseek, but keep it in the content (tags included) while streaming
)

// ParseReasoningFormat reads a reasoning format name as llama.cpp spells it.
func ParseReasoningFormat(name string) (ReasoningFormat, error) {
	switch name {
	case "auto":
		return ReasoningAuto, nil
	case "none":
		return ReasoningNone, nil
	case "deepseek":
		return ReasoningDeepseek, nil
	case "deepseek-legacy":
		return ReasoningDeepseekLegacy, nil
	}
	return 0, fmt.Errorf("unknown reasoning format %q (want none, deepseek, deepseek-legacy or auto)", name)
}

// String is the name llama-server reports; auto extracts as deepseek does and is reported so.
func (r ReasoningFormat) String() string {
	switch r {
	case ReasoningNone:
		return "none"
	case ReasoningDeepseekLegacy:
		return "deepseek-legacy"
	}
	return "deepseek"
}

// Syntax is everything Parse needs to know about the output (llama.cpp's
// common_chat_parser_params).
type Syntax struct {
	// Parser reads the output after GenerationPrompt, the text add_generation_prompt ended the
	// prompt with, which the output continues. Nil: the output is all content.
	Parser           *peg.P
	GenerationPrompt string
	// Reasoning is what becomes of reasoning (--reasoning-format); the parser was built for it.
	Reasoning ReasoningFormat
	// ReasoningInContent keeps reasoning, between ReasoningTags, in the content
	// (deepseek-legacy while streaming).
	ReasoningInContent bool
	ReasoningTags      [2]string
}
