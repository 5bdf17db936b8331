package chat

import "fmt"

// Reasoning is llama-server's --reasoning: whether chat templates are asked to think.
type Reasoning int

const (
	// ReasoningAuto renders enable_thinking true when the template supports thinking (the
	// default).
	ReasoningAuto Reasoning = iota
	// ReasoningOn also makes enable_thinking a default template variable set to true, so a
	// template whose thinking probing did not notice still sees it.
	ReasoningOn
	// ReasoningOff renders enable_thinking false and makes it a default template variable set
	// to false.
	ReasoningOff
)

// ParseReasoning reads a --reasoning value with llama.cpp's spellings: on, enabled, true or 1;
// off, disabled, false or 0; auto or -1. As llama.cpp, the match is case-sensitive.
func ParseReasoning(s string) (Reasoning, error) {
	switch s {
	case "on", "enabled", "true", "1":
		return ReasoningOn, nil
	case "off", "disabled", "false", "0":
		return ReasoningOff, nil
	case "auto", "-1":
		return ReasoningAuto, nil
	}
	return 0, fmt.Errorf("unknown value %q (want on, off or auto)", s)
}

// String is the value's canonical flag spelling.
func (r Reasoning) String() string {
	switch r {
	case ReasoningOn:
		return "on"
	case ReasoningOff:
		return "off"
	}
	return "auto"
}

// DefaultThinking is the enable_thinking kwarg --reasoning adds to every request's
// chat_template_kwargs (a request's own value wins), and whether there is one: on and off set
// it, auto leaves it to the template's probing.
func (r Reasoning) DefaultThinking() (value, set bool) {
	switch r {
	case ReasoningOn:
		return true, true
	case ReasoningOff:
		return false, true
	}
	return false, false
}
