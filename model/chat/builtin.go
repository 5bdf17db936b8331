package chat

import (
	"fmt"
	"sort"
)

// BuiltinNames lists llama.cpp's built-in chat template names (LLM_CHAT_TEMPLATES), which
// --chat-template accepts besides Jinja sources, sorted.
func BuiltinNames() []string {
	names := make([]string, 0, len(legacyFormats))
	for n := range legacyFormats {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Resolve turns a --chat-template argument into a template as llama-server does: one of the
// built-in names (BuiltinNames), which renders as llama.cpp's built-in formatter does ("chatml"
// is llama.cpp's ChatML Jinja source), or else the Jinja source itself, which must parse. A
// string that is neither, such as plain text, is a Jinja template that renders as itself. An
// empty argument is an error; callers use ForModel when no template was asked for.
func Resolve(nameOrSource string) (Template, error) {
	if nameOrSource == "" {
		return Template{}, fmt.Errorf("empty chat template")
	}
	if nameOrSource == "chatml" {
		return chatMLTemplate(), nil
	}
	if f, ok := legacyFormats[nameOrSource]; ok {
		return Template{Source: nameOrSource, Name: nameOrSource, legacy: f}, nil
	}
	t, err := New(nameOrSource, "--chat-template")
	if err != nil {
		return Template{}, fmt.Errorf("the supplied chat template is not supported: %w", err)
	}
	return t, nil
}
