package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// responsesEvents splits a responses stream into its events (anthropicEvents checks the
// framing: `event: NAME`, `data: JSON` whose type is NAME, and a blank line).
func responsesEvents(t *testing.T, body string) []anthropicEvent {
	t.Helper()
	if strings.Contains(body, "[DONE]") {
		t.Errorf("a responses stream has no [DONE]: %q", body)
	}
	return anthropicEvents(t, body)
}

// responsesSequence names the events, runs of equal deltas collapsed.
func responsesSequence(events []anthropicEvent) string {
	var seq []string
	for _, e := range events {
		if n := len(seq); n == 0 || seq[n-1] != e.name || !strings.HasSuffix(e.name, ".delta") {
			seq = append(seq, e.name)
		}
	}
	return strings.Join(seq, " ")
}

func TestResponses(t *testing.T) {
	h := newHarness(t)
	for _, path := range []string{"/v1/responses", "/responses"} {
		rec := h.do(t, "POST", path, `{"model":"gpt-4.1","input":"Hi","max_output_tokens":5}`)
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json; charset=utf-8" {
			t.Fatalf("%s: status %d: %s", path, rec.Code, rec.Body)
		}
		r := decodeJSON(t, rec.Body.Bytes())
		if keys(r) != "completed_at,created_at,id,model,object,output,status,usage" || r["object"] != "response" ||
			r["status"] != "completed" || r["model"] != "gpt-4.1" || r["completed_at"] != r["created_at"] ||
			!strings.HasPrefix(r["id"].(string), "resp_") || len(r["id"].(string)) != 37 {
			t.Errorf("%s: response %s", path, rec.Body)
		}
		item := lookup(t, r, "output.0").(map[string]any)
		if len(r["output"].([]any)) != 1 || keys(item) != "content,id,role,status,type" || item["type"] != "message" ||
			item["role"] != "assistant" || item["status"] != "completed" || !strings.HasPrefix(item["id"].(string), "msg_") {
			t.Errorf("%s: output %v", path, r["output"])
		}
		part := lookup(t, item, "content.0").(map[string]any)
		if keys(part) != "annotations,logprobs,text,type" || part["type"] != "output_text" || part["text"] != ", there was a little" {
			t.Errorf("%s: content %v", path, part)
		}
		prompt := float64(len(h.fake.lastTask(t).Prompt))
		if u := r["usage"].(map[string]any); u["input_tokens"] != prompt || u["output_tokens"] != 5.0 || u["total_tokens"] != prompt+5 ||
			lookup(t, u, "input_tokens_details.cached_tokens") != 0.0 {
			t.Errorf("%s: usage %v", path, u)
		}
	}

	// Streamed: the deltas add up to the text of the done events and of response.completed.
	rec := h.do(t, "POST", "/v1/responses", `{"input":"Hi","max_output_tokens":5,"stream":true}`)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: status %d: %s", rec.Code, rec.Body)
	}
	events := responsesEvents(t, rec.Body.String())
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.completed"
	if got := responsesSequence(events); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	id := lookup(t, events[0].data, "response.id").(string)
	msgID := lookup(t, events[2].data, "item.id").(string)
	var text strings.Builder
	var doneText any
	for _, e := range events {
		switch e.name {
		case "response.created", "response.in_progress":
			if r := e.data["response"].(map[string]any); keys(r) != "id,object,status" || r["id"] != id || r["status"] != "in_progress" {
				t.Errorf("%s %v", e.name, e.data)
			}
		case "response.output_text.delta":
			text.WriteString(e.data["delta"].(string))
			if e.data["item_id"] != msgID || e.data["timings"] != nil {
				t.Errorf("delta %v", e.data)
			}
		case "response.output_text.done", "response.content_part.done":
			if e.data["item_id"] != msgID {
				t.Errorf("%s %v", e.name, e.data)
			}
			if e.name == "response.output_text.done" {
				doneText = e.data["text"]
			}
		}
	}
	done := events[len(events)-1].data
	if text.String() != ", there was a little" || doneText != text.String() ||
		lookup(t, done, "response.output.0.content.0.text") != text.String() || lookup(t, done, "response.output.0.id") != msgID ||
		lookup(t, done, "response.id") != id || lookup(t, done, "response.usage.output_tokens") != 5.0 ||
		lookup(t, done, "timings.predicted_n") != 5.0 {
		t.Errorf("streamed %q; completed %v", text.String(), done)
	}
	if got := lookup(t, events[2].data, "item").(map[string]any); keys(got) != "content,id,role,status,type" || got["status"] != "in_progress" {
		t.Errorf("output_item.added %v", got)
	}
}

