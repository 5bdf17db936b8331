package autoparse

import "strings"

// applyWorkarounds fixes the analysis of template families the differential analysis gets
// wrong, recognised by their source, as llama.cpp does (in its order).
//
// llama.cpp's documentation also lists workarounds for Laguna and Bailing V3 templates; the
// analyzer version this ports does not have them, so neither does this.
func (z *analyzer) applyWorkarounds() {
	a := &z.a
	src := z.src
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(src, x) {
				return false
			}
		}
		return true
	}
	push := func(tokens ...string) { a.PreservedTokens = append(a.PreservedTokens, tokens...) }
	f := &a.Tools.Format

	// Old Qwen/DeepSeek templates strip thinking with content.split('</think>').
	if has("content.split('</think>')") && !has("reasoning_content") && !has("<SPECIAL_12>") &&
		a.Reasoning.Mode == ReasoningNone {
		a.Reasoning = Reasoning{ReasoningTagBased, "<think>", "</think>"}
		push("<think>", "</think>")
	}
	// Granite 3.3.
	if has("Write your thoughts between <think></think> and write your response between <response></response>") {
		a.Reasoning = Reasoning{ReasoningTagBased, "<think>", "</think>"}
		push("<think>", "</think>")
		a.Content = Content{ContentWrappedWithReasoning, "<response>", "</response>"}
		push("<response>", "</response>")
	}
	// Cohere Command R+.
	if has("<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>") && a.Content.Start == "" {
		a.Content = Content{ContentAlwaysWrapped, "<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"}
		push("<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>")
		a.UserStart = "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>"
	}
	// Functionary v3.1.
	if has(`set has_code_interpreter = tools | selectattr("type", "equalto", "code_interpreter") | list | length > 0`) {
		a.Content.Mode = ContentPlain
		a.Content.End = ""
		a.Tools.Function.NamePrefix = ""
		f.SectionStart, f.SectionEnd = "", ""
		f.PerCallStart, f.PerCallEnd = "<function=", "</function>"
		a.Tools.Function.Close = ""
		a.PreservedTokens = []string{"<|eot_id|>", "<|eom_id|>", "<function=", ">", "</function>"}
	}
	// DeepSeek-R1-Distill-Qwen.
	if has("{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>'") {
		f.SectionStart, f.SectionEnd = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
		f.PerCallStart, f.PerCallEnd = "<｜tool▁call▁begin｜>function", "<｜tool▁call▁end｜>"
		a.Tools.Function.NamePrefix = "<｜tool▁sep｜>"
		a.Tools.Function.Close = "```"
	}
	// Nemotron Nano v2.
	if has("<SPECIAL_10>", "<SPECIAL_11>", "<SPECIAL_12>", "<TOOL_RESPONSE>") {
		f.Mode = FormatJSONNative
		f.SectionStart, f.SectionEnd = "", ""
		f.PerCallStart, f.PerCallEnd = "<TOOLCALL>", "</TOOLCALL>"
		f.ToolsArrayWrapped = true
		a.Content = Content{ContentPlain, "", ""}
		a.Reasoning = Reasoning{ReasoningTagBased, "<think>\n", "</think>"}
		a.AssistantStart, a.UserStart = "<SPECIAL_11>Assistant", "<SPECIAL_11>User"
		a.PreservedTokens = []string{"<SPECIAL_11>", "</think>", "<TOOLCALL>", "</TOOLCALL>"}
	}
	// Fireworks firefunction v2 (the \\n are a backslash and n in the source).
	if has(`{%- set system_prompt = '<|start_header_id|>' + 'system' + '<|end_header_id|>\\n\\n' + message['content'] | trim + '\\n' + system_prompt_suffix + '<|eot_id|>' -%}`) {
		a.AssistantStart = "<|start_header_id|>assistant<|end_header_id|>"
		a.UserStart = "<|start_header_id|>user<|end_header_id|>"
	}
	// Solar Open.
	if has("<|begin|>assistant<|think|><|end|>") {
		a.AssistantStart = "<|begin|>assistant"
	}
	// Apriel 1.6.
	if has("if not loop.last and '[BEGIN FINAL RESPONSE]' in asst_text") {
		a.UserStart, a.AssistantStart = "<|begin_user|>", "<|begin_assistant|>"
	}
	// Templates that ask for {"name": ..., "parameters": ...} in their instructions.
	if has(`Respond in the format {"name": function name`, "Do not use variables.") {
		f.OpenAIWrapperTrigger = true
	}
}
