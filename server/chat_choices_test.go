package server

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

const chatHi = `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3`

// TestChatLogprobsFields: as llama-server's oaicompat_chat_params_parse, logprobs without
// top_logprobs asks for 20 candidates, top_logprobs sets the count, and a non-null
// top_logprobs without "logprobs": true is refused.
func TestChatLogprobsFields(t *testing.T) {
	for _, c := range []struct {
		fields string
		nProbs int
	}{
		{``, 0},
		{`,"logprobs":true`, 20},
		{`,"logprobs":true,"top_logprobs":null`, 20},
		{`,"logprobs":true,"top_logprobs":3`, 3},
		{`,"logprobs":true,"top_logprobs":0`, 0},
		{`,"logprobs":false`, 0},
		{`,"top_logprobs":null`, 0},
		{`,"n_probs":5`, 5}, // llama-server's native field, copied into the task
		{`,"logprobs":true,"top_logprobs":2,"n_probs":5`, 2},
	} {
		h := newHarness(t)
		rec := h.do(t, http.MethodPost, "/v1/chat/completions", chatHi+c.fields+`}`)
		if rec.Code != http.StatusOK {
			t.Errorf("%s: status %d: %s", c.fields, rec.Code, rec.Body)
			continue
		}
		if got := h.fake.lastTask(t).Params.NProbs; got != c.nProbs {
			t.Errorf("%s: n_probs %d, want %d", c.fields, got, c.nProbs)
		}
		// No probabilities, no logprobs field (llama-server adds it only when it has some).
		if choice := lookup(t, decodeJSON(t, rec.Body.Bytes()), "choices.0").(map[string]any); c.nProbs == 0 {
			if _, ok := choice["logprobs"]; ok {
				t.Errorf("%s: a logprobs field without probabilities: %s", c.fields, rec.Body)
			}
		}
	}
	const refused = `{"error":{"code":400,"message":"top_logprobs requires logprobs to be set to true","type":"invalid_request_error"}}`
	for _, fields := range []string{`,"top_logprobs":2`, `,"logprobs":false,"top_logprobs":2`, `,"logprobs":null,"top_logprobs":0`} {
		h := newHarness(t)
		rec := h.do(t, http.MethodPost, "/v1/chat/completions", chatHi+fields+`}`)
		if rec.Code != http.StatusBadRequest || rec.Body.String() != refused {
			t.Errorf("%s: %d %s, want 400 %s", fields, rec.Code, rec.Body, refused)
		}
	}
}

