package server

import (
	"math"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// generationSettings reports p with every key llama-server's generation_settings has, as the
// engine runs it. Float settings are float32 in both servers and are reported widened (0.95
// reads 0.949999988079071), as there; a banned token's bias (-infinity) is reported as null, as
// llama-server's JSON writes it. speculative.types is the engine's speculative decoding method.
func generationSettings(p engine.Params, stream bool, spec engine.SpecType) gen.GenerationSettings {
	f32 := func(v float32) float64 { return float64(v) }
	stop := p.Stop
	if stop == nil {
		stop = []string{}
	}
	breakers := p.DRYSequenceBreakers
	if breakers == nil {
		breakers = []string{}
	}
	bias := []gen.LogitBiasSetting{}
	for _, b := range p.LogitBias {
		v := gen.NewNilFloat64(f32(b.Bias))
		if math.IsInf(float64(b.Bias), 0) {
			v = gen.NilFloat64{Null: true}
		}
		bias = append(bias, gen.LogitBiasSetting{Bias: v, Token: b.Token})
	}
	samplers := p.Samplers
	if samplers == nil {
		samplers = engine.DefaultSamplers()
	}
	specTypes := string(spec)
	if specTypes == "" {
		specTypes = string(engine.SpecNone)
	}
	return gen.GenerationSettings{
		Seed:                int64(p.Seed),
		Temperature:         f32(p.Temperature),
		DynatempRange:       f32(p.DynatempRange),
		DynatempExponent:    f32(p.DynatempExponent),
		TopK:                p.TopK,
		TopP:                f32(p.TopP),
		MinP:                f32(p.MinP),
		TopNSigma:           f32(p.TopNSigma),
		XtcProbability:      f32(p.XTCProbability),
		XtcThreshold:        f32(p.XTCThreshold),
		TypicalP:            f32(p.TypicalP),
		RepeatLastN:         p.RepeatLastN,
		RepeatPenalty:       f32(p.RepeatPenalty),
		PresencePenalty:     f32(p.PresencePenalty),
		FrequencyPenalty:    f32(p.FrequencyPenalty),
		DryMultiplier:       f32(p.DRYMultiplier),
		DryBase:             f32(p.DRYBase),
		DryAllowedLength:    p.DRYAllowedLength,
		DryPenaltyLastN:     p.DRYPenaltyLastN,
		DrySequenceBreakers: breakers,
		Mirostat:            p.Mirostat,
		MirostatTau:         f32(p.MirostatTau),
		MirostatEta:         f32(p.MirostatEta),
		AdaptiveTarget:      -1,
		AdaptiveDecay:       f32(0.9),
		Stop:                stop,
		MaxTokens:           p.NPredict,
		NPredict:            p.NPredict,
		NKeep:               p.NKeep,
		NDiscard:            p.NDiscard,
		IgnoreEos:           p.IgnoreEOS,
		Stream:              stream,
		LogitBias:           bias,
		NProbs:              p.NProbs,
		MinKeep:             p.MinKeep,
		Grammar:             grammarSource(p.Grammar),
		GrammarLazy:         false,
		GrammarTriggers:     []gen.GrammarTrigger{},
		PreservedTokens:     []int32{},
		ChatFormat:          "Content-only",
		ReasoningFormat:     "deepseek", // the server's --reasoning-format, set by completeTokens
		ReasoningInContent:  false,
		GenerationPrompt:    "",
		Samplers:            samplers,
		SpeculativeDotTypes: specTypes,
		TimingsPerToken:     p.TimingsPerToken,
		PostSamplingProbs:   p.PostSamplingProbs,
		BackendSampling:     false,
		Lora:                loraSettings(p.LoraListed),
	}
}

// loraSettings is a request's lora list as generation_settings echoes it.
func loraSettings(listed []engine.AdapterScale) []gen.LoraAdapter {
	out := make([]gen.LoraAdapter, len(listed))
	for i, e := range listed {
		out[i] = gen.LoraAdapter{ID: e.ID, Scale: float64(e.Scale)}
	}
	return out
}

// timings converts the engine's timings to llama-server's, with rates 0 where there is nothing
// to divide (JSON has no infinity). As llama-server's, the generation rates are over decode
// steps: the first token comes from the prompt's last batch and costs no step of its own, so
// one generated token has no rate and n tokens are n-1 steps.
func timings(t engine.Timings) gen.Timings {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	perToken := func(ms float64, n int) float64 {
		if n <= 0 {
			return 0
		}
		return ms / float64(n)
	}
	perSecond := func(ms float64, n int) float64 {
		if ms <= 0 {
			return 0
		}
		return 1e3 / ms * float64(n)
	}
	promptMS, predictedMS := ms(t.Prompt), ms(t.Predicted)
	steps := max(t.PredictedN-1, 0)
	var draftN, draftAccepted gen.OptInt
	if t.DraftN > 0 { // llama-server reports these only when something was drafted
		draftN, draftAccepted = gen.NewOptInt(t.DraftN), gen.NewOptInt(t.DraftNAccepted)
	}
	return gen.Timings{
		CacheN:              t.CacheN,
		PromptN:             t.PromptN,
		PromptMs:            promptMS,
		PromptPerTokenMs:    perToken(promptMS, t.PromptN),
		PromptPerSecond:     perSecond(promptMS, t.PromptN),
		PredictedN:          t.PredictedN,
		PredictedMs:         predictedMS,
		PredictedPerTokenMs: perToken(predictedMS, steps),
		PredictedPerSecond:  perSecond(predictedMS, steps),
		DraftN:              draftN,
		DraftNAccepted:      draftAccepted,
	}
}

func grammarSource(g *grammar.Grammar) string {
	if g == nil {
		return ""
	}
	return g.Source()
}
