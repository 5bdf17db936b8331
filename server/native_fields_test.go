package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/go-faster/jx"
)

// TestCompletionResponseFields: response_fields keeps the fields named, in that order, under the
// names given ("a/b" nested), leaving out names that match nothing, as llama-server's
// json_get_nested_values; on every native endpoint.
func TestCompletionResponseFields(t *testing.T) {
	for _, c := range []struct{ fields, want string }{
		{`["content","generation_settings/n_predict","timings/nope","stop_type","missing","content"]`,
			`{"content":", there","generation_settings/n_predict":2,"stop_type":"limit"}`},
		{`["timings/predicted_n","id_slot","tokens_predicted/x","generation_settings/logit_bias"]`,
			`{"timings/predicted_n":2,"id_slot":0,"generation_settings/logit_bias":[]}`},
		{`["nothing"]`, `{}`},
		{`["", "/"]`, `{}`},
	} {
		for _, path := range []string{"/completion", "/completions"} {
			h := newHarness(t)
			rec := h.do(t, http.MethodPost, path, `{"prompt":"Once","n_predict":2,"response_fields":`+c.fields+`}`)
			if rec.Code != http.StatusOK || rec.Body.String() != c.want {
				t.Errorf("%s %s: %d %s, want %s", path, c.fields, rec.Code, rec.Body, c.want)
			}
		}
	}
	// An empty list, or null, keeps everything.
	for _, fields := range []string{`[]`, `null`} {
		h := newHarness(t)
		v := decodeJSON(t, h.do(t, http.MethodPost, "/completion", `{"prompt":"Once","n_predict":2,"response_fields":`+fields+`}`).Body.Bytes())
		if v["content"] != ", there" || v["generation_settings"] == nil {
			t.Errorf("response_fields %s: %v", fields, v)
		}
	}
	h := newHarness(t)
	rec := h.do(t, http.MethodPost, "/completion", `{"prompt":"Once","response_fields":"content"}`)
	if want := `{"error":{"code":400,"message":"'response_fields' must be an array of strings (or null)","type":"invalid_request_error"}}`; rec.Body.String() != want {
		t.Errorf("a string: %d %s, want %s", rec.Code, rec.Body, want)
	}
	// Infill answers as /completion does (on a vocabulary with fill-in-the-middle tokens).
	fim := newVocabHarness(t, Config{}, "vocab", "ggml-vocab-deepseek-coder.gguf")
	rec = fim.do(t, http.MethodPost, "/infill", `{"input_prefix":"a","input_suffix":"b","n_predict":1,"response_fields":["stop","tokens_predicted"]}`)
	if want := `{"stop":true,"tokens_predicted":1}`; rec.Body.String() != want {
		t.Errorf("infill: %d %s, want %s", rec.Code, rec.Body, want)
	}
}

// TestCompletionResponseFieldsStream: the final event of a stream is filtered, the partial
// events are not.
func TestCompletionResponseFieldsStream(t *testing.T) {
	h := newHarness(t)
	rec := h.do(t, http.MethodPost, "/completion", `{"prompt":"Once","n_predict":2,"stream":true,"response_fields":["stop","stop_type"]}`)
	want := []string{
		`{"index":0,"content":",","tokens":[271],"stop":false,"id_slot":-1,"tokens_predicted":1,"tokens_evaluated":6}`,
		`{"index":0,"content":" there","tokens":[354],"stop":false,"id_slot":-1,"tokens_predicted":2,"tokens_evaluated":6}`,
		`{"stop":true,"stop_type":"limit"}`,
	}
	got := sseEvents(t, rec.Body.String())
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %s", len(got), len(want), rec.Body)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: %s, want %s", i, got[i], want[i])
		}
	}
}

