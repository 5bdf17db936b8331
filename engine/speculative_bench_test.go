package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// BenchmarkSelfDraft compares greedy generation speed on stories260K, 128 tokens per request,
// without speculative decoding, with the model drafting for itself (every draft accepted: the
// gain is the fewer, larger target passes against the cost of the draft's passes), and with
// n-gram drafting.
func BenchmarkSelfDraft(b *testing.B) {
	selfDraft := engine.DefaultSpecConfig()
	selfDraft.DraftModel = "models/stories260K.gguf"
	ngram := engine.DefaultSpecConfig()
	ngram.Type, ngram.NgramN = engine.SpecNgram, 3
	for _, bc := range []struct {
		name string
		spec engine.SpecConfig
	}{{"plain", engine.SpecConfig{}}, {"self-draft", selfDraft}, {"ngram", ngram}} {
		b.Run(bc.name, func(b *testing.B) {
			e := enginetest.LoadSpec(b, 1, bc.spec, "models", "stories260K.gguf")
			p := greedy(128)
			p.IgnoreEOS = true
			prompt := e.Tokenizer().Encode("Once upon a time", true, true)
			tokens, drafted, accepted := 0, 0, 0
			var gen time.Duration
			for i := 0; i < b.N; i++ {
				ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: p})
				if err != nil {
					b.Fatal(err)
				}
				var last engine.Result
				for r := range ch {
					last = r
				}
				tokens += last.TokensPredicted
				gen += last.Timings.Predicted
				drafted += last.Timings.DraftN
				accepted += last.Timings.DraftNAccepted
			}
			b.ReportMetric(float64(tokens)/gen.Seconds(), "tokens/s")
			if drafted > 0 {
				b.ReportMetric(float64(accepted)/float64(drafted), "accepted/drafted")
			}
		})
	}
}