// scriptedBackend answers every task with the same results: a fake engine for the events
// the fake backend does not make (prompt progress, timings on partial results).
type scriptedBackend struct {
	*fakeBackend
	results []engine.Result
}

func (b *scriptedBackend) Submit(_ context.Context, task engine.Task) (<-chan engine.Result, error) {
	b.mu.Lock()
	b.tasks = append(b.tasks, task)
	b.mu.Unlock()
	ch := make(chan engine.Result, len(b.results))
	for _, r := range b.results {
		if r.Progress == nil || task.Params.ReturnProgress {
			ch <- r
		}
	}
	close(ch)
	return ch, nil
}

// TestResponsesTelemetry checks llama.cpp's telemetry in a responses stream, as
// test_responses_stream_with_llama_telemetry does: prompt_progress on response.in_progress
// events, timings on each step's last event with timings_per_token, and the final timings on
// response.completed.
func TestResponsesTelemetry(t *testing.T) {
	tm := func(n int) engine.Timings {
		return engine.Timings{CacheN: 3, PromptN: 7, Prompt: 7 * time.Millisecond, PredictedN: n, Predicted: time.Duration(n) * time.Millisecond}
	}
	b := &scriptedBackend{fakeBackend: newFakeBackend(t), results: []engine.Result{
		{TokensEvaluated: 10, Progress: &engine.PromptProgress{Total: 10, Cache: 3, Processed: 3}},
		{TokensEvaluated: 10, Progress: &engine.PromptProgress{Total: 10, Cache: 3, Processed: 10, Elapsed: 7 * time.Millisecond}},
		{Text: "Once", TokensEvaluated: 10, TokensPredicted: 1, Timings: tm(1)},
		{Text: " upon", TokensEvaluated: 10, TokensPredicted: 2, Timings: tm(2)},
		{Text: " a", Stop: true, StopType: engine.StopLimit, TokensEvaluated: 10, TokensPredicted: 3, Timings: tm(3)},
	}}
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(b)
	h := &harness{srv: srv, fake: b.fakeBackend, h: srv.Handler()}

	rec := h.do(t, "POST", "/responses", `{"input":"This is a test","max_output_tokens":8,"temperature":0.8,"stream":true,"timings_per_token":true,"return_progress":true}`)
	events := responsesEvents(t, rec.Body.String())
	want := "response.created response.in_progress response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.completed"
	if got := responsesSequence(events); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	if task := b.lastTask(t); !task.Params.ReturnProgress || task.Params.NPredict != 8 || task.Params.Temperature != 0.8 {
		t.Errorf("params %+v", task.Params)
	}
	var got []string
	for _, e := range events {
		line := e.name
		if p, ok := e.data["prompt_progress"].(map[string]any); ok {
			line += fmt.Sprintf(" progress=%v/%v/%v", p["processed"], p["cache"], p["total"])
		}
		if tm, ok := e.data["timings"].(map[string]any); ok {
			line += fmt.Sprintf(" predicted_n=%v cache_n=%v", tm["predicted_n"], tm["cache_n"])
			if tm["prompt_per_second"] == nil || tm["predicted_per_second"] == nil {
				t.Errorf("timings %v", tm)
			}
		}
		got = append(got, line)
	}
	wantLines := []string{
		"response.created",
		"response.in_progress progress=3/3/10",
		"response.in_progress progress=10/3/10",
		"response.output_item.added",
		"response.content_part.added",
		"response.output_text.delta predicted_n=1 cache_n=3",
		"response.output_text.delta predicted_n=2 cache_n=3",
		"response.output_text.delta",
		"response.output_text.done",
		"response.content_part.done",
		"response.output_item.done",
		"response.completed predicted_n=3 cache_n=3",
	}
	if strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantLines, "\n"))
	}
	if u := lookup(t, events[len(events)-1].data, "response.usage").(map[string]any); u["input_tokens"] != 10.0 || u["output_tokens"] != 3.0 ||
		lookup(t, u, "input_tokens_details.cached_tokens") != 3.0 {
		t.Errorf("usage %v", u)
	}

	// Without timings_per_token only response.completed has timings.
	rec = h.do(t, "POST", "/responses", `{"input":"x","stream":true}`)
	for _, e := range responsesEvents(t, rec.Body.String()) {
		if _, ok := e.data["timings"]; ok != (e.name == "response.completed") {
			t.Errorf("%s: timings %v", e.name, e.data["timings"])
		}
		if _, ok := e.data["prompt_progress"]; ok {
			t.Errorf("%s: prompt_progress without return_progress", e.name)
		}
	}
}

