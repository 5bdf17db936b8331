package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// TestConstrainedOutput drives grammar, json_schema and response_format through both
// endpoints on the real engine and checks the outputs are in the language asked for.
func TestConstrainedOutput(t *testing.T) {
	b := enginetest.Load(t, "models", "stories260K.gguf")
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(b)
	h := &harness{srv: srv, h: srv.Handler()}
	post := func(path, body string) map[string]any {
		t.Helper()
		rec := h.do(t, http.MethodPost, path, body)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s %s: status %d: %s", path, body, rec.Code, rec.Body)
		}
		return decodeJSON(t, rec.Body.Bytes())
	}
	schema := `{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9}},"required":["n"]}`
	checkJSON := func(what, text string) {
		t.Helper()
		var v struct{ N *int }
		if err := json.Unmarshal([]byte(text), &v); err != nil || v.N == nil || *v.N < 1 || *v.N > 9 {
			t.Errorf("%s: %q does not satisfy the schema (%v)", what, text, err)
		}
	}
	for seed := 0; seed < 5; seed++ {
		s := `,"seed":` + string(rune('0'+seed))
		got := post("/completion", `{"prompt":"Once upon a time","n_predict":200,"json_schema":`+schema+s+`}`)
		checkJSON("completion json_schema", got["content"].(string))
		chat := post("/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":200,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":`+schema+`}}`+s+`}`)
		checkJSON("chat response_format", lookup(t, chat, "choices.0.message.content").(string))
	}
	got := post("/completion", `{"prompt":"Once upon a time","n_predict":32,"grammar":"root ::= \"yes\" | \"no\""}`)
	if c := got["content"].(string); c != "yes" && c != "no" {
		t.Errorf("grammar yes|no: content %q", c)
	}
	if g := lookup(t, got, "generation_settings.grammar"); g != `root ::= "yes" | "no"` {
		t.Errorf("generation_settings.grammar %q", g)
	}
	// json_object with a schema uses it; without one any object may follow, so a length-capped
	// reply is only checked to be an object's beginning.
	obj := post("/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":200,"response_format":{"type":"json_object","schema":`+schema+`},"seed":3}`)
	checkJSON("chat json_object with schema", lookup(t, obj, "choices.0.message.content").(string))
	obj = post("/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":20,"response_format":{"type":"json_object"},"seed":3}`)
	if c := lookup(t, obj, "choices.0.message.content").(string); !strings.HasPrefix(c, "{") {
		t.Errorf("json_object: content %q is not an object", c)
	}
}

func TestConstraintErrors(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct{ path, body, want string }{
		{"/completion", `{"prompt":"x","grammar":"root ::= (","json_schema":{}}`, "not both"},
		{"/completion", `{"prompt":"x","grammar":"root ::= ("}`, "'grammar'"},
		{"/completion", `{"prompt":"x","grammar":"root ::= missing"}`, "'grammar'"},
		{"/completion", `{"prompt":"x","json_schema":{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}}`, "'json_schema'"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"yaml"}}`, "'response_format'"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":3}`, "'response_format'"},
	} {
		rec := h.do(t, http.MethodPost, c.path, c.body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%s %s: %d %s, want 400 mentioning %s", c.path, c.body, rec.Code, rec.Body, c.want)
		}
	}
}
