package server

import (
	"bufio"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestReasoningControlArms: "reasoning_control": true gives the generation its completion id
// and an unbounded reasoning budget on the template's <think> markers, as llama-server arms its
// budget sampler with INT_MAX tokens; without it the generation has neither.
func TestReasoningControlArms(t *testing.T) {
	h := newTemplateHarness(t, thinkingTemplate, nil)
	h.fake.output = []string{"Let me", " think.</think>", "Hello."}
	rec := h.do(t, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"reasoning_control":true}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	id, _ := decodeJSON(t, rec.Body.Bytes())["id"].(string)
	p := h.fake.lastTask(t).Params
	if !strings.HasPrefix(id, "chatcmpl-") || p.ControlID != id || !p.ReasoningControl {
		t.Errorf("control id %q, reasoning control %v; want the answer's id %q and true", p.ControlID, p.ReasoningControl, id)
	}
	tok := h.fake.tok
	if b := p.ReasoningBudget; b == nil || b.Tokens != math.MaxInt32 || !b.Open ||
		tok.Detokenize(b.Forced, false, true) != "</think>" || tok.Detokenize(b.End, false, true) != "</think>" {
		t.Errorf("budget %+v, want an open one of MaxInt32 tokens forcing </think>", b)
	}

	h.do(t, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]}`)
	if p := h.fake.lastTask(t).Params; p.ReasoningControl || p.ReasoningBudget != nil {
		t.Errorf("without reasoning_control: control %v, budget %+v", p.ReasoningControl, p.ReasoningBudget)
	}
}

// TestChatControlErrors: llama-server's answers for a bad or unknown control request.
func TestChatControlErrors(t *testing.T) {
	h := newTemplateHarness(t, thinkingTemplate, nil)
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"action":"reasoning_end"}`, 400, `{"error":{"code":400,"message":"missing completion id","type":"invalid_request_error"}}`},
		{`{"id":"","action":"reasoning_end"}`, 400, `{"error":{"code":400,"message":"missing completion id","type":"invalid_request_error"}}`},
		{`{"id":"chatcmpl-x"}`, 400, `{"error":{"code":400,"message":"unknown control action","type":"invalid_request_error"}}`},
		{`{"id":"chatcmpl-x","action":"pause"}`, 400, `{"error":{"code":400,"message":"unknown control action","type":"invalid_request_error"}}`},
		{`{"id":"chatcmpl-x","action":"reasoning_end","model":"stories260K"}`, 200, `{"success":false,"message":"no active completion for this id"}`},
	} {
		rec := h.do(t, "POST", "/v1/chat/completions/control", c.body)
		if rec.Code != c.code || strings.TrimSpace(rec.Body.String()) != c.want {
			t.Errorf("%s: %d %s, want %d %s", c.body, rec.Code, rec.Body, c.code, c.want)
		}
	}
}

// streamDelta is the part of a chat stream event's delta the control test reads.
type streamDelta struct {
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
}

// streamDeltas reads a chat stream's events, calling each with the event's id and first
// choice's delta until it returns false or the stream ends.
func streamDeltas(t *testing.T, resp *http.Response, each func(id string, d streamDelta) bool) {
	t.Helper()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			ID      string `json:"id"`
			Choices []struct {
				Delta streamDelta `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		if len(ev.Choices) > 0 && !each(ev.ID, ev.Choices[0].Delta) {
			return
		}
	}
}

// TestChatControlReasoningEnd runs stories260K in a thinking template without end (context
// shift, ignore_eos): reasoning_end on its id forces the budget message and </think>, and the
// answer goes on as content; a completion without reasoning_control is refused.
func TestChatControlReasoningEnd(t *testing.T) {
	b := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 512, Slots: 1, ContextShift: true})
	srv := New(Config{Alias: "stories260K", ChatTemplate: mustTemplate(t, thinkingTemplate), ReasoningBudgetMessage: " Enough."}, testLogger())
	srv.SetBackend(b)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	post := func(path, body string) *http.Response {
		resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	control := func(id string) string {
		resp := post("/v1/chat/completions/control", `{"id":"`+id+`","action":"reasoning_end"}`)
		defer resp.Body.Close()
		var out strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			out.WriteString(sc.Text())
		}
		return out.String()
	}
	const chat = `{"messages":[{"role":"user","content":"Hi"}],"stream":true,"temperature":0,"ignore_eos":true,"max_tokens":-1`

	resp := post("/v1/chat/completions", chat+`}`)
	streamDeltas(t, resp, func(id string, _ streamDelta) bool {
		if got, want := control(id), `{"success":false,"message":"reasoning control not enabled for this completion"}`; got != want {
			t.Errorf("unarmed: %s, want %s", got, want)
		}
		return false
	})
	resp.Body.Close()

	resp = post("/v1/chat/completions", chat+`,"reasoning_control":true}`)
	defer resp.Body.Close()
	var reasoning, content strings.Builder
	ended := false
	streamDeltas(t, resp, func(id string, d streamDelta) bool {
		reasoning.WriteString(d.ReasoningContent)
		content.WriteString(d.Content)
		if !ended && reasoning.Len() > 0 {
			ended = true
			if got := control(id); got != `{"success":true}` {
				t.Fatalf("armed: %s", got)
			}
		}
		return content.Len() < 20
	})
	if !strings.HasSuffix(reasoning.String(), " Enough.") || strings.Contains(reasoning.String(), "</think>") || content.Len() < 20 {
		t.Errorf("reasoning %q, content %q: want the reasoning cut with \" Enough.\", then the answer", reasoning.String(), content.String())
	}
}
