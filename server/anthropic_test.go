package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/gen"
)

// anthropicEvent is one event of a messages stream.
type anthropicEvent struct {
	name string
	data map[string]any
}

// anthropicEvents splits an Anthropic event stream, failing on anything that is not
// `event: NAME`, `data: JSON` and a blank line, or whose data's type is not its name.
func anthropicEvents(t *testing.T, body string) []anthropicEvent {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	var out []anthropicEvent
	for _, ev := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		head, data, ok := strings.Cut(ev, "\n")
		name, ok2 := strings.CutPrefix(head, "event: ")
		payload, ok3 := strings.CutPrefix(data, "data: ")
		if !ok || !ok2 || !ok3 || strings.Contains(payload, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		d := decodeJSON(t, []byte(payload))
		if d["type"] != name {
			t.Fatalf("event %q carries type %v", name, d["type"])
		}
		out = append(out, anthropicEvent{name, d})
	}
	return out
}

// eventSequence describes events compactly: name, index and block or delta type, with runs of
// equal deltas collapsed.
func eventSequence(events []anthropicEvent) []string {
	var seq []string
	for _, e := range events {
		s := e.name
		if i, ok := e.data["index"].(float64); ok {
			s += fmt.Sprintf(":%d", int(i))
		}
		if b, ok := e.data["content_block"].(map[string]any); ok {
			s += ":" + b["type"].(string)
		}
		if d, ok := e.data["delta"].(map[string]any); ok && d["type"] != nil {
			s += ":" + d["type"].(string)
		}
		if len(seq) == 0 || seq[len(seq)-1] != s || !strings.HasPrefix(s, "content_block_delta") {
			seq = append(seq, s)
		}
	}
	return seq
}

func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// storyMessages is the conversation of the chat_nonstream capture, as a messages request.
const storyMessages = `{"model":"stories260K","system":"You are a storyteller.","messages":[{"role":"user","content":"Tell me a story about Lily."}],"max_tokens":16,"temperature":0`

func TestAnthropicMessages(t *testing.T) {
	forEachBackend(t, testAnthropicMessages)
}

