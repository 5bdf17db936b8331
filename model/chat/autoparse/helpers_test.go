package autoparse_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/model/chat/autoparse"
)

// upstreamTemplate returns the path of one of llama.cpp's test templates.
func upstreamTemplate(t *testing.T, name string) string {
	t.Helper()
	return shareddata.Path(t, "llama-server-tests", "upstream", "models", "templates", name+".jinja")
}

// referenceCaps are the chat_template_caps llama-server b10587 reported for the reference
// templates, by template name.
func referenceCaps(t *testing.T) map[string]autoparse.Caps {
	t.Helper()
	data, err := os.ReadFile(shareddata.Path(t, "reference", "chat-templates", "caps.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]struct {
		Caps map[string]bool `json:"chat_template_caps"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	out := map[string]autoparse.Caps{}
	for name, r := range raw {
		out[name] = autoparse.Caps{
			StringContent:     r.Caps["supports_string_content"],
			TypedContent:      r.Caps["supports_typed_content"],
			ToolCalls:         r.Caps["supports_tool_calls"],
			ParallelToolCalls: r.Caps["supports_parallel_tool_calls"],
		}
	}
	return out
}

// analyzeFile analyses the template at path as llama-server would see it: the project's
// renderer with <s> and </s> as BOS and EOS, and the caps b10587 reported where the reference
// data has them (else the caps the chat package probes). patch, when non-nil, rewrites the
// source the renderer sees (the analysis still gets the original).
func analyzeFile(t *testing.T, path string, patch func(string) string) (*autoparse.Analysis, error) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rendered := string(src)
	if patch != nil {
		rendered = patch(rendered)
	}
	tmpl, err := chat.New(rendered, filepath.Base(path))
	if err != nil {
		t.Skipf("%s: the chat package cannot parse it: %v", path, err)
	}
	tmpl = tmpl.WithSpecialTokens("<s>", "</s>")
	caps, ok := referenceCaps(t)[strings.TrimSuffix(filepath.Base(path), ".jinja")]
	if !ok {
		caps = tmpl.Caps().ForAnalysis()
	}
	return autoparse.Analyze(string(src), caps, tmpl.RenderJSON)
}

// summary is one line of an analysis's key fields, for logs.
func summary(a *autoparse.Analysis) string {
	f, fn, ar := a.Tools.Format, a.Tools.Function, a.Tools.Arguments
	q := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\n", `\n`), "|", `\|`) }
	return strings.Join([]string{
		a.Reasoning.Mode.String() + " `" + q(a.Reasoning.Start) + "` `" + q(a.Reasoning.End) + "`",
		a.Content.Mode.String() + " `" + q(a.Content.Start) + "` `" + q(a.Content.End) + "`",
		f.Mode.String(),
		"`" + q(f.SectionStart) + "` `" + q(f.SectionEnd) + "`",
		"`" + q(f.PerCallStart) + "` `" + q(f.PerCallEnd) + "`",
		"`" + q(fn.NamePrefix) + "` `" + q(fn.NameSuffix) + "` `" + q(fn.Close) + "`",
		"`" + q(ar.NamePrefix) + "` `" + q(ar.NameSuffix) + "` `" + q(ar.ValuePrefix) + "` `" + q(ar.ValueSuffix) + "`",
		"name=" + f.NameField + " args=" + f.ArgsField + " id=" + f.IDField + " wrapped=" + boolStr(f.ToolsArrayWrapped),
		"`" + q(a.AssistantStart) + "` `" + q(a.UserStart) + "`",
	}, " | ")
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
