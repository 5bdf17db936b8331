package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestCompletionStreamTokensOnce: a streamed /completion with return_tokens sends every
// generated id once, in the partial events, and ends with a final event whose tokens is [] (as
// llama-server's); the ids collected are exactly the non-streamed answer's tokens.
func TestCompletionStreamTokensOnce(t *testing.T) {
	for _, tc := range []struct{ name, fields string }{
		{"limit", `"n_predict":8`},
		{"stop word", `"stop":["Lily"]`}, // the held-back token comes with the final result
		{"eos", `"n_predict":-1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			body := `{"prompt":"Once upon a time","return_tokens":true,` + tc.fields
			rec := h.do(t, "POST", "/completion", body+"}")
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var want []int32
			for _, id := range decodeJSON(t, rec.Body.Bytes())["tokens"].([]any) {
				want = append(want, int32(id.(float64)))
			}
			if len(want) == 0 {
				t.Fatal("the non-streamed answer has no tokens")
			}

			rec = h.do(t, "POST", "/completion", body+`,"stream":true}`)
			if rec.Code != http.StatusOK {
				t.Fatalf("stream status %d: %s", rec.Code, rec.Body)
			}
			events := jsonEvents(t, sseEvents(t, rec.Body.String()))
			var got []int32
			for _, ev := range events[:len(events)-1] {
				for _, id := range ev["tokens"].([]any) {
					got = append(got, int32(id.(float64)))
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("ids of the partial events = %v, want %v", got, want)
			}
			final := events[len(events)-1]
			if tokens, ok := final["tokens"].([]any); final["stop"] != true || !ok || len(tokens) != 0 {
				t.Errorf("final event: stop %v tokens %v, want true and []", final["stop"], final["tokens"])
			}
			if strings.Count(rec.Body.String(), `"tokens":[]`) != 1 {
				t.Errorf(`want exactly one "tokens":[] event, the final one: %s`, rec.Body)
			}
		})
	}
}