func testAnthropicMessages(t *testing.T, url string, real bool) {
	post := func(path, body string) (int, []byte) {
		resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, data
	}

	code, body := post("/v1/messages", storyMessages+"}")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	msg := decodeJSON(t, body)
	if got := keys(msg); got != "content,id,model,role,stop_reason,stop_sequence,type,usage" {
		t.Errorf("keys %s", got)
	}
	if !strings.HasPrefix(msg["id"].(string), "chatcmpl-") || msg["type"] != "message" || msg["role"] != "assistant" ||
		msg["model"] != "stories260K" || msg["stop_sequence"] != nil {
		t.Errorf("message %s", body)
	}
	content := msg["content"].([]any)
	if len(content) != 1 || keys(content[0].(map[string]any)) != "text,type" || lookup(t, msg, "content.0.type") != "text" {
		t.Fatalf("content %s", body)
	}
	text := lookup(t, msg, "content.0.text").(string)
	usage := msg["usage"].(map[string]any)
	if keys(usage) != "cache_read_input_tokens,input_tokens,output_tokens" || usage["cache_read_input_tokens"] != 0.0 {
		t.Errorf("usage %v", usage)
	}
	inputTokens := usage["input_tokens"].(float64)
	wantReason, wantOutput := "end_turn", 14.0 // the fake's story ends after 14 tokens
	if real {
		// The chat_nonstream capture: the same conversation renders the same prompt.
		wantReason, wantOutput = "max_tokens", 16
		if text != "\"Here,\" Annabyed.\n" || inputTokens != 90 {
			t.Errorf("text %q with %v input tokens, want the capture's (90)", text, inputTokens)
		}
	}
	if msg["stop_reason"] != wantReason || usage["output_tokens"] != wantOutput {
		t.Errorf("stop_reason %v, output_tokens %v", msg["stop_reason"], usage["output_tokens"])
	}

	code, body = post("/v1/messages/count_tokens", storyMessages+"}")
	if code != http.StatusOK || string(body) != fmt.Sprintf(`{"input_tokens":%d}`, int(inputTokens)) {
		t.Errorf("count_tokens: %d %s, want %d input tokens", code, body, int(inputTokens))
	}

	code, body = post("/v1/messages", storyMessages+`,"stream":true}`)
	if code != http.StatusOK {
		t.Fatalf("stream: status %d: %s", code, body)
	}
	events := anthropicEvents(t, string(body))
	want := []string{"message_start", "content_block_start:0:text", "content_block_delta:0:text_delta",
		"content_block_stop:0", "message_delta", "message_stop"}
	if got := eventSequence(events); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events %v, want %v", got, want)
	}
	start := events[0].data["message"].(map[string]any)
	if start["id"] != msg["id"] && !strings.HasPrefix(start["id"].(string), "chatcmpl-") || start["stop_reason"] != nil ||
		len(start["content"].([]any)) != 0 || lookup(t, start, "usage.output_tokens") != 0.0 {
		t.Errorf("message_start %v", start)
	}
	if got := keys(events[1].data["content_block"].(map[string]any)); got != "text,type" || lookup(t, events[1].data, "content_block.text") != "" {
		t.Errorf("content_block_start %v", events[1].data)
	}
	var streamed strings.Builder
	for _, e := range events {
		if e.name == "content_block_delta" {
			streamed.WriteString(lookup(t, e.data, "delta.text").(string))
		}
	}
	if streamed.String() != text {
		t.Errorf("streamed %q, non-streamed %q", streamed.String(), text)
	}
	// The same prompt again: the engine's slot holds all of it but the last token, which is
	// always evaluated anew; input_tokens counts the tokens not read from the cache.
	wantCached := 0.0
	if real {
		wantCached = inputTokens - 1
	}
	if lookup(t, start, "usage.cache_read_input_tokens") != wantCached || lookup(t, start, "usage.input_tokens") != inputTokens-wantCached {
		t.Errorf("message_start usage %v, want %v of the %v prompt tokens read from the cache", start["usage"], wantCached, inputTokens)
	}
	md := events[len(events)-2].data
	if keys(md) != "delta,type,usage" || lookup(t, md, "delta.stop_reason") != wantReason || lookup(t, md, "delta.stop_sequence") != nil ||
		keys(md["usage"].(map[string]any)) != "output_tokens" || lookup(t, md, "usage.output_tokens") != wantOutput {
		t.Errorf("message_delta %v", md)
	}
	if keys(events[len(events)-1].data) != "type" {
		t.Errorf("message_stop %v", events[len(events)-1].data)
	}
}

// TestAnthropicToolUse checks thinking, text and tool_use blocks, whole and streamed, from a
// fake model writing a Hermes 2 Pro answer.
func TestAnthropicToolUse(t *testing.T) {
	h := newTemplateHarness(t, hermesTemplate, nil)
	h.fake.output = []string{"<think>Weather needs", " a tool.</think>", "I will check.", "\n<tool_call>\n{\"name\": \"get_weather\", ",
		"\"arguments\": {\"city\":", " \"Paris\"}}\n</tool_call>"}
	const req = `{"messages":[{"role":"user","content":"Weather in Paris?"}],"max_tokens":64,
		"tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`

	rec := h.do(t, "POST", "/v1/messages", req+"}")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var msg struct {
		StopReason string `json:"stop_reason"`
		Content    []map[string]any
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &msg); err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "tool_use" || len(msg.Content) != 3 {
		t.Fatalf("message %s", rec.Body)
	}
	b := msg.Content
	if b[0]["type"] != "thinking" || b[0]["thinking"] != "Weather needs a tool." || b[0]["signature"] != "" ||
		b[1]["type"] != "text" || b[1]["text"] != "I will check.\n" ||
		b[2]["type"] != "tool_use" || b[2]["name"] != "get_weather" || len(b[2]["id"].(string)) != 32 ||
		fmt.Sprint(b[2]["input"]) != "map[city:Paris]" || keys(b[2]) != "id,input,name,type" {
		t.Errorf("content %s", rec.Body)
	}

	rec = h.do(t, "POST", "/v1/messages", req+`,"stream":true}`)
	events := anthropicEvents(t, rec.Body.String())
	want := []string{"message_start",
		"content_block_start:0:thinking", "content_block_delta:0:thinking_delta",
		"content_block_start:1:text", "content_block_delta:1:text_delta",
		"content_block_start:2:tool_use", "content_block_delta:2:input_json_delta",
		"content_block_delta:0:signature_delta", "content_block_stop:0", "content_block_stop:1", "content_block_stop:2",
		"message_delta", "message_stop"}
	if got := eventSequence(events); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events\n%v\nwant\n%v", got, want)
	}
	var thinking, text, input strings.Builder
	for _, e := range events {
		switch {
		case e.name == "content_block_start" && lookup(t, e.data, "content_block.type") == "tool_use":
			if cb := e.data["content_block"].(map[string]any); keys(cb) != "id,name,type" || cb["name"] != "get_weather" {
				t.Errorf("tool_use start %v", cb)
			}
		case e.name == "content_block_delta":
			d := e.data["delta"].(map[string]any)
			thinking.WriteString(fmt.Sprint(d["thinking"]))
			text.WriteString(fmt.Sprint(d["text"]))
			input.WriteString(fmt.Sprint(d["partial_json"]))
		}
	}
	clean := func(s string) string { return strings.ReplaceAll(s, "<nil>", "") }
	if clean(thinking.String()) != "Weather needs a tool." || clean(text.String()) != "I will check.\n" || clean(input.String()) != `{"city": "Paris"}` {
		t.Errorf("streamed thinking %q, text %q, input %q", thinking.String(), text.String(), input.String())
	}
	if lookup(t, events[len(events)-2].data, "delta.stop_reason") != "tool_use" {
		t.Errorf("message_delta %v", events[len(events)-2].data)
	}
}

