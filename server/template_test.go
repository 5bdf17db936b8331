package server

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
)

// fieldsTemplate renders every message field, the tools, a kwarg and the special tokens, to
// check what the server hands the template.
const fieldsTemplate = `{{- bos_token -}}
{%- for m in messages -%}
[{{ m.role }}{% if m.name %} name={{ m.name }}{% endif %}{% if m.tool_call_id %} answers={{ m.tool_call_id }}{% endif %}]
{%- if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif -%}
{{ m.content }}
{%- if m.tool_calls %}{% for c in m.tool_calls %}<call {{ c.id }} {{ c.function.name }} {{ c.function.arguments | tojson }}>{% endfor %}{% endif -%}
{%- endfor -%}
{%- if tools %}<tools {{ tools | tojson }}>{% endif -%}
{%- if greeting is defined %}<greeting {{ greeting }}>{% endif -%}
{%- if add_generation_prompt %}<gen>{% endif -%}
{{- eos_token -}}`

func mustTemplate(t *testing.T, src string) *chat.Template {
	t.Helper()
	tmpl, err := chat.New(src, "test")
	if err != nil {
		t.Fatal(err)
	}
	return &tmpl
}

// newTemplateHarness serves the fake backend with the model template modelTmpl (in its
// ModelInfo, as from the GGUF) and the configured override cfgTmpl (nil for none).
func newTemplateHarness(t *testing.T, modelTmpl string, cfgTmpl *chat.Template) *harness {
	t.Helper()
	fake := newFakeBackend(t)
	fake.info.ChatTemplate = modelTmpl
	fake.info.NCtx = 8192 // the fake vocabulary spends a token per character
	srv := New(Config{Alias: "stories260K", ChatTemplate: cfgTmpl}, testLogger())
	srv.SetBackend(fake)
	return &harness{srv: srv, fake: fake, h: srv.Handler()}
}

func TestChatTemplateFields(t *testing.T) {
	h := newTemplateHarness(t, "", mustTemplate(t, fieldsTemplate))
	conversation := `"messages":[
		{"role":"system","content":"Be brief."},
		{"role":"user","content":"Weather in Paris?","name":"ann"},
		{"role":"assistant","content":null,"reasoning_content":"Look it up.","tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},
			{"type":"function","function":{"name":"get_time","arguments":{"zone":"CET"}}}]},
		{"role":"tool","content":"sunny","tool_call_id":"call_1","name":"get_weather"}],
	"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
	"chat_template_kwargs":{"greeting":"hello"}`
	// The template's leading BOS is trimmed (tokenizing adds it), its trailing EOS kept (the
	// fake vocabulary adds none).
	want := "[system]Be brief.[user name=ann]Weather in Paris?" +
		`[assistant]<think>Look it up.</think><call call_1 get_weather {"city": "Paris"}><call  get_time {"zone": "CET"}>` +
		"[tool name=get_weather answers=call_1]sunny" +
		`<tools [{"type": "function", "function": {"name": "get_weather", "description": "", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]>` +
		"<greeting hello><gen></s>"

	rec := h.do(t, "POST", "/apply-template", "{"+conversation+"}")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if got := decodeJSON(t, rec.Body.Bytes())["prompt"]; got != want {
		t.Errorf("prompt\n%q\nwant\n%q", got, want)
	}

	rec = h.do(t, "POST", "/apply-template", `{"add_generation_prompt":false,`+conversation+"}")
	if got := decodeJSON(t, rec.Body.Bytes())["prompt"]; got != strings.Replace(want, "<gen>", "", 1) {
		t.Errorf("without a generation prompt: %q", got)
	}

	// A chat completion renders the same prompt, whatever tool_choice says.
	rec = h.do(t, "POST", "/v1/chat/completions", `{"max_tokens":1,`+conversation+"}")
	if rec.Code != http.StatusOK {
		t.Fatalf("chat: status %d: %s", rec.Code, rec.Body)
	}
	task := h.fake.lastTask(t)
	// Tokenizing adds BOS and SentencePiece's space prefix, and reads "</s>" as EOS.
	if got := h.fake.tok.Detokenize(task.Prompt, false, true); got != "<s> "+want {
		t.Errorf("chat prompt\n%q\nwant\n%q", got, "<s> "+want)
	}
	if last := task.Prompt[len(task.Prompt)-1]; last != h.fake.tok.EOS() {
		t.Errorf("the prompt ends with token %d, want EOS", last)
	}
	rec = h.do(t, "POST", "/v1/chat/completions", `{"max_tokens":1,"tool_choice":"none","add_generation_prompt":false,`+conversation+"}")
	if rec.Code != http.StatusOK {
		t.Fatalf("chat: status %d: %s", rec.Code, rec.Body)
	}
	if got := h.fake.tok.Detokenize(h.fake.lastTask(t).Prompt, false, true); strings.Contains(got, "<gen>") {
		t.Errorf("add_generation_prompt false still renders the generation prompt: %q", got)
	}
}

