package server

import (
	"reflect"
	"strings"
	"testing"
)

// TestVerboseAnswer: "verbose" (or the server's --verbose, which a request may turn off) adds
// "__verbose", the native answer of the generation, to chat and text completions.
func TestVerboseAnswer(t *testing.T) {
	const chat = `{"max_tokens":2,"temperature":0,"messages":[{"role":"system","content":"Book"},{"role":"user","content":"What is the best book"}]%s}`
	const text = `{"prompt":"Once upon a time","max_tokens":2,"temperature":0%s}`
	for _, tt := range []struct {
		name          string
		serverVerbose bool
		path, body    string
		field         string // the request's verbose field, "" for none
		want          bool
		content       string
	}{
		{"chat asks", false, "/v1/chat/completions", chat, `,"verbose":true`, true, ", there"},
		{"chat says no", false, "/v1/chat/completions", chat, `,"verbose":false`, false, ""},
		{"chat default", false, "/v1/chat/completions", chat, "", false, ""},
		{"--verbose", true, "/v1/chat/completions", chat, "", true, ", there"},
		{"--verbose, request says no", true, "/v1/chat/completions", chat, `,"verbose":false`, false, ""},
		{"text completion", false, "/v1/completions", text, `,"verbose":true`, true, ", there"},
		{"text completion default", false, "/v1/completions", text, "", false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessConfig(t, Config{Alias: "stories260K", Verbose: tt.serverVerbose})
			rec := h.do(t, "POST", tt.path, strings.Replace(tt.body, "%s", tt.field, 1))
			if rec.Code != 200 {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			resp := decodeJSON(t, rec.Body.Bytes())
			v, ok := resp["__verbose"].(map[string]any)
			if ok != tt.want {
				t.Fatalf("__verbose present %v, want %v: %s", ok, tt.want, rec.Body)
			}
			if !ok {
				return
			}
			prompt, _ := v["prompt"].(string)
			if tt.path == "/v1/chat/completions" && !strings.Contains(prompt, "Book") || tt.path == "/v1/completions" && !strings.Contains(prompt, "Once upon a time") {
				t.Errorf("__verbose.prompt %q lacks the request's text", prompt)
			}
			if v["content"] != tt.content || v["model"] != "stories260K" || v["stop"] != true || v["tokens_predicted"] != 2.0 || v["stop_type"] != "limit" {
				t.Errorf("__verbose %v", v)
			}
			if gs, _ := v["generation_settings"].(map[string]any); gs == nil || gs["n_predict"] != 2.0 {
				t.Errorf("__verbose.generation_settings %v", v["generation_settings"])
			}
			// llama-server puts it before the timings.
			body := rec.Body.String()
			if i, j := strings.Index(body, `"__verbose"`), strings.LastIndex(body, `"timings"`); i < 0 || j < i {
				t.Errorf("__verbose at %d, timings at %d", i, j)
			}
		})
	}
}

// TestModelsAliasesAndTags: /v1/models lists every alias and tag, with the first alias in sort
// order as the id, as llama-server does with --alias a,b,c and --tags.
func TestModelsAliasesAndTags(t *testing.T) {
	for _, tt := range []struct {
		cfg           Config
		id            string
		aliases, tags []any
	}{
		{Config{Alias: "code", Aliases: []string{"code", "fim", "tinyllama-2"}, Tags: []string{"chat", "fim", "small"}},
			"code", []any{"code", "fim", "tinyllama-2"}, []any{"chat", "fim", "small"}},
		{Config{Alias: "stories260K"}, "stories260K", []any{"stories260K"}, []any{}},
		{Config{}, "fake.gguf", []any{}, []any{}},
	} {
		h := newHarnessConfig(t, tt.cfg)
		rec := h.do(t, "GET", "/v1/models", "")
		m := lookup(t, decodeJSON(t, rec.Body.Bytes()), "data.0").(map[string]any)
		if m["id"] != tt.id || !reflect.DeepEqual(m["aliases"], tt.aliases) || !reflect.DeepEqual(m["tags"], tt.tags) {
			t.Errorf("%+v: id %v aliases %v tags %v", tt.cfg, m["id"], m["aliases"], m["tags"])
		}
	}
}