// TestAnthropicConversion checks what a messages request becomes: the prompt the template
// renders, and the generation settings.
func TestAnthropicConversion(t *testing.T) {
	h := newTemplateHarness(t, "", mustTemplate(t, fieldsTemplate))
	const conversation = `"system":[{"type":"text","text":"Be "},{"type":"text","text":"brief."}],
	"messages":[
		{"role":"user","content":[{"type":"text","text":"Weather"},{"type":"text","text":"in Paris?"}]},
		{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city": "Paris"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},
			{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"18"},{"type":"text","text":"C"}]}]},
		{"role":"assistant"}],
	"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	rec := h.do(t, "POST", "/v1/messages", `{"tool_choice":{"type":"none"},"stop_sequences":["\n\n"],"temperature":0.5,"top_k":7,`+conversation+"}")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	task := h.fake.lastTask(t)
	want := "<s> [system]Be brief.[user]Weather\nin Paris?" +
		`[assistant]Checking.<call toolu_1 get_weather {"city": "Paris"}>` +
		"[tool answers=toolu_1]sunny[tool answers=toolu_2]18C" +
		`<tools [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]>` +
		"<gen></s>"
	if got := h.fake.tok.Detokenize(task.Prompt, false, true); got != want {
		t.Errorf("prompt\n%q\nwant\n%q", got, want)
	}
	p := task.Params
	if p.NPredict != anthropicMaxTokens || p.Temperature != 0.5 || p.TopK != 7 || fmt.Sprint(p.Stop) != "[\n\n]" || p.Grammar != nil {
		t.Errorf("params: n_predict %d temperature %v top_k %d stop %q grammar %v", p.NPredict, p.Temperature, p.TopK, p.Stop, p.Grammar != nil)
	}

	// tool_choice: auto makes the grammar lazy, from the template's call marker; any and tool
	// require a call (tool the named one), with a grammar over the whole answer.
	h = newTemplateHarness(t, hermesTemplate, nil)
	for _, tc := range []struct {
		choice string
		lazy   bool
	}{{`{"type":"auto"}`, true}, {`{"type":"any"}`, false}, {`{"type":"tool","name":"get_weather"}`, false}} {
		rec := h.do(t, "POST", "/v1/messages", `{"max_tokens":1,"tool_choice":`+tc.choice+`,`+conversation+"}")
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", tc.choice, rec.Code, rec.Body)
		}
		p := h.fake.lastTask(t).Params
		if p.Grammar == nil || !strings.Contains(p.Grammar.Source(), "get_weather") || (len(p.GrammarTriggers) > 0) != tc.lazy {
			t.Errorf("%s: grammar %v triggers %v, want lazy %v", tc.choice, p.Grammar, p.GrammarTriggers, tc.lazy)
		}
	}
}

func TestAnthropicStopSequence(t *testing.T) {
	h := newHarness(t)
	const req = `{"messages":[{"role":"user","content":"Hi"}],"stop_sequences":["little"]`
	rec := h.do(t, "POST", "/v1/messages", req+"}")
	v := decodeJSON(t, rec.Body.Bytes())
	if v["stop_reason"] != "end_turn" || v["stop_sequence"] != "little" || lookup(t, v, "content.0.text") != ", there was a " {
		t.Errorf("message %s", rec.Body)
	}
	rec = h.do(t, "POST", "/v1/messages", req+`,"stream":true}`)
	events := anthropicEvents(t, rec.Body.String())
	if md := events[len(events)-2].data; lookup(t, md, "delta.stop_sequence") != "little" || lookup(t, md, "delta.stop_reason") != "end_turn" {
		t.Errorf("message_delta %v", md)
	}
}

func TestAnthropicErrors(t *testing.T) {
	h := newHarness(t)
	for _, tt := range []struct {
		path, body, want string
	}{
		{"/v1/messages", `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"tool"}}`, `'tool_choice' of type "tool" needs a 'name'`},
		{"/v1/messages", `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"often"}}`, `'tool_choice' type must be`},
		{"/v1/messages", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":[1]}]}]}`, "messages[0].content[0].input must be an object"},
		{"/v1/messages", `{"messages":[{"role":"user","content":7}]}`, "'messages.content' must be a string or an array of content blocks"},
		{"/v1/messages/count_tokens", `{}`, "'messages' is required"},
	} {
		rec := h.do(t, "POST", tt.path, tt.body)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d: %s", tt.body, rec.Code, rec.Body)
			continue
		}
		if msg := lookup(t, decodeJSON(t, rec.Body.Bytes()), "error.message").(string); !strings.Contains(msg, tt.want) {
			t.Errorf("%s: message %q, want it to contain %q", tt.body, msg, tt.want)
		}
	}
}

