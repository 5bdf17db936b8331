// Package tools is llama-server's built-in tools (read_file, file_glob_search, grep_search,
// exec_shell_command, write_file, edit_file, get_info) and the set a server offers: those
// enabled by --tools plus any an MCP server provides, listed and run by GET and POST /tools
// (http.go) and by the agent loop. Every tool reads or writes outside the server, so a server
// offers none unless told to.
//
// A tool runs on the host, in the working directory a request names, or through a runtime
// (runtime.go): a running container, an ssh host, or a container the server starts for itself.
package tools

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Tool is one tool a server offers.
type Tool struct {
	// Name is what the model calls it and POST /tools names: "read_file", or "<server>_<tool>"
	// for an MCP server's.
	Name string
	// DisplayName is the UI's label.
	DisplayName string
	// Kind is "builtin" or "mcp" (GET /tools' "type").
	Kind string
	// Write marks a tool that changes something (files, or anything a shell command may do):
	// the UI asks before running one and the agent loop runs one only when allowed.
	Write bool
	// UsesCwd marks a tool whose relative paths and commands take the request's working
	// directory (x-tool-cwd).
	UsesCwd bool
	// Streams marks a tool that can send its output as it comes (POST /tools "stream": true).
	Streams bool
	// Description and Parameters (a JSON schema object) make its OpenAI function definition.
	Description string
	Parameters  map[string]any
	// Run runs it. Failures the caller should see as the tool's answer (a missing file, a
	// non-unique edit) are a Result with "error"; a returned error is a bad call (BadParams)
	// or a fault of the server or runtime.
	Run func(ctx context.Context, c Call) (Result, error)
}

// Call is one run of a tool.
type Call struct {
	// Params are the model's (or client's) arguments.
	Params map[string]any
	// Cwd resolves relative paths and is where commands run; empty is the server's directory.
	Cwd string
	// Runtime is where the tool's I/O happens (see ParseRuntime); empty is the host.
	Runtime string
	// Base64 asks read_file for the file's bytes as base64 (the x-resp-type header).
	Base64 bool
	// Chunk, when set, receives a streaming tool's output as it comes; it returns false when
	// nobody listens any more, which stops the tool.
	Chunk func(string) bool
}

// Result is a tool's answer: "plain_text_response" (what the model reads), or fields of the
// tool's own, or "error".
type Result map[string]any

// Failed is the answer of a tool that could not do what it was asked.
func Failed(format string, args ...any) Result {
	return Result{"error": fmt.Sprintf(format, args...)}
}

// Text is the text a model reads of r: its plain_text_response, its error, an MCP result's
// text content (marked when the tool reports an error), else r as JSON.
func (r Result) Text() string {
	if s, ok := r["plain_text_response"].(string); ok {
		return s
	}
	if s, ok := r["error"].(string); ok {
		return "error: " + s
	}
	if parts, ok := r["content"].([]any); ok && len(parts) > 0 {
		var texts []string
		for _, p := range parts {
			if m, ok := p.(map[string]any); ok && m["type"] == "text" {
				if s, ok := m["text"].(string); ok {
					texts = append(texts, s)
					continue
				}
			}
			texts = nil
			break
		}
		if texts != nil {
			text := strings.Join(texts, "\n")
			if r["isError"] == true {
				text = "error: " + text
			}
			return text
		}
	}
	return marshalCompact(r)
}

// Definition is t's OpenAI function-calling definition.
func (t *Tool) Definition() map[string]any {
	params := t.Parameters
	if params == nil {
		params = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return map[string]any{"type": "function", "function": map[string]any{
		"name": t.Name, "description": t.Description, "parameters": params,
	}}
}

// Info is t as GET /tools lists it.
func (t *Tool) Info() map[string]any {
	return map[string]any{
		"display_name": t.DisplayName,
		"tool":         t.Name,
		"type":         t.Kind,
		"permissions":  map[string]any{"write": t.Write},
		"uses_cwd":     t.UsesCwd,
		"definition":   t.Definition(),
	}
}

// BadParams is a call whose parameters are missing or of the wrong type (400).
type BadParams struct{ Msg string }

func (e *BadParams) Error() string { return e.Msg }

// Set is the tools a server offers, in the order GET /tools lists them.
type Set struct {
	tools []*Tool
	// Runtime, when set, is where calls that name none run (--tools-runtime).
	Runtime *Runtime
}

// Names of the built-in tools, in llama-server's order.
func Names() []string {
	var out []string
	for _, t := range builtins() {
		out = append(out, t.Name)
	}
	return out
}

// NewSet returns the built-in tools that enabled names ("all" for every one), refusing a name
// that is not one of them.
func NewSet(enabled []string) (*Set, error) {
	want := map[string]bool{}
	for _, n := range enabled {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	all := builtins()
	known := Names()
	for n := range want {
		if n != "all" && !slices.Contains(known, n) {
			return nil, fmt.Errorf("unknown tool %q. available tools: %s", n, strings.Join(known, ", "))
		}
	}
	s := &Set{}
	for _, t := range all {
		if want["all"] || want[t.Name] {
			s.tools = append(s.tools, t)
		}
	}
	return s, nil
}

// Add appends tools (an MCP server's), skipping any whose name is taken; it returns the names
// it skipped.
func (s *Set) Add(tools ...*Tool) (skipped []string) {
	for _, t := range tools {
		if s.Lookup(t.Name) != nil {
			skipped = append(skipped, t.Name)
			continue
		}
		s.tools = append(s.tools, t)
	}
	return skipped
}

// All returns the tools in order.
func (s *Set) All() []*Tool {
	if s == nil {
		return nil
	}
	return slices.Clone(s.tools)
}

// Lookup returns the tool named name, or nil.
func (s *Set) Lookup(name string) *Tool {
	if s == nil {
		return nil
	}
	for _, t := range s.tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Empty reports whether the set offers no tool.
func (s *Set) Empty() bool { return s == nil || len(s.tools) == 0 }

// Run runs the named tool with c, in the set's runtime when c names none.
func (s *Set) Run(ctx context.Context, name string, c Call) (Result, error) {
	t := s.Lookup(name)
	if t == nil {
		return nil, &UnknownTool{Name: name}
	}
	if c.Runtime == "" && s.Runtime != nil {
		spec, err := s.Runtime.Spec()
		if err != nil {
			return nil, err
		}
		c.Runtime = spec
	}
	if c.Params == nil {
		c.Params = map[string]any{}
	}
	return t.Run(ctx, c)
}

// UnknownTool is a call of a tool the set does not offer (404).
type UnknownTool struct{ Name string }

func (e *UnknownTool) Error() string { return fmt.Sprintf("unknown tool %q", e.Name) }

// builtins returns fresh copies of the built-in tools, in llama-server's order.
func builtins() []*Tool {
	return []*Tool{readFileTool(), fileGlobSearchTool(), grepSearchTool(), execShellCommandTool(), writeFileTool(), editFileTool(), getInfoTool()}
}

// Schema builds a JSON schema object of the given properties and required names.
func Schema(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": maps.Clone(props)}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// Prop is one schema property: its type and description.
func Prop(typ, description string) map[string]any {
	return map[string]any{"type": typ, "description": description}
}
