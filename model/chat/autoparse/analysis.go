// Package autoparse analyses a Jinja chat template the way llama.cpp's differential
// autoparser does (common/chat-diff-analyzer.cpp, analyze_template): it renders pairs of probe
// conversations that differ in one thing, diffs the outputs and reads the reasoning, content
// and tool-call markers off the differences. The parser generator consumes the result.
package autoparse

import (
	"encoding/json"
	"fmt"
)

// Renderer renders probe conversations: messages and tools as JSON arrays.
type Renderer func(messages, tools json.RawMessage, addGenerationPrompt, enableThinking bool) (string, error)

// Caps are the template capabilities the analysis depends on (llama.cpp's jinja caps).
type Caps struct {
	StringContent, TypedContent, ToolCalls, ParallelToolCalls bool
}

// ReasoningMode says how a template marks reasoning.
type ReasoningMode int

// Reasoning modes.
const (
	ReasoningNone      ReasoningMode = iota // no reasoning markers
	ReasoningTagBased                       // reasoning between start/end markers
	ReasoningToolsOnly                      // reasoning only rendered alongside tool calls
)

func (m ReasoningMode) String() string {
	switch m {
	case ReasoningNone:
		return "NONE"
	case ReasoningTagBased:
		return "TAG_BASED"
	case ReasoningToolsOnly:
		return "TOOLS_ONLY"
	}
	return fmt.Sprintf("ReasoningMode(%d)", int(m))
}

// ContentMode says how a template wraps the assistant's content.
type ContentMode int

// Content modes.
const (
	ContentPlain                ContentMode = iota // content as is
	ContentAlwaysWrapped                           // content always between start/end markers
	ContentWrappedWithReasoning                    // wrapped when reasoning is present (Granite)
)

func (m ContentMode) String() string {
	switch m {
	case ContentPlain:
		return "PLAIN"
	case ContentAlwaysWrapped:
		return "ALWAYS_WRAPPED"
	case ContentWrappedWithReasoning:
		return "WRAPPED_WITH_REASONING"
	}
	return fmt.Sprintf("ContentMode(%d)", int(m))
}

// ToolFormat says how a template writes tool calls.
type ToolFormat int

// Tool-call formats.
const (
	FormatNone          ToolFormat = iota // no tool calls
	FormatJSONNative                      // the whole call is a JSON object
	FormatTagWithJSON                     // name in tags, arguments as JSON
	FormatTagWithTagged                   // name and every argument in tags
)

func (f ToolFormat) String() string {
	switch f {
	case FormatNone:
		return "NONE"
	case FormatJSONNative:
		return "JSON_NATIVE"
	case FormatTagWithJSON:
		return "TAG_WITH_JSON"
	case FormatTagWithTagged:
		return "TAG_WITH_TAGGED"
	}
	return fmt.Sprintf("ToolFormat(%d)", int(f))
}

// CallIDPos says where a tool call's id is written.
type CallIDPos int

// Call-id positions.
const (
	CallIDNone               CallIDPos = iota // id not rendered
	CallIDPreFuncName                         // before the function name
	CallIDBetweenFuncAndArgs                  // between the name and the arguments
	CallIDPostArgs                            // after the arguments
)

func (p CallIDPos) String() string {
	switch p {
	case CallIDNone:
		return "NONE"
	case CallIDPreFuncName:
		return "PRE_FUNC_NAME"
	case CallIDBetweenFuncAndArgs:
		return "BETWEEN_FUNC_AND_ARGS"
	case CallIDPostArgs:
		return "POST_ARGS"
	}
	return fmt.Sprintf("CallIDPos(%d)", int(p))
}

// Reasoning is how reasoning is delimited. Start and End are untrimmed.
type Reasoning struct {
	Mode       ReasoningMode
	Start, End string
}

// Content is how assistant content is delimited.
type Content struct {
	Mode       ContentMode
	Start, End string
}

// Format is the overall shape of a tool call.
type Format struct {
	Mode                     ToolFormat
	SectionStart, SectionEnd string // around all the calls of a message
	PerCallStart, PerCallEnd string // around each call
	FunNameIsKey             bool   // JSON: {"<name>": {...}}
	ToolsArrayWrapped        bool   // JSON: calls inside [ ]
	OpenAIWrapperTrigger     bool   // JSON: the template asks for {"name":..., "parameters":...}
	FunctionField            string // JSON: key of the function object
	NameField, ArgsField     string // JSON: keys of the name and the arguments
	IDField, GenIDField      string // JSON: key of the call id; key of an id to generate
	ParameterOrder           []string
}

// Function is how the function name and its end are marked (non-JSON formats).
type Function struct {
	NamePrefix, NameSuffix, ArgsSeparator, Close string
}

// Arguments is how arguments are marked (non-JSON formats).
type Arguments struct {
	Start, End               string
	NamePrefix, NameSuffix   string
	ValuePrefix, ValueSuffix string
	Separator                string
}

// CallID is where and how a call id is written.
type CallID struct {
	Pos            CallIDPos
	Prefix, Suffix string
}

// Tools is the tool-call analysis.
type Tools struct {
	Format    Format
	Function  Function
	Arguments Arguments
	CallID    CallID
}

// Analysis is the result of analysing a template (llama.cpp's autoparser fields).
type Analysis struct {
	Reasoning       Reasoning
	Content         Content
	Tools           Tools
	UserStart       string
	AssistantStart  string
	PreservedTokens []string
}

// ContentAlwaysWrapped reports whether content is always wrapped in both a start and an end
// marker (llama.cpp's is_always_wrapped).
func (a *Analysis) ContentAlwaysWrapped() bool {
	return a.Content.Mode == ContentAlwaysWrapped && a.Content.Start != "" && a.Content.End != ""
}

// analysisError carries an error the C++ analysis throws (a JSON parse failure, a substring
// out of range) up to Analyze, which returns it.
type analysisError struct{ err error }

func throwf(format string, args ...any) {
	panic(analysisError{fmt.Errorf(format, args...)})
}

// analyzer holds one analysis in progress.
type analyzer struct {
	src    string
	caps   Caps
	render Renderer
	a      Analysis
}

// Analyze analyses the template src (its Jinja source, for the source-matched workarounds)
// with caps, rendering probes through render. It returns an error where llama.cpp's analysis
// throws; a probe that fails to render only leaves the fields that probe decides unset.
func Analyze(src string, caps Caps, render Renderer) (a *Analysis, err error) {
	z := &analyzer{src: src, caps: caps, render: render}
	z.a.Tools.Format = defaultFormat()
	z.a.PreservedTokens = []string{}
	defer func() {
		if r := recover(); r != nil {
			if ae, ok := r.(analysisError); ok {
				a, err = nil, fmt.Errorf("autoparse: %w", ae.err)
				return
			}
			a, err = nil, fmt.Errorf("autoparse: internal error: %v", r)
		}
	}()
	z.analyzeReasoning()
	z.analyzeContent()
	if caps.ToolCalls {
		z.analyzeTools()
	}
	z.a.AssistantStart = z.detectAssistantStart()
	z.a.UserStart = z.detectUserStart()
	z.collectPreservedTokens()
	z.applyWorkarounds()
	return &z.a, nil
}

func defaultFormat() Format {
	return Format{FunctionField: "function", NameField: "name", ArgsField: "arguments", ParameterOrder: []string{}}
}
