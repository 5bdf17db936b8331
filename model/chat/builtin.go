package chat

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// builtinSources are Jinja equivalents of llama.cpp's named built-in chat templates (the
// names --chat-template accepts), written for this package.
var builtinSources = map[string]string{
	"chatml": ChatMLSource,
	"llama2": "{%- if messages and messages[0].role == 'system' -%}" +
		"{%- set system = messages[0].content -%}{%- set rest = messages[1:] -%}" +
		"{%- else -%}{%- set system = '' -%}{%- set rest = messages -%}{%- endif -%}" +
		"{{- bos_token -}}" +
		"{%- for m in rest -%}" +
		"{%- if m.role == 'user' -%}" +
		"{%- if loop.first and system -%}{{- '[INST] <<SYS>>\n' + system + '\n<</SYS>>\n\n' + m.content + ' [/INST]' -}}" +
		"{%- else -%}{{- ('' if loop.first else bos_token) + '[INST] ' + m.content + ' [/INST]' -}}{%- endif -%}" +
		"{%- elif m.role == 'assistant' -%}{{- m.content + eos_token -}}{%- endif -%}" +
		"{%- endfor -%}",
	"llama3": "{{- bos_token -}}" +
		"{%- for m in messages -%}" +
		"{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\n\n' + m.content | trim + '<|eot_id|>' -}}" +
		"{%- endfor -%}" +
		"{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%}",
	"mistral-v7": "{{- bos_token -}}" +
		"{%- for m in messages -%}" +
		"{%- if m.role == 'system' -%}{{- '[SYSTEM_PROMPT] ' + m.content + '[/SYSTEM_PROMPT]' -}}" +
		"{%- elif m.role == 'user' -%}{{- '[INST] ' + m.content + '[/INST]' -}}" +
		"{%- elif m.role == 'assistant' -%}{{- ' ' + m.content + eos_token -}}{%- endif -%}" +
		"{%- endfor -%}",
	"phi3": "{%- for m in messages -%}" +
		"{{- '<|' + m.role + '|>\n' + m.content + '<|end|>\n' -}}" +
		"{%- endfor -%}" +
		"{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}",
	"gemma": "{{- bos_token -}}" +
		"{%- set ns = namespace(system='') -%}" +
		"{%- for m in messages -%}" +
		"{%- if m.role == 'system' -%}{%- set ns.system = ns.system + m.content + '\n\n' -%}" +
		"{%- else -%}" +
		"{{- '<start_of_turn>' + ('model' if m.role == 'assistant' else m.role) + '\n' + ns.system + m.content | trim + '<end_of_turn>\n' -}}" +
		"{%- set ns.system = '' -%}" +
		"{%- endif -%}" +
		"{%- endfor -%}" +
		"{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}",
}

func init() {
	builtinSources["qwen"] = ChatMLSource // Qwen chat models use ChatML
	builtinSources["mistral"] = builtinSources["mistral-v7"]
}

// BuiltinNames lists the names Resolve accepts besides file paths, sorted.
func BuiltinNames() []string {
	names := make([]string, 0, len(builtinSources))
	for n := range builtinSources {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Resolve turns a --chat-template argument into a template: one of the built-in names
// (BuiltinNames), or else the path of a file holding Jinja source. An empty argument is an
// error; callers use ForModel when no template was asked for.
func Resolve(nameOrFile string) (Template, error) {
	if nameOrFile == "" {
		return Template{}, fmt.Errorf("empty chat template name")
	}
	if src, ok := builtinSources[nameOrFile]; ok {
		return New(src, nameOrFile)
	}
	data, err := os.ReadFile(nameOrFile)
	if err != nil {
		return Template{}, fmt.Errorf("chat template %q is neither a built-in name (%s) nor a readable file: %w",
			nameOrFile, strings.Join(BuiltinNames(), ", "), err)
	}
	return New(string(data), nameOrFile)
}
