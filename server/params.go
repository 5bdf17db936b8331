package server

import (
	"math"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// samplingFields are the generation fields that chat and native requests share, as decoded.
// Unset and null fields take llama-server's defaults (engine.DefaultParams).
type samplingFields struct {
	nPredict    gen.OptNilInt // after resolving aliases (n_predict, max_tokens, ...)
	temperature gen.OptNilFloat64
	topK        gen.OptNilInt
	topP        gen.OptNilFloat64
	minP        gen.OptNilFloat64
	seed        gen.OptNilInt64
	stop        gen.OptNilStop
	ignoreEOS   gen.OptNilBool
}

// firstSet returns the first of opts that holds a value, for fields with aliases.
func firstSet(opts ...gen.OptNilInt) gen.OptNilInt {
	for _, o := range opts {
		if _, ok := o.Get(); ok {
			return o
		}
	}
	return gen.OptNilInt{}
}

// seedRandomJSON is the JSON spelling of engine.SeedRandom besides -1.
const seedRandomJSON = int64(engine.SeedRandom)

// params checks the fields and applies them over engine.DefaultParams. The schema already
// enforces these limits for requests that come through the router; checking again keeps the
// engine safe from handlers called any other way.
func (f samplingFields) params() (engine.Params, error) {
	p := engine.DefaultParams()
	if v, ok := f.nPredict.Get(); ok {
		if v < -1 {
			return p, invalidRequest("'n_predict' must be -1 (no limit) or more, got %d", v)
		}
		p.NPredict = v
	}
	if v, ok := f.temperature.Get(); ok {
		if v < 0 || math.IsNaN(v) {
			return p, invalidRequest("'temperature' must be 0 or more, got %v", v)
		}
		p.Temperature = float32(v)
	}
	if v, ok := f.topK.Get(); ok {
		p.TopK = max(v, 0) // llama.cpp treats top_k <= 0 as "keep all"
	}
	if v, ok := f.topP.Get(); ok {
		if !(v >= 0 && v <= 1) {
			return p, invalidRequest("'top_p' must be between 0 and 1, got %v", v)
		}
		p.TopP = float32(v)
	}
	if v, ok := f.minP.Get(); ok {
		if !(v >= 0 && v <= 1) {
			return p, invalidRequest("'min_p' must be between 0 and 1, got %v", v)
		}
		p.MinP = float32(v)
	}
	if v, ok := f.seed.Get(); ok {
		switch {
		case v == -1 || v == seedRandomJSON:
			p.Seed = engine.SeedRandom
		case v < 0 || v > seedRandomJSON:
			return p, invalidRequest("'seed' must be between -1 and %d, got %d", seedRandomJSON, v)
		default:
			p.Seed = uint32(v)
		}
	}
	if v, ok := f.stop.Get(); ok {
		var words []string
		if s, isString := v.GetString(); isString {
			words = []string{s}
		} else {
			words = v.StringArray
		}
		for _, w := range words {
			if w != "" { // an empty stop string would end every generation at once
				p.Stop = append(p.Stop, w)
			}
		}
	}
	p.IgnoreEOS = f.ignoreEOS.Or(false)
	return p, nil
}

// implementedSamplers lists, in order, the samplers the engine applies; llama-server's default
// chain is penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature.
var implementedSamplers = []string{"top_k", "top_p", "min_p", "temperature"}

// generationSettings reports p with every key llama-server's generation_settings has. Samplers
// the engine does not implement report the value that switches them off (repeat_penalty 1,
// mirostat 0, dry_multiplier 0, xtc_probability 0, typical_p 1, top_n_sigma -1, ...), which is
// also llama-server's default, so the settings describe what actually ran. Float settings are
// float32 in both servers and are reported widened (0.95 reads 0.949999988079071), as there.
func generationSettings(p engine.Params, stream bool) gen.GenerationSettings {
	f32 := func(v float32) float64 { return float64(v) }
	stop := p.Stop
	if stop == nil {
		stop = []string{}
	}
	return gen.GenerationSettings{
		Seed:                int64(p.Seed),
		Temperature:         f32(p.Temperature),
		DynatempRange:       0,
		DynatempExponent:    1,
		TopK:                p.TopK,
		TopP:                f32(p.TopP),
		MinP:                f32(p.MinP),
		TopNSigma:           -1,
		XtcProbability:      0,
		XtcThreshold:        f32(0.1),
		TypicalP:            1,
		RepeatLastN:         64,
		RepeatPenalty:       1,
		PresencePenalty:     0,
		FrequencyPenalty:    0,
		DryMultiplier:       0,
		DryBase:             1.75,
		DryAllowedLength:    2,
		DryPenaltyLastN:     64,
		DrySequenceBreakers: []string{"\n", ":", "\"", "*"},
		Mirostat:            0,
		MirostatTau:         5,
		MirostatEta:         f32(0.1),
		AdaptiveTarget:      -1,
		AdaptiveDecay:       f32(0.9),
		Stop:                stop,
		MaxTokens:           p.NPredict,
		NPredict:            p.NPredict,
		NKeep:               0,
		NDiscard:            0,
		IgnoreEos:           p.IgnoreEOS,
		Stream:              stream,
		LogitBias:           [][]float64{},
		NProbs:              0,
		MinKeep:             0,
		Grammar:             "",
		GrammarLazy:         false,
		GrammarTriggers:     []gen.GrammarTrigger{},
		PreservedTokens:     []int32{},
		ChatFormat:          "Content-only",
		ReasoningFormat:     "none", // no reasoning extraction: thinking stays in the content
		ReasoningInContent:  false,
		GenerationPrompt:    "",
		Samplers:            implementedSamplers,
		SpeculativeDotTypes: "none",
		TimingsPerToken:     false,
		PostSamplingProbs:   false,
		BackendSampling:     false,
		Lora:                []gen.LoraAdapter{},
	}
}

// timings converts the engine's timings to llama-server's, with rates 0 where there is nothing
// to divide (JSON has no infinity).
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
	return gen.Timings{
		CacheN:              t.CacheN,
		PromptN:             t.PromptN,
		PromptMs:            promptMS,
		PromptPerTokenMs:    perToken(promptMS, t.PromptN),
		PromptPerSecond:     perSecond(promptMS, t.PromptN),
		PredictedN:          t.PredictedN,
		PredictedMs:         predictedMS,
		PredictedPerTokenMs: perToken(predictedMS, t.PredictedN),
		PredictedPerSecond:  perSecond(predictedMS, t.PredictedN),
	}
}