// TestResponsesConversion checks the chat request a responses request becomes, through the
// prompt the template renders and the generation settings.
func TestResponsesConversion(t *testing.T) {
	h := newTemplateHarness(t, "", mustTemplate(t, fieldsTemplate))
	rec := h.do(t, "POST", "/v1/responses", `{"instructions":"Be brief.","input":[
		{"role":"system","content":"Sys"},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"Weather"},{"type":"input_text","text":"in Paris?"}]},
		{"type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Checking.","annotations":[]}]},
		{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
		{"type":"function_call_output","call_id":"call_1","output":"sunny"},
		{"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"18"},{"type":"input_text","text":"C"}]},
		{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"Think."}]},
		{"type":"function_call","call_id":"call_3","name":"get_time","arguments":"{}"},
		{"role":"developer","content":"Dev"}],
	"tools":[{"type":"function","name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}},
		{"type":"web_search"}],
	"tool_choice":"none","max_output_tokens":3,"top_k":7,"seed":42,"temperature":0.5,"reasoning":{"effort":"low"}}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	task := h.fake.lastTask(t)
	want := "<s> [system]Be brief.[system]Sys[user]Weather\nin Paris?" +
		`[assistant]Checking.<call call_1 get_weather {"city": "Paris"}>` +
		"[tool answers=call_1]sunny[tool answers=call_2]18\nC" +
		`[assistant]<think>Think.</think><call call_3 get_time {}>` +
		"[system]Dev" + // chat's developer role is the system's
		`<tools [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]>` +
		"<gen></s>"
	if got := h.fake.tok.Detokenize(task.Prompt, false, true); got != want {
		t.Errorf("prompt\n%q\nwant\n%q", got, want)
	}
	if p := task.Params; p.NPredict != 3 || p.TopK != 7 || p.Seed != 42 || p.Temperature != 0.5 {
		t.Errorf("params: n_predict %d top_k %d seed %d temperature %v", p.NPredict, p.TopK, p.Seed, p.Temperature)
	}
}

func TestResponsesErrors(t *testing.T) {
	h := newHarness(t)
	for _, tt := range []struct{ body, want string }{
		{`{}`, "'input' is required"},
		{`{"input":"x","previous_response_id":"resp_1"}`, "llama.cpp does not support 'previous_response_id'."},
		{`{"input":7}`, "'input' must be a string or array of objects"},
		{`{"input":[{"role":"user","content":[{"type":"input_text"}]}]}`, "'Input text' requires 'text'"},
		{`{"input":[{"role":"user","content":[{"type":"input_image"}]}]}`, "'image_url' is required"},
		{`{"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "'input_file' is not supported by llamacpp at this moment"},
		{`{"input":[{"role":"user","content":[{"type":"audio"}]}]}`, "'type' must be one of 'input_text', 'input_image', or 'input_file'"},
		{`{"input":[{"type":"message","role":"assistant","content":[{"type":"output_text"}]}]}`, "'Output text' requires 'text'"},
		{`{"input":[{"type":"message","role":"assistant","content":[{"type":"refusal"}]}]}`, "'Refusal' requires 'refusal'"},
		{`{"input":[{"type":"message","role":"assistant","content":[{"type":"image"}]}]}`, "'type' must be one of 'output_text' or 'refusal'"},
		{`{"input":[{"type":"function_call_output","call_id":"a","output":[{"type":"image"}]}]}`, "Output of tool call should be 'Input text'"},
		{`{"input":[{"type":"reasoning","summary":[]}]}`, "item['content'] is not an array"},
		{`{"input":[{"type":"reasoning","summary":[],"content":[]}]}`, "item['content'] is empty"},
		{`{"input":[{"type":"reasoning","summary":[],"content":[{"text":1}]}]}`, "item['content']['text'] is not a string"},
		{`{"input":[{"type":"function_call","call_id":"a","name":"f"}]}`, "Cannot determine type of 'item'"},
		{`{"input":[{"type":"mystery"}]}`, "Cannot determine type of 'item'"},
		{`{"input":[5]}`, "Cannot determine type of 'item'"},
		{`{"input":"x","top_k":"many"}`, "'top_k' must be"},
		{`{"input":"x","max_output_tokens":"a"}`, "'max_output_tokens' must be an integer"},
	} {
		rec := h.do(t, "POST", "/v1/responses", tt.body)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d: %s", tt.body, rec.Code, rec.Body)
			continue
		}
		if msg := lookup(t, decodeJSON(t, rec.Body.Bytes()), "error.message").(string); !strings.Contains(msg, tt.want) {
			t.Errorf("%s: message %q, want it to contain %q", tt.body, msg, tt.want)
		}
	}
	// An image needs a multimodal projector: llama-server's 500.
	rec := h.do(t, "POST", "/v1/responses", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AA=="}]}]}`)
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "image input is not supported") {
		t.Errorf("image: %d %s", rec.Code, rec.Body)
	}
}