func TestChatTemplateChoice(t *testing.T) {
	const modelTmpl = `{% for m in messages %}<model {{ m.role }}:{{ m.content }}>{% endfor %}`
	llama2, err := chat.Resolve("llama2")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		modelTmpl string
		cfgTmpl   *chat.Template
		want      string
	}{
		{"ChatML without a model template", "", nil, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"the model's template", modelTmpl, nil, "<model user:Hi>"},
		{"ChatML when the model's does not parse", "{% for %}", nil, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"an override wins", modelTmpl, mustTemplate(t, `{{ "[" + bos_token + "|" + eos_token + "]" }}{% for m in messages %}{{ m.content }}{% endfor %}`), "[<s>|</s>]Hi"},
		// llama.cpp's built-in llama2 formatter writes no BOS (tokenizing adds it).
		{"a built-in", modelTmpl, &llama2, "[INST] Hi [/INST]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newTemplateHarness(t, tt.modelTmpl, tt.cfgTmpl)
			rec := h.do(t, "POST", "/apply-template", `{"messages":[{"role":"user","content":"Hi"}]}`)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if got := decodeJSON(t, rec.Body.Bytes())["prompt"]; got != tt.want {
				t.Errorf("prompt %q, want %q", got, tt.want)
			}
		})
	}
}

func TestChatTemplateErrors(t *testing.T) {
	const user = `{"role":"user","content":"Hi"}`
	tests := []struct {
		name, body, msg string
	}{
		{"user message without content", `{"messages":[{"role":"user"}]}`, `messages[0]: a "user" message must have 'content'`},
		{"tool message with only tool calls", `{"messages":[` + user + `,{"role":"tool","tool_calls":[]}]}`, `messages[1]: a "tool" message must have 'content'`},
		{"assistant message without content or tool calls", `{"messages":[` + user + `,{"role":"assistant"}]}`, "messages[1]: an assistant message must have 'content' or 'tool_calls'"},
		{"tool call of another type", `{"messages":[{"role":"assistant","tool_calls":[{"type":"code","function":{"name":"f","arguments":"{}"}}]}]}`,
			`messages[0].tool_calls[0]: tool call type "code" is not supported`},
		{"tool call without a function", `{"messages":[{"role":"assistant","tool_calls":[{"type":"function"}]}]}`, "'messages.tool_calls.function' is required"},
		{"tool call without arguments", `{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f"}}]}]}`, "'messages.tool_calls.function.arguments' is required"},
		{"tool call arguments of the wrong type", `{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":[1]}}]}]}`,
			"messages[0].tool_calls[0].function.arguments: must be a string of JSON or an object, not array"},
		{"tool_calls not an array", `{"messages":[{"role":"assistant","tool_calls":{}}]}`, "'messages.tool_calls' must be an array of objects (or null)"},
		{"name not a string", `{"messages":[{"role":"user","content":"x","name":5}]}`, "'messages.name' must be a string (or null)"},
		{"tools not an array", `{"messages":[` + user + `],"tools":"get_weather"}`, "'tools' must be an array of objects (or null)"},
		{"tool of another type", `{"messages":[` + user + `],"tools":[{"type":"retrieval","function":{"name":"f"}}]}`, `tools[0]: tool type "retrieval" is not supported`},
		{"tool without a name", `{"messages":[` + user + `],"tools":[{"type":"function","function":{}}]}`, "'tools.function.name' is required"},
		{"kwargs not an object", `{"messages":[` + user + `],"chat_template_kwargs":[1]}`, "'chat_template_kwargs' must be an object (or null)"},
		{"enable_thinking as a string", `{"messages":[` + user + `],"chat_template_kwargs":{"enable_thinking":"false"}}`, "'chat_template_kwargs.enable_thinking' must be a boolean"},
		{"template refuses", `{"messages":[` + user + `],"chat_template_kwargs":{"fail":true}}`, "rendering the chat template: while executing a call at line 1, column 32: Jinja Exception: no thanks"},
	}
	refusing := mustTemplate(t, `{% if fail %}{{ raise_exception("no thanks") }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}`)
	for _, tt := range tests {
		for _, path := range []string{"/apply-template", "/v1/chat/completions"} {
			t.Run(tt.name+" "+path, func(t *testing.T) {
				h := newTemplateHarness(t, "", refusing)
				wantError(t, h.do(t, "POST", path, tt.body), http.StatusBadRequest, "invalid_request_error", tt.msg)
			})
		}
	}
}

// TestEnableThinkingKwarg checks chat_template_kwargs reach the template as booleans.
func TestEnableThinkingKwarg(t *testing.T) {
	h := newTemplateHarness(t, "", mustTemplate(t, `{% for m in messages %}{{ m.content }}{% endfor %}{% if enable_thinking %}<think>{% else %}<no-think>{% endif %}`))
	for body, want := range map[string]string{
		`{"messages":[{"role":"user","content":"Hi"}]}`:                                                  "Hi<think>",
		`{"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":false}}`: "Hi<no-think>",
		`{"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":null}`:                      "Hi<think>",
	} {
		rec := h.do(t, "POST", "/apply-template", body)
		if got := decodeJSON(t, rec.Body.Bytes())["prompt"]; got != want {
			t.Errorf("%s: prompt %q, want %q", body, got, want)
		}
	}
}

// sharedTemplate reads a template of llama.cpp's test models (../shared), skipping the test
// without the shared data.
func sharedTemplate(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile(shareddata.Path(t, "llama-server-tests", "upstream", "models", "templates", name+".jinja"))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}