// TestAnthropicImages checks llama-server's answers to images without a multimodal projector:
// an image block, or one inside a tool_result, with a base64 or url source becomes an
// image_url part that the chat parsing refuses with a 500; an image of another source is
// dropped, and the tool result keeps its text.
func TestAnthropicImages(t *testing.T) {
	h := newHarness(t)
	const noVision = "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		for _, body := range []string{
			`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}},{"type":"text","text":"What is this?"}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"http://example.com/a.png"}}]}]}`,
			`{"messages":[{"role":"user","content":"Look"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"read","input":{"file":"a.png"}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"File: a.png"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}]}`,
		} {
			rec := h.do(t, "POST", path, body)
			v := decodeJSON(t, rec.Body.Bytes())
			if rec.Code != http.StatusInternalServerError || lookup(t, v, "error.type") != "server_error" || lookup(t, v, "error.message") != noVision {
				t.Errorf("%s %s: %d %s", path, body, rec.Code, rec.Body)
			}
		}
	}

	h = newTemplateHarness(t, "", mustTemplate(t, fieldsTemplate))
	rec := h.do(t, "POST", "/v1/messages", `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}},{"type":"text","text":"Hi"}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"file"}},{"type":"text","text":"b"}]},`+
		`{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"c"},{"type":"text","text":"d"}]}]}]}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	want := "<s> [user]Hi[tool answers=t1]a\nb[tool answers=t2]cd<gen></s>"
	if got := h.fake.tok.Detokenize(h.fake.lastTask(t).Prompt, false, true); got != want {
		t.Errorf("prompt\n%q\nwant\n%q", got, want)
	}
}

// TestAnthropicEmptyMessages checks that an empty messages array is accepted, as llama-server
// does: the prompt is the template's generation prompt alone.
func TestAnthropicEmptyMessages(t *testing.T) {
	h := newTemplateHarness(t, "", mustTemplate(t, fieldsTemplate))
	rec := h.do(t, "POST", "/v1/messages", `{"model":"test","max_tokens":5,"messages":[]}`)
	v := decodeJSON(t, rec.Body.Bytes())
	if rec.Code != http.StatusOK || v["type"] != "message" || v["role"] != "assistant" {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if got := h.fake.tok.Detokenize(h.fake.lastTask(t).Prompt, false, true); got != "<s> <gen></s>" {
		t.Errorf("prompt %q", got)
	}
	rec = h.do(t, "POST", "/v1/messages/count_tokens", `{"messages":[]}`)
	if rec.Code != http.StatusOK || lookup(t, decodeJSON(t, rec.Body.Bytes()), "input_tokens").(float64) <= 0 {
		t.Errorf("count_tokens: %d %s", rec.Code, rec.Body)
	}
}

// TestAnthropicThinkingHistory: thinking blocks of earlier assistant turns reach the template
// as reasoning_content, as llama-server's convert_anthropic_to_oai passes them, so they render
// and count.
func TestAnthropicThinkingHistory(t *testing.T) {
	h := newTemplateHarness(t, "", mustTemplate(t, fieldsTemplate))
	turn := func(thinking string) string {
		return `"messages":[{"role":"user","content":"Fix the bug"},
			{"role":"assistant","content":[` + thinking + `{"type":"tool_use","id":"call_1","name":"list_files","input":{"path":"."}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"main.py"}]}]`
	}
	rec := h.do(t, "POST", "/v1/messages", `{"max_tokens":1,`+turn(`{"type":"thinking","thinking":"Check the ","signature":""},{"type":"thinking","thinking":"layout.","signature":"x"},`)+"}")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	want := `<s> [user]Fix the bug[assistant]<think>Check the layout.</think><call call_1 list_files {"path": "."}>` +
		"[tool answers=call_1]main.py<gen></s>"
	if got := h.fake.tok.Detokenize(h.fake.lastTask(t).Prompt, false, true); got != want {
		t.Errorf("prompt\n%q\nwant\n%q", got, want)
	}
	count := func(body string) float64 {
		rec := h.do(t, "POST", "/v1/messages/count_tokens", body)
		if rec.Code != http.StatusOK {
			t.Fatalf("count_tokens: status %d: %s", rec.Code, rec.Body)
		}
		return decodeJSON(t, rec.Body.Bytes())["input_tokens"].(float64)
	}
	with, without := count(`{`+turn(`{"type":"thinking","thinking":"Check the layout."},`)+`}`), count(`{`+turn("")+`}`)
	if with-without != float64(len("<think>Check the layout.</think>")) { // the fake vocabulary spends a token per character
		t.Errorf("count_tokens with thinking %v, without %v", with, without)
	}
}

// TestAnthropicTemplateKwargs: chat_template_kwargs pass through to the template, as
// llama-server's convert_anthropic_to_oai passes them.
func TestAnthropicTemplateKwargs(t *testing.T) {
	h := newTemplateHarness(t, "", mustTemplate(t, fieldsTemplate))
	rec := h.do(t, "POST", "/v1/messages", `{"max_tokens":1,"chat_template_kwargs":{"greeting":"hello"},"messages":[{"role":"user","content":"Hi"}]}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if got, want := h.fake.tok.Detokenize(h.fake.lastTask(t).Prompt, false, true), "<s> [user]Hi<greeting hello><gen></s>"; got != want {
		t.Errorf("prompt %q, want %q", got, want)
	}
}

// TestAnthropicManySystemBlocks: a system prompt of many text blocks is joined in linear time
// (adding each to a string took 9 s for 20000 blocks, a 4.5 MB request).
func TestAnthropicManySystemBlocks(t *testing.T) {
	h := newHarness(t)
	const n = 20000
	block := `{"type":"text","text":"` + strings.Repeat("a", 200) + `"}`
	body := `{"model":"x","max_tokens":1,"messages":[{"role":"user","content":"Hi"}],"system":[` +
		strings.TrimSuffix(strings.Repeat(block+",", n), ",") + `]}`
	var req gen.AnthropicMessagesRequest
	if err := req.Decode(jx.DecodeStr(body)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	g, err := anthropicGeneration(h.srv.model(), &req)
	if took := time.Since(start); err != nil || took > 2*time.Second {
		t.Fatalf("%d system blocks: %v, %v", n, took, err)
	}
	sys, _ := g.messages[0].Content.Get()
	if g.messages[0].Role != "system" || sys.String != strings.Repeat("a", 200*n) {
		t.Errorf("the system message: %s, %d bytes", g.messages[0].Role, len(sys.String))
	}
}