// TestPickFields covers json_get_nested_values' corners: paths through arrays, strings and
// null name nothing; a repeated path keeps its first place.
func TestPickFields(t *testing.T) {
	doc := rawJSON(`{"a":{"b":[1,2],"c":null,"d":{"e":"x"}},"s":"str","n":0}`)
	for _, c := range []struct {
		paths []string
		want  string
	}{
		{[]string{"a/d/e", "n", "a/b", "a/c"}, `{"a/d/e":"x","n":0,"a/b":[1,2],"a/c":null}`},
		{[]string{"a/b/0", "s/x", "a/c/x", "a/d/e/x", "A"}, `{}`},
		{[]string{"n", "s", "n"}, `{"n":0,"s":"str"}`},
		{[]string{"a/d"}, `{"a/d":{"e":"x"}}`},
	} {
		var e jx.Encoder
		pickFields(doc, c.paths).Encode(&e)
		if string(e.Bytes()) != c.want {
			t.Errorf("%v: %s, want %s", c.paths, e.Bytes(), c.want)
		}
	}
	if got := pickFields(doc, nil); string(got.(rawJSON)) != string(doc) {
		t.Errorf("no paths: %s", got)
	}
}

// TestCompletionSeveral: n_cmpl (or n) completes the prompt that many times, answered as an
// array of completions with their index, or streamed with each completion's events under its
// index and one final event each.
func TestCompletionSeveral(t *testing.T) {
	for _, field := range []string{`"n_cmpl":2`, `"n":2`} {
		h := newHarness(t)
		rec := h.do(t, http.MethodPost, "/completion", `{"prompt":"Once","n_predict":2,`+field+`}`)
		var got []map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got) != 2 {
			t.Fatalf("%s: %d %s, want an array of 2", field, rec.Code, rec.Body)
		}
		for i, c := range got {
			if c["index"] != float64(i) || c["content"] != ", there" || c["stop"] != true || c["tokens_predicted"] != 2.0 {
				t.Errorf("%s: completion %d = %v", field, i, c)
			}
		}
		if len(h.fake.tasks) != 2 {
			t.Errorf("%s: %d tasks, want 2", field, len(h.fake.tasks))
		}
	}

	h := newHarness(t)
	rec := h.do(t, http.MethodPost, "/completion", `{"prompt":"Once","n_predict":2,"n_cmpl":2,"response_fields":["index","content"]}`)
	if want := `[{"index":0,"content":", there"},{"index":1,"content":", there"}]`; rec.Body.String() != want {
		t.Errorf("with response_fields: %s, want %s", rec.Body, want)
	}

	rec = h.do(t, http.MethodPost, "/completion", `{"prompt":"Once","n_predict":2,"n_cmpl":2,"stream":true}`)
	content := map[float64]string{}
	finals := map[float64]int{}
	for _, ev := range jsonEvents(t, sseEvents(t, rec.Body.String())) {
		i := ev["index"].(float64)
		if ev["stop"] == true {
			finals[i]++
			continue
		}
		content[i] += ev["content"].(string)
	}
	if content[0] != ", there" || content[1] != ", there" || finals[0] != 1 || finals[1] != 1 || len(finals) != 2 {
		t.Errorf("stream: contents %v, finals %v: %s", content, finals, rec.Body)
	}

	for _, c := range []struct{ body, want string }{
		{`{"prompt":"Once","n_cmpl":3}`, "n_cmpl cannot be greater than the number of slots, please increase -np"},
		{`{"prompt":"Once","n":3}`, "n_cmpl cannot be greater than the number of slots, please increase -np"},
		{`{"prompt":"Once","n_cmpl":0}`, "'n_cmpl' must be at least 1 (got 0)"},
		{`{"prompt":"x","n_cmpl":3}`, "n_cmpl cannot be greater than the number of slots, please increase -np"},
	} {
		for _, path := range []string{"/completion", "/v1/completions"} {
			rec := h.do(t, http.MethodPost, path, c.body)
			if got := lookup(t, decodeJSON(t, rec.Body.Bytes()), "error.message"); rec.Code != http.StatusBadRequest || got != c.want {
				t.Errorf("%s %s: %d %v, want 400 %q", path, c.body, rec.Code, got, c.want)
			}
		}
	}
	// OpenAI's endpoint reads n_cmpl too.
	rec = h.do(t, http.MethodPost, "/v1/completions", `{"prompt":"Once","max_tokens":2,"n_cmpl":2}`)
	if n := len(lookup(t, decodeJSON(t, rec.Body.Bytes()), "choices").([]any)); n != 2 {
		t.Errorf("/v1/completions with n_cmpl 2: %d choices: %s", n, rec.Body)
	}
}