// TestResponsesToolCalls checks reasoning, message and function_call items, whole and
// streamed, from a fake model writing a Hermes 2 Pro answer.
func TestResponsesToolCalls(t *testing.T) {
	h := newTemplateHarness(t, hermesTemplate, nil)
	h.fake.output = []string{"<think>Weather needs", " a tool.</think>", "I will check.", "\n<tool_call>\n{\"name\": \"get_weather\", ",
		"\"arguments\": {\"city\":", " \"Paris\"}}\n</tool_call>"}
	const req = `{"input":"Weather in Paris?","max_output_tokens":64,
		"tools":[{"type":"function","name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`

	rec := h.do(t, "POST", "/v1/responses", req+"}")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	out := decodeJSON(t, rec.Body.Bytes())["output"].([]any)
	if len(out) != 3 {
		t.Fatalf("output %s", rec.Body)
	}
	rs, msg, fc := out[0].(map[string]any), out[1].(map[string]any), out[2].(map[string]any)
	if keys(rs) != "content,encrypted_content,id,status,summary,type" || rs["type"] != "reasoning" || !strings.HasPrefix(rs["id"].(string), "rs_") ||
		lookup(t, rs, "content.0.text") != "Weather needs a tool." || lookup(t, rs, "content.0.type") != "reasoning_text" {
		t.Errorf("reasoning %v", rs)
	}
	if msg["type"] != "message" || lookup(t, msg, "content.0.text") != "I will check.\n" {
		t.Errorf("message %v", msg)
	}
	callID := strings.TrimPrefix(fc["id"].(string), "fc_")
	if keys(fc) != "arguments,call_id,id,name,status,type" || fc["type"] != "function_call" || fc["name"] != "get_weather" ||
		fc["arguments"] != `{"city": "Paris"}` || fc["call_id"] != "call_"+callID || len(callID) != 32 || fc["status"] != "completed" {
		t.Errorf("function_call %v", fc)
	}

	rec = h.do(t, "POST", "/v1/responses", req+`,"stream":true}`)
	events := responsesEvents(t, rec.Body.String())
	want := "response.created response.in_progress response.output_item.added response.reasoning_text.delta " +
		"response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_item.added response.function_call_arguments.delta " +
		"response.output_item.done response.output_text.done response.content_part.done response.output_item.done " +
		"response.output_item.done response.completed"
	if got := responsesSequence(events); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	var reasoning, text, args strings.Builder
	var fcID string
	for _, e := range events {
		switch e.name {
		case "response.reasoning_text.delta":
			reasoning.WriteString(e.data["delta"].(string))
		case "response.output_text.delta":
			text.WriteString(e.data["delta"].(string))
		case "response.function_call_arguments.delta":
			args.WriteString(e.data["delta"].(string))
			if e.data["item_id"] != fcID {
				t.Errorf("arguments delta %v, item %s", e.data, fcID)
			}
		case "response.output_item.added":
			if lookup(t, e.data, "item.type") == "function_call" {
				fcID = lookup(t, e.data, "item.id").(string)
				if lookup(t, e.data, "item.arguments") != "" || lookup(t, e.data, "item.status") != "in_progress" {
					t.Errorf("function_call added %v", e.data)
				}
			}
		}
	}
	if reasoning.String() != "Weather needs a tool." || text.String() != "I will check.\n" || args.String() != `{"city": "Paris"}` {
		t.Errorf("streamed reasoning %q, text %q, arguments %q", reasoning.String(), text.String(), args.String())
	}
	done := events[len(events)-1].data
	if lookup(t, done, "response.output.2.id") != fcID || lookup(t, done, "response.output.2.arguments") != `{"city": "Paris"}` {
		t.Errorf("completed %v", done)
	}
}

