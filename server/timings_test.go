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
