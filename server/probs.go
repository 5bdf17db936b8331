package server

import (
	"math"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// probabilities turns the engine's per-step probabilities into llama-server's
// completion_probabilities entries: log-probabilities (logprob, top_logprobs), or with post
// (post_sampling_probs) plain probabilities (prob, top_probs). top caps the candidates listed.
func probabilities(tok *tokenizer.Tokenizer, steps []engine.StepProbs, post bool, top int) []gen.TokenProbability {
	out := make([]gen.TokenProbability, 0, len(steps))
	for _, st := range steps {
		tp := gen.TokenProbability{ID: st.ID}
		tp.Token, tp.Bytes = tokenText(tok, st.ID)
		cands := make([]gen.TopProbability, 0, min(top, len(st.Top)))
		for _, c := range st.Top[:min(top, len(st.Top))] {
			tc := gen.TopProbability{ID: c.ID}
			tc.Token, tc.Bytes = tokenText(tok, c.ID)
			if post {
				tc.Prob = gen.NewOptFloat64(float64(c.Prob))
			} else {
				tc.Logprob = gen.NewOptFloat64(logProb(c.Prob))
			}
			cands = append(cands, tc)
		}
		if post {
			tp.Prob, tp.TopProbs = gen.NewOptFloat64(float64(st.Prob)), cands
		} else {
			tp.Logprob, tp.TopLogprobs = gen.NewOptFloat64(logProb(st.Prob)), cands
		}
		out = append(out, tp)
	}
	return out
}

// tokenText is a token's text (special tokens rendered) and its bytes; bytes that are not
// valid UTF-8 on their own (part of a character) show as U+FFFD in the text.
func tokenText(tok *tokenizer.Tokenizer, id int32) (string, []int) {
	piece := tok.Piece(id, true)
	b := make([]int, len(piece))
	for i, c := range piece {
		b[i] = int(c)
	}
	return strings.ToValidUTF8(string(piece), "\uFFFD"), b
}

// logProb is ln p, kept finite for JSON: a probability of 0 reports the log of the smallest
// positive float32.
func logProb(p float32) float64 {
	return math.Log(math.Max(float64(p), math.SmallestNonzeroFloat32))
}
