package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/chat/jinja"
)

// referenceDate is when the reference renderings were captured (their date_string).
var referenceDate = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// referenceSkips lists the reference cases not reproduced exactly yet, with the reason.
var referenceSkips = map[string]string{}

// referenceRequest is the part of an /apply-template body that the reference files use.
type referenceRequest struct {
	Messages []struct {
		Role             string          `json:"role"`
		Content          json.RawMessage `json:"content"`
		ReasoningContent string          `json:"reasoning_content"`
		Name             string          `json:"name"`
		ToolCallID       string          `json:"tool_call_id"`
		ToolCalls        []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
}

// input converts the request as llama-server does: null content is "", text parts are
// concatenated, add_generation_prompt defaults to true.
func (r referenceRequest) input(t *testing.T) Input {
	in := Input{Tools: r.Tools, Kwargs: r.ChatTemplateKwargs, AddGenerationPrompt: true, Now: referenceDate}
	if r.AddGenerationPrompt != nil {
		in.AddGenerationPrompt = *r.AddGenerationPrompt
	}
	for _, m := range r.Messages {
		msg := Message{Role: m.Role, ReasoningContent: m.ReasoningContent, Name: m.Name, ToolCallID: m.ToolCallID}
		var content any
		if len(m.Content) > 0 {
			if err := json.Unmarshal(m.Content, &content); err != nil {
				t.Fatal(err)
			}
		}
		switch c := content.(type) {
		case string:
			msg.Content = c
		case []any:
			var parts []string
			for _, p := range c {
				if pm, ok := p.(map[string]any); ok {
					s, _ := pm["text"].(string)
					parts = append(parts, s)
				}
			}
			msg.Content = strings.Join(parts, "")
		}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		in.Messages = append(in.Messages, msg)
	}
	return in
}

// TestReferenceTemplates renders every request of the reference set with its template and
// compares with llama-server's prompt byte for byte (or expects the error it answered).
func TestReferenceTemplates(t *testing.T) {
	dir := shareddata.Path(t, "reference", "chat-templates")
	reqs, err := filepath.Glob(filepath.Join(dir, "*.request.json"))
	if err != nil || len(reqs) == 0 {
		t.Fatalf("no reference requests in %s: %v", dir, err)
	}
	for _, reqPath := range reqs {
		base := strings.TrimSuffix(filepath.Base(reqPath), ".request.json")
		name := base[:strings.LastIndexByte(base, '.')]
		t.Run(base, func(t *testing.T) {
			if why, ok := referenceSkips[base]; ok {
				t.Skipf("not reproduced exactly yet: %s", why)
			}
			src, err := os.ReadFile(filepath.Join(dir, name+".jinja"))
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(reqPath)
			if err != nil {
				t.Fatal(err)
			}
			var req referenceRequest
			if err := json.Unmarshal(data, &req); err != nil {
				t.Fatal(err)
			}
			tmpl, err := New(string(src), name)
			if err != nil {
				t.Fatal(err)
			}
			tmpl = tmpl.WithSpecialTokens("<s>", "</s>")
			got, err := tmpl.Apply(req.input(t))
			// The reference model adds BOS when tokenizing, so llama-server strips a leading one.
			got = strings.TrimPrefix(got, "<s>")
			if errBody, rerr := os.ReadFile(filepath.Join(dir, base+".error.json")); rerr == nil {
				var re *RenderError
				if err == nil || !errors.As(err, &re) {
					t.Fatalf("rendered %q, want an error like %s", got, errBody)
				}
				var ex *jinja.Exception
				if !errors.As(err, &ex) || !strings.Contains(string(errBody), ex.Msg) {
					t.Errorf("error %v, want the exception in %s", err, errBody)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, base+".prompt.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("rendered\n%s\nwant\n%s\n(quoted: %q)", got, want, got)
			}
		})
	}
}
