// Package toolcall reads tool calls and reasoning out of the text a chat model generates, as
// llama-server does (common/chat.cpp and common/chat-parser.cpp in llama.cpp): it picks the
// output format from the chat template, parses complete or still-growing output into content,
// reasoning_content and tool calls, turns successive parses into streaming deltas, and builds
// the grammars that force a tool call.
//
// Formats: Hermes 2 Pro / Qwen (<tool_call>{json}</tool_call>), Llama 3.x ({"name": ...,
// "parameters": ...} and <|python_tag|> built-in calls), Mistral Nemo ([TOOL_CALLS][...]) and
// llama.cpp's generic JSON ({"tool_call": ...} / {"tool_calls": [...]} / {"response": ...}).
// Reasoning is the text between <think> and </think>, or before </think> when the prompt
// already opened the block.
package toolcall

import (
	"fmt"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

// Format is how a model writes tool calls, named as llama.cpp's chat_format.
type Format int

// The formats implemented.
const (
	ContentOnly Format = iota
	Generic
	Hermes2Pro
	Llama3
	Llama3Builtin
	MistralNemo
	PEGNative // read by a PEG parser built for the template (Syntax.Parser)
)

// String is llama.cpp's name for the format (common_chat_format_name).
func (f Format) String() string {
	switch f {
	case Generic:
		return "Generic"
	case Hermes2Pro:
		return "Hermes 2 Pro"
	case Llama3:
		return "Llama 3.x"
	case Llama3Builtin:
		return "Llama 3.x with builtin tools"
	case MistralNemo:
		return "Mistral Nemo"
	case PEGNative:
		return "peg-native"
	}
	return "Content-only"
}

// ReasoningFormat says what happens to <think> blocks (llama-server's --reasoning-format).
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

// Syntax is everything Parse needs to know about the output (llama.cpp's common_chat_syntax).
type Syntax struct {
	Format    Format          // how the model writes tool calls, from its chat template
	Reasoning ReasoningFormat // what becomes of <think> blocks (--reasoning-format)
	// ReasoningInContent keeps reasoning, with its tags, in the content (deepseek-legacy while
	// streaming).
	ReasoningInContent bool
	// ThinkingForcedOpen says the prompt ends inside an open <think> block, so the output starts
	// with reasoning.
	ThinkingForcedOpen bool
	// ParseToolCalls is set when the request has tools the model may call.
	ParseToolCalls bool
	// Parser reads the output in the PEGNative format, after GenerationPrompt: the text
	// add_generation_prompt ended the prompt with, which the output continues.
	Parser           *peg.P
	GenerationPrompt string
	// ReasoningTags open and close reasoning in the PEGNative format, which
	// ReasoningInContent writes back around it.
	ReasoningTags [2]string
}

// Template markers that identify a format (common_chat_templates_apply_jinja).
const (
	hermesMarker    = "<tool_call>"
	llama3Marker    = "<|start_header_id|>ipython<|end_header_id|>"
	pythonTagMarker = "<|python_tag|>"
	mistralMarker   = "[TOOL_CALLS]"
)

// builtinTools are the Llama 3.1 built-in tool names that <|python_tag|> calls address.
var builtinTools = map[string]bool{
	"wolfram_alpha": true, "web_search": true, "brave_search": true, "python": true, "code_interpreter": true,
}

// Detect picks the output format for a template source as llama.cpp does: Hermes 2 Pro when the
// template knows <tool_call>, Llama 3.x when it has the ipython role (with built-in tools when it
// also knows <|python_tag|> and a built-in tool is offered), then, only with tools the model may
// call, the generic format when a JSON schema also constrains the answer, Mistral Nemo when the
// template knows [TOOL_CALLS], and the generic JSON format otherwise. The caller takes Generic
// as ContentOnly where the template renders the tools not at all (llama-server's autoparser
// finds no tool syntax there).
func Detect(templateSource string, tools []Tool, toolChoiceNone, jsonSchema bool) Format {
	active := len(tools) > 0 && !toolChoiceNone
	if strings.Contains(templateSource, hermesMarker) && !jsonSchema {
		return Hermes2Pro
	}
	if active && jsonSchema {
		return Generic
	}
	if strings.Contains(templateSource, llama3Marker) {
		if strings.Contains(templateSource, pythonTagMarker) {
			for _, t := range tools {
				if builtinTools[t.Name] {
					return Llama3Builtin
				}
			}
		}
		return Llama3
	}
	if !active {
		return ContentOnly
	}
	if strings.Contains(templateSource, mistralMarker) {
		return MistralNemo
	}
	return Generic
}

// GenericInstruction is the system text llama.cpp's generic format adds to the conversation.
const GenericInstruction = "Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the user's request"
