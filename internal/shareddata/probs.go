package shareddata

import (
	"encoding/json"
	"os"
	"testing"
)

// Probs is llama-server's answer to a greedy /completion with n_probs and return_tokens, as
// the shared references keep it (FILE.probs.json): the generated ids and llama.cpp's top
// log-probabilities at each step.
type Probs struct {
	Tokens []int32 `json:"tokens"`
	Steps  []struct {
		Top []struct {
			ID      int32   `json:"id"`
			Logprob float64 `json:"logprob"`
		} `json:"top_logprobs"`
	} `json:"completion_probabilities"`
}

// ReadProbs reads the reference answer beside the model file at path (path.probs.json).
func ReadProbs(tb testing.TB, path string) Probs {
	tb.Helper()
	b, err := os.ReadFile(path + ".probs.json")
	if err != nil {
		tb.Fatal(err)
	}
	return ParseProbs(tb, path+".probs.json", b)
}

// ParseProbs parses such an answer (what names it in messages), failing the test when it has
// no tokens or not a step for each.
func ParseProbs(tb testing.TB, what string, b []byte) Probs {
	tb.Helper()
	var p Probs
	if err := json.Unmarshal(b, &p); err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	if len(p.Tokens) == 0 || len(p.Steps) != len(p.Tokens) {
		tb.Fatalf("%s: %d tokens, %d steps", what, len(p.Tokens), len(p.Steps))
	}
	return p
}
