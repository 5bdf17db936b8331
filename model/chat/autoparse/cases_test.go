package autoparse_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/model/chat/autoparse"
	"github.com/wgpu-llama/wgpu-llama/model/chat/peg"
)

// parseCase is one of llama.cpp's parser tests (tests/test-chat.cpp,
// test_template_output_peg_parsers) for a template its autoparser handles: a model output and
// the message llama.cpp reads from it.
type parseCase struct {
	Template        string          `json:"template"`
	Source          string          `json:"source_test"`
	Tools           json.RawMessage `json:"tools"`
	ToolChoice      string          `json:"tool_choice"`
	ReasoningFormat string          `json:"reasoning_format"`
	EnableThinking  *bool           `json:"enable_thinking"`
	Parallel        *bool           `json:"parallel_tool_calls"`
	Messages        []chat.Message  `json:"messages"`
	AddGenPrompt    bool            `json:"add_generation_prompt"`
	JSONSchema      json.RawMessage `json:"json_schema"`
	Input           string          `json:"input"`
	Partial         bool            `json:"is_partial"`
	Expected        struct {
		Content   string `json:"content"`
		Reasoning string `json:"reasoning_content"`
		Calls     []struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			ID        string `json:"id"`
		} `json:"tool_calls"`
	} `json:"expected"`
}

// analyses caches one analysis per template file.
var analyses = map[string]*autoparse.Analysis{}

// loadTemplate reads a template of llama.cpp's test models and the parser builder llama.cpp
// would use for it: a dedicated format if one matches, else the autoparser's analysis (made
// once per template).
func loadTemplate(t *testing.T, name string) (chat.Template, autoparse.Builder) {
	t.Helper()
	var path string
	if ref, ok := strings.CutPrefix(name, "reference/"); ok {
		path = shareddata.Path(t, "reference", "chat-templates", ref+".jinja")
	} else {
		path = shareddata.Path(t, "llama-server-tests", "upstream", "models", "templates", name+".jinja")
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.New(string(src), filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	tmpl = tmpl.WithSpecialTokens("<s>", "</s>")
	if f := autoparse.Specialized(tmpl.Source); f != nil {
		return tmpl, f
	}
	if a, ok := analyses[name]; ok {
		return tmpl, a
	}
	a, err := autoparse.Analyze(tmpl.Source, tmpl.Caps().ForAnalysis(), tmpl.RenderJSON)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	analyses[name] = a
	return tmpl, a
}

// TestLlamaCppParseCases reads each recorded model output with the parser built for its
// template and request, and compares with llama.cpp's message as its tests do: content and
// reasoning without surrounding whitespace, names and ids exactly, arguments as JSON.
func TestLlamaCppParseCases(t *testing.T) {
	runParseCases(t, "testdata/llama_cpp_parse_cases.json", false)
}

// TestLlamaCppSpecializedCases runs llama.cpp's parser tests of the templates it reads with a
// dedicated format instead of the autoparser.
func TestLlamaCppSpecializedCases(t *testing.T) {
	runParseCases(t, "testdata/llama_cpp_specialized_cases.json", true)
}

func runParseCases(t *testing.T, file string, specialized bool) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cases []parseCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		t.Run(c.Template, func(t *testing.T) {
			tmpl, a := loadTemplate(t, c.Template)
			if _, analysed := a.(*autoparse.Analysis); analysed == specialized {
				t.Fatalf("%s: specialized format %v, want %v", c.Template, !analysed, specialized)
			}
			in := chat.Input{Messages: c.Messages, AddGenerationPrompt: c.AddGenPrompt}
			if isArray(c.Tools) {
				in.Tools = c.Tools
			}
			if c.EnableThinking != nil && !*c.EnableThinking {
				in.NoThinking = true
			}
			prompt, err := tmpl.Apply(in)
			if err != nil {
				t.Fatal(err)
			}
			in.AddGenerationPrompt = false
			base, _ := tmpl.Apply(in)
			n := 0
			for n < len(base) && n < len(prompt) && base[n] == prompt[n] {
				n++
			}
			gp := prompt[n:]
			p := autoparse.Params{ExtractReasoning: c.ReasoningFormat != "none", GenerationPrompt: gp,
				Parallel: c.Parallel != nil && *c.Parallel}
			if len(c.JSONSchema) > 0 && string(c.JSONSchema) != "null" {
				p.ResponseSchema = c.JSONSchema
			}
			switch c.ToolChoice {
			case "none":
				p.Choice = autoparse.ChoiceNone
			case "required":
				p.Choice = autoparse.ChoiceRequired
			}
			var tools []struct {
				Function struct {
					Name       string          `json:"name"`
					Parameters json.RawMessage `json:"parameters"`
				} `json:"function"`
			}
			_ = json.Unmarshal(c.Tools, &tools)
			for _, tl := range tools {
				p.Tools = append(p.Tools, autoparse.Tool{Name: tl.Function.Name, Parameters: tl.Function.Parameters})
			}
			out := a.Build(p)
			text := gp + c.Input
			nodes, failed, end := peg.Parse(out.Parser, text)
			if failed {
				t.Fatalf("case %d (%s): parse failed at %d: %q\nanalysis %+v", i, c.Source, end, text[end:], a)
			}
			m, err := peg.Map(text, nodes)
			if err != nil {
				t.Fatal(err)
			}
			streamGrows(t, out.Parser, gp, c.Input)
			e := c.Expected
			if strings.TrimSpace(m.Content) != strings.TrimSpace(e.Content) || strings.TrimSpace(m.Reasoning) != strings.TrimSpace(e.Reasoning) || len(m.Calls) != len(e.Calls) {
				t.Fatalf("case %d (%s) input %q:\ngot  %+v\nwant %+v\nanalysis %+v", i, c.Source, c.Input, m, e, a)
			}
			for j, call := range m.Calls {
				w := e.Calls[j]
				if call.Name != w.Name || call.ID != w.ID || normJSON(call.Arguments) != normJSON(w.Arguments) {
					t.Fatalf("case %d (%s) call %d: got %+v want %+v", i, c.Source, j, call, w)
				}
			}
		})
	}
}

func isArray(r json.RawMessage) bool { return strings.HasPrefix(strings.TrimSpace(string(r)), "[") }

// normJSON is the JSON re-serialised ("" when it does not parse, as llama.cpp's test compares).
func normJSON(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// streamGrows parses every prefix of the output (at character boundaries), as a stream sees
// it, and checks that the message only ever grows: content, reasoning and arguments extend
// what the previous prefix gave, and no call disappears.
func streamGrows(t *testing.T, parser *peg.P, gp, output string) {
	t.Helper()
	var prev peg.Message
	for i := 1; i <= len(output); i++ {
		if !utf8.RuneStart(output[i%len(output)]) && i < len(output) {
			continue
		}
		text := gp + output[:i]
		nodes, failed, _ := peg.Parse(parser, text)
		if failed {
			continue
		}
		m, err := peg.Map(text, nodes)
		if err != nil {
			continue
		}
		if !strings.HasPrefix(m.Content, prev.Content) || !strings.HasPrefix(m.Reasoning, prev.Reasoning) || len(m.Calls) < len(prev.Calls) {
			t.Fatalf("prefix %q: %+v does not extend %+v", output[:i], m, prev)
		}
		for j, c := range prev.Calls {
			if !strings.HasPrefix(m.Calls[j].Arguments, c.Arguments) || !strings.HasPrefix(m.Calls[j].Name, c.Name) {
				t.Fatalf("prefix %q: call %+v does not extend %+v", output[:i], m.Calls[j], c)
			}
		}
		prev = m
	}
}
