package server

import (
	"math"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// The generation rates count decode steps, as llama-server's: the first token comes with the
// prompt's logits, so one token has no rate and 16 tokens are 15 steps.
func TestTimingsRatesCountDecodeSteps(t *testing.T) {
	one := timings(engine.Timings{PredictedN: 1, Predicted: 3 * time.Millisecond})
	if one.PredictedPerSecond != 0 || one.PredictedPerTokenMs != 0 || one.PredictedMs != 3 {
		t.Errorf("one token: per second %v, per token %v ms, %v ms", one.PredictedPerSecond, one.PredictedPerTokenMs, one.PredictedMs)
	}
	many := timings(engine.Timings{PredictedN: 16, Predicted: 30 * time.Millisecond, PromptN: 4, Prompt: 8 * time.Millisecond})
	if math.Abs(many.PredictedPerSecond-500) > 1e-9 || many.PredictedPerTokenMs != 2 {
		t.Errorf("16 tokens in 30 ms: per second %v, per token %v ms; want %v, 2", many.PredictedPerSecond, many.PredictedPerTokenMs, 500.0)
	}
	if many.PromptPerSecond != 500 || many.PromptPerTokenMs != 2 {
		t.Errorf("prompt of 4 in 8 ms: per second %v, per token %v ms", many.PromptPerSecond, many.PromptPerTokenMs)
	}
	none := timings(engine.Timings{})
	if none.PredictedPerSecond != 0 || none.PredictedPerTokenMs != 0 || none.PromptPerSecond != 0 {
		t.Errorf("nothing timed: %+v", none)
	}
}

// TestChatTimingsPerToken checks that with timings_per_token every streamed chat chunk that
// carries text has the timings so far, as llama-server's; without it only the last has them.
func TestChatTimingsPerToken(t *testing.T) {
	h := newHarnessConfig(t, Config{Alias: "stories260K"})
	h.fake.output = []string{"Hel", "lo", "."}
	for _, perToken := range []bool{true, false} {
		body := `{"messages":[{"role":"user","content":"Hi"}],"stream":true`
		if perToken {
			body += `,"timings_per_token":true`
		}
		rec := h.do(t, "POST", "/v1/chat/completions", body+"}")
		events := jsonEvents(t, sseEvents(t, rec.Body.String()))
		var text, timed int
		for _, ev := range events {
			choices, _ := ev["choices"].([]any)
			if len(choices) == 0 {
				continue
			}
			d := choices[0].(map[string]any)["delta"].(map[string]any)
			_, hasTimings := ev["timings"].(map[string]any)
			if _, ok := d["content"].(string); ok {
				text++
				if hasTimings {
					timed++
				}
			}
		}
		last := events[len(events)-1]
		if _, ok := last["timings"].(map[string]any); text != 3 || !ok {
			t.Fatalf("timings_per_token %v: %d text chunks, last %v", perToken, text, last)
		}
		if want := map[bool]int{true: 3, false: 0}[perToken]; timed != want {
			t.Errorf("timings_per_token %v: %d of %d text chunks have timings, want %d", perToken, timed, text, want)
		}
	}
}