// TestResponsesManyAssistantItems: consecutive assistant items join one chat message in time
// linear in the items (re-encoding the message for each took 3.5 s for 5000 items, 44 s for
// 20000, a 1.7 MB request).
func TestResponsesManyAssistantItems(t *testing.T) {
	const n = 10000
	var b strings.Builder
	b.WriteString(`{"input":[{"role":"user","content":"Hi"}`)
	for i := range n {
		fmt.Fprintf(&b, `,{"role":"assistant","type":"message","content":[{"type":"output_text","text":"%d"}]}`, i)
		fmt.Fprintf(&b, `,{"type":"function_call","call_id":"c%d","name":"f","arguments":"{}"}`, i)
	}
	b.WriteString(`]}`)
	var req gen.ResponsesRequest
	if err := req.Decode(jx.DecodeStr(b.String())); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	body, err := responsesToChat(&req)
	if took := time.Since(start); err != nil || took > 3*time.Second {
		t.Fatalf("converting %d assistant items: %v, %v", 2*n, took, err)
	}
	var chat struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &chat); err != nil {
		t.Fatal(err)
	}
	if len(chat.Messages) != 2 || chat.Messages[1].Role != "assistant" {
		t.Fatalf("%d messages, want user and one assistant", len(chat.Messages))
	}
	a := chat.Messages[1]
	if len(a.Content) != n || a.Content[n-1].Text != fmt.Sprint(n-1) || len(a.ToolCalls) != n || a.ToolCalls[n-1].ID != fmt.Sprintf("c%d", n-1) {
		t.Errorf("the assistant message: %d parts (last %+v), %d calls", len(a.Content), a.Content[len(a.Content)-1], len(a.ToolCalls))
	}
}
