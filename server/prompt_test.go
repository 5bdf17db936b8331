package server

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestNativeSeveralPrompts: as llama-server's tokenize_input_prompts, an array without token
// ids holds several prompts (strings, token arrays, JSON prompt objects), each completed and
// answered in one JSON array in order; an array with token ids is one prompt of ids and strings.
func TestNativeSeveralPrompts(t *testing.T) {
	h := newHarness(t)
	tok := h.fake.tok
	ids := tok.Encode("Once upon a time", true, true)
	idsJSON := make([]string, len(ids))
	for i, id := range ids {
		idsJSON[i] = strconv.Itoa(int(id))
	}
	body := `{"n_predict":3,"prompt":["Once upon a time",[` + strings.Join(idsJSON, ",") + `],{"prompt_string":"Once upon a time"}]}`
	rec := h.do(t, http.MethodPost, "/completion", body)
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	answers, ok := decodeAny(t, rec.Body.Bytes()).([]any)
	if !ok || len(answers) != 3 {
		t.Fatalf("want an array of 3 completions: %s", rec.Body)
	}
	first := answers[0].(map[string]any)
	for i, a := range answers {
		a := a.(map[string]any)
		if a["index"] != float64(i) || a["content"] != first["content"] || a["prompt"] != "<s> Once upon a time" || a["tokens_evaluated"] != float64(len(ids)) {
			t.Errorf("answer %d: index %v content %q prompt %q evaluated %v; first %q", i, a["index"], a["content"], a["prompt"], a["tokens_evaluated"], first["content"])
		}
	}
	h.fake.mu.Lock()
	tasks := slices.Clone(h.fake.tasks)
	h.fake.mu.Unlock()
	if len(tasks) != 3 {
		t.Fatalf("%d tasks, want 3", len(tasks))
	}
	for i, task := range tasks {
		if !slices.Equal(task.Prompt, ids) {
			t.Errorf("task %d prompt %v, want %v", i, task.Prompt, ids)
		}
	}

	// One prompt of ids and strings: only a leading string would get BOS.
	rec = h.do(t, http.MethodPost, "/completion", `{"n_predict":1,"prompt":[1,"Once",2,"upon"]}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("mixed: %d %s", rec.Code, rec.Body)
	}
	want := append(append(append([]int32{1}, tok.Encode("Once", false, true)...), 2), tok.Encode("upon", false, true)...)
	if got := h.fake.lastTask(t).Prompt; !slices.Equal(got, want) {
		t.Errorf("mixed prompt %v, want %v", got, want)
	}

	// A JSON prompt object alone is one prompt, answered with one object.
	rec = h.do(t, http.MethodPost, "/completion", `{"n_predict":1,"prompt":{"prompt_string":"Once upon a time"}}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("object: %d %s", rec.Code, rec.Body)
	}
	if _, isObject := decodeAny(t, rec.Body.Bytes()).(map[string]any); !isObject || !slices.Equal(h.fake.lastTask(t).Prompt, ids) {
		t.Errorf("object prompt: %s, tokens %v", rec.Body, h.fake.lastTask(t).Prompt)
	}

	for _, bad := range []struct{ body, want string }{
		{`{"prompt":{"prompt_string":"a <__media__>","multimodal_data":["iVBORw0KGgo="]}}`, "'prompt.multimodal_data': Multimodal data provided, but model does not support multimodal requests."},
		{`{"prompt":["a",{"prompt_string":"b","multimodal_data":["AA=="]}]}`, "'prompt[1].multimodal_data'"},
		{`{"prompt":[1,{"prompt_string":"b"}]}`, "'prompt[1]': a prompt of token ids may hold only token ids and strings"},
		{`{"prompt":["a",[]]}`, "the prompt is empty"},
		{`{"prompt":{"multimodal_data":[]}}`, "prompt_string"},
	} {
		rec := h.do(t, http.MethodPost, "/completion", bad.body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), bad.want) {
			t.Errorf("%s: %d %s, want 400 with %q", bad.body, rec.Code, rec.Body, bad.want)
		}
	}
}