// TestChatLogprobsDefaultEngine: on the real engine, logprobs alone lists 20 candidates per
// token, and top_logprobs 0 leaves the choice without logprobs, as llama-server.
func TestChatLogprobsDefaultEngine(t *testing.T) {
	b := enginetest.Load(t, "models", "stories260K.gguf")
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(b)
	h := &harness{srv: srv, h: srv.Handler()}
	rec := h.do(t, http.MethodPost, "/v1/chat/completions", chatHi+`,"temperature":0,"logprobs":true}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	steps := lookup(t, decodeJSON(t, rec.Body.Bytes()), "choices.0.logprobs.content").([]any)
	if len(steps) != 3 {
		t.Fatalf("%d steps, want 3: %s", len(steps), rec.Body)
	}
	for i, s := range steps {
		if top := s.(map[string]any)["top_logprobs"].([]any); len(top) != 20 {
			t.Errorf("step %d lists %d candidates, want 20", i, len(top))
		}
	}
	rec = h.do(t, http.MethodPost, "/v1/chat/completions", chatHi+`,"temperature":0,"logprobs":true,"top_logprobs":0}`)
	if _, ok := lookup(t, decodeJSON(t, rec.Body.Bytes()), "choices.0").(map[string]any)["logprobs"]; rec.Code != http.StatusOK || ok {
		t.Errorf("top_logprobs 0: %d %s, want 200 without logprobs", rec.Code, rec.Body)
	}
}

// TestChatSeveralChoices: n (or n_cmpl) runs that many generations, answered as choices 0..n-1
// with the usage summed; more than the slots, or fewer than 1, is refused.
func TestChatSeveralChoices(t *testing.T) {
	h := newHarness(t)
	one := decodeJSON(t, h.do(t, http.MethodPost, "/v1/chat/completions", chatHi+`}`).Body.Bytes())
	text := lookup(t, one, "choices.0.message.content").(string)
	if text != ", there was" {
		t.Fatalf("one choice says %q", text)
	}
	for _, field := range []string{`"n":2`, `"n_cmpl":2`, `"n":1,"n_cmpl":2`} {
		h := newHarness(t)
		rec := h.do(t, http.MethodPost, "/v1/chat/completions", chatHi+`,`+field+`}`)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", field, rec.Code, rec.Body)
		}
		v := decodeJSON(t, rec.Body.Bytes())
		choices := v["choices"].([]any)
		if len(choices) != 2 {
			t.Fatalf("%s: %d choices, want 2: %s", field, len(choices), rec.Body)
		}
		for i := range choices {
			c := choices[i].(map[string]any)
			if c["index"] != float64(i) || lookup(t, c, "message.content") != text || c["finish_reason"] != "length" {
				t.Errorf("%s: choice %d = %v", field, i, c)
			}
		}
		want := map[string]any{}
		for _, k := range []string{"prompt_tokens", "completion_tokens", "total_tokens"} {
			want[k] = 2 * lookup(t, one, "usage."+k).(float64)
		}
		want["prompt_tokens_details"] = map[string]any{"cached_tokens": 0.0}
		if got := v["usage"]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: usage %v, want %v", field, got, want)
		}
		if lookup(t, v, "timings.predicted_n") != 6.0 {
			t.Errorf("%s: timings %v, want predicted_n 6", field, v["timings"])
		}
		if n := len(h.fake.tasks); n != 2 {
			t.Errorf("%s: %d tasks submitted, want 2", field, n)
		}
	}
	for _, c := range []struct{ fields, want string }{
		{`"n":3`, `{"error":{"code":400,"message":"n_cmpl cannot be greater than the number of slots, please increase -np","type":"invalid_request_error"}}`},
		{`"n_cmpl":3,"n":1`, `{"error":{"code":400,"message":"n_cmpl cannot be greater than the number of slots, please increase -np","type":"invalid_request_error"}}`},
		{`"n":0`, `{"error":{"code":400,"message":"'n' must be at least 1 (got 0)","type":"invalid_request_error"}}`},
		{`"n_cmpl":0`, `{"error":{"code":400,"message":"'n_cmpl' must be at least 1 (got 0)","type":"invalid_request_error"}}`},
	} {
		h := newHarness(t)
		rec := h.do(t, http.MethodPost, "/v1/chat/completions", chatHi+`,`+c.fields+`}`)
		if rec.Code != http.StatusBadRequest || rec.Body.String() != c.want {
			t.Errorf("%s: %d %s, want 400 %s", c.fields, rec.Code, rec.Body, c.want)
		}
	}
}

// TestChatSeveralChoicesStream: each choice streams its role chunk, its content and its finish
// chunk under its own index; the usage chunk sums them; one [DONE] ends the stream.
func TestChatSeveralChoicesStream(t *testing.T) {
	h := newHarness(t)
	rec := h.do(t, http.MethodPost, "/v1/chat/completions", chatHi+`,"n":2,"stream":true,"stream_options":{"include_usage":true}}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	payloads := sseEvents(t, rec.Body.String())
	if payloads[len(payloads)-1] != "[DONE]" || strings.Count(rec.Body.String(), "[DONE]") != 1 {
		t.Fatalf("the stream does not end with one [DONE]: %s", rec.Body)
	}
	events := jsonEvents(t, payloads)
	id := events[0]["id"]
	type seen struct {
		role, finish string
		content      strings.Builder
		chunks       int
	}
	var got [2]seen
	for i, ev := range events[:len(events)-1] {
		if ev["id"] != id || ev["object"] != "chat.completion.chunk" {
			t.Errorf("chunk %d: id %v object %v", i, ev["id"], ev["object"])
		}
		choices := ev["choices"].([]any)
		if len(choices) != 1 {
			t.Fatalf("chunk %d has %d choices: %v", i, len(choices), ev)
		}
		c := choices[0].(map[string]any)
		s := &got[int(c["index"].(float64))]
		delta := c["delta"].(map[string]any)
		switch {
		case s.chunks == 0:
			if delta["role"] != "assistant" || delta["content"] != nil {
				t.Errorf("choice %v starts with %v, want the role chunk", c["index"], delta)
			}
		case c["finish_reason"] != nil:
			s.finish = c["finish_reason"].(string)
			if len(delta) != 0 {
				t.Errorf("finish chunk with delta %v", delta)
			}
		default:
			s.content.WriteString(delta["content"].(string))
		}
		s.chunks++
	}
	for i := range got {
		if got[i].content.String() != ", there was" || got[i].finish != "length" {
			t.Errorf("choice %d: content %q finish %q", i, got[i].content.String(), got[i].finish)
		}
	}
	last := events[len(events)-1]
	if len(last["choices"].([]any)) != 0 || lookup(t, last, "usage.completion_tokens") != 6.0 || lookup(t, last, "timings.predicted_n") != 6.0 {
		t.Errorf("usage chunk %v, want no choices, 6 completion tokens", last)
	}
}

// TestChatIDSlot: id_slot reaches the engine for the first choice only (-1 is any slot).
func TestChatIDSlot(t *testing.T) {
	one := 1
	for _, c := range []struct {
		fields string
		want   []*int
	}{
		{`"id_slot":1`, []*int{&one}},
		{`"id_slot":1,"n":2`, []*int{&one, nil}},
		{`"id_slot":-1`, []*int{nil}},
		{`"id_slot":null`, []*int{nil}},
		{``, []*int{nil}},
	} {
		h := newHarness(t)
		if rec := h.do(t, http.MethodPost, "/v1/chat/completions", strings.TrimSuffix(chatHi+`,`+c.fields, ",")+`}`); rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", c.fields, rec.Code, rec.Body)
		}
		var got []*int
		for _, task := range h.fake.tasks {
			got = append(got, task.Slot)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: slots %v, want %v", c.fields, got, c.want)
		}
	}
}

// TestChatSeveralChoicesResumable: a resumable stream carries every choice, and GET
// /v1/stream/{id} replays the same bytes.
func TestChatSeveralChoicesResumable(t *testing.T) {
	h := newHarness(t)
	rec := h.doWith(t, http.MethodPost, "/v1/chat/completions", chatHi+`,"n":2,"stream":true}`, conversation("two"))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	finished := map[float64]bool{}
	for _, ev := range jsonEvents(t, sseEvents(t, rec.Body.String())) {
		c := ev["choices"].([]any)[0].(map[string]any)
		if c["finish_reason"] != nil {
			finished[c["index"].(float64)] = true
		}
	}
	if !finished[0] || !finished[1] || len(finished) != 2 {
		t.Errorf("finished choices %v, want 0 and 1: %s", finished, rec.Body)
	}
	if replay := h.do(t, http.MethodGet, "/v1/stream/two", ""); replay.Body.String() != rec.Body.String() {
		t.Errorf("replay %q, want %q", replay.Body, rec.Body)
	}
}
