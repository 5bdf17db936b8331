package server

import (
	"math"
	"slices"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// samplingFields are the generation fields that chat and native requests share, as decoded.
// Unset and null fields take the server's defaults (Config.Defaults, else engine.DefaultParams).
type samplingFields struct {
	nPredict    gen.OptNilInt // after resolving aliases (n_predict, max_tokens, ...)
	temperature gen.OptNilFloat64
	topK        gen.OptNilInt
	topP        gen.OptNilFloat64
	minP        gen.OptNilFloat64
	seed        gen.OptNilInt64
	stop        gen.OptNilStop
	ignoreEOS   gen.OptNilBool

	repeatPenalty       gen.OptNilFloat64
	repeatLastN         gen.OptNilInt
	presencePenalty     gen.OptNilFloat64
	frequencyPenalty    gen.OptNilFloat64
	dryMultiplier       gen.OptNilFloat64
	dryBase             gen.OptNilFloat64
	dryAllowedLength    gen.OptNilInt
	dryPenaltyLastN     gen.OptNilInt
	drySequenceBreakers gen.OptNilStringArray
	topNSigma           gen.OptNilFloat64
	typicalP            gen.OptNilFloat64
	xtcProbability      gen.OptNilFloat64
	xtcThreshold        gen.OptNilFloat64
	dynatempRange       gen.OptNilFloat64
	dynatempExponent    gen.OptNilFloat64
	mirostat            gen.OptNilInt
	mirostatTau         gen.OptNilFloat64
	mirostatEta         gen.OptNilFloat64
	logitBias           jx.Raw // [[token, bias], ...] or {"token": bias}
	postSamplingProbs   gen.OptNilBool
	minKeep             gen.OptNilInt
	samplers            jx.Raw // array of names or a string of letters
	grammar             gen.OptNilString
	jsonSchema          jx.Raw // any JSON schema
	responseFormat      jx.Raw // chat only: OpenAI's response_format
	nKeep               gen.OptNilInt
	nDiscard            gen.OptNilInt
	nCacheReuse         gen.OptNilInt
	tMaxPredictMs       gen.OptNilInt
	nIndent             gen.OptNilInt
	returnProgress      gen.OptNilBool
	timingsPerToken     gen.OptNilBool
	cachePrompt         gen.OptNilBool
	specNMax            gen.OptNilInt
	specNMin            gen.OptNilInt
	specPMin            gen.OptNilFloat64
	lora                jx.Raw
	byModel             modelAdapter // the adapter the request's model field names, if any

	// nCtx resolves repeat_last_n and dry_penalty_last_n of -1, as llama-server does.
	nCtx int
	// defaults are the settings unset fields take (the server's -n, --temp, ...); nil means
	// engine.DefaultParams.
	defaults *engine.Params
	// tok tokenizes logit_bias string keys and bounds its token ids; nil accepts any id >= 0.
	tok tokenizerLike
}

// samplingRequest is what the chat and native completion requests (different generated types
// with the same sampling fields) have in common.
type samplingRequest interface {
	GetTemperature() gen.OptNilFloat64
	GetTopK() gen.OptNilInt
	GetTopP() gen.OptNilFloat64
	GetMinP() gen.OptNilFloat64
	GetSeed() gen.OptNilInt64
	GetStop() gen.OptNilStop
	GetIgnoreEos() gen.OptNilBool
	GetRepeatPenalty() gen.OptNilFloat64
	GetRepeatLastN() gen.OptNilInt
	GetPresencePenalty() gen.OptNilFloat64
	GetFrequencyPenalty() gen.OptNilFloat64
	GetDryMultiplier() gen.OptNilFloat64
	GetDryBase() gen.OptNilFloat64
	GetDryAllowedLength() gen.OptNilInt
	GetDryPenaltyLastN() gen.OptNilInt
	GetDrySequenceBreakers() gen.OptNilStringArray
	GetTopNSigma() gen.OptNilFloat64
	GetTypicalP() gen.OptNilFloat64
	GetXtcProbability() gen.OptNilFloat64
	GetXtcThreshold() gen.OptNilFloat64
	GetDynatempRange() gen.OptNilFloat64
	GetDynatempExponent() gen.OptNilFloat64
	GetMirostat() gen.OptNilInt
	GetMirostatTau() gen.OptNilFloat64
	GetMirostatEta() gen.OptNilFloat64
	GetLogitBias() jx.Raw
	GetPostSamplingProbs() gen.OptNilBool
	GetMinKeep() gen.OptNilInt
	GetSamplers() jx.Raw
	GetGrammar() gen.OptNilString
	GetJSONSchema() jx.Raw
	GetLora() jx.Raw
	GetModel() gen.OptNilString
	GetResponseFormat() jx.Raw
	GetNKeep() gen.OptNilInt
	GetNDiscard() gen.OptNilInt
	GetNCacheReuse() gen.OptNilInt
	GetTMaxPredictMs() gen.OptNilInt
	GetNIndent() gen.OptNilInt
	GetReturnProgress() gen.OptNilBool
	GetTimingsPerToken() gen.OptNilBool
	GetCachePrompt() gen.OptNilBool
	GetSpeculativeDotNMax() gen.OptNilInt
	GetSpeculativeDotNMin() gen.OptNilInt
	GetSpeculativeDotPMin() gen.OptNilFloat64
}

// samplingFields gathers a request's sampling fields for the loaded model; nPredict is the
// request's length field after resolving its aliases.
func (m *loaded) samplingFields(req samplingRequest, nPredict gen.OptNilInt) samplingFields {
	return samplingFields{
		nPredict:            nPredict,
		temperature:         req.GetTemperature(),
		topK:                req.GetTopK(),
		topP:                req.GetTopP(),
		minP:                req.GetMinP(),
		seed:                req.GetSeed(),
		stop:                req.GetStop(),
		ignoreEOS:           req.GetIgnoreEos(),
		repeatPenalty:       req.GetRepeatPenalty(),
		repeatLastN:         req.GetRepeatLastN(),
		presencePenalty:     req.GetPresencePenalty(),
		frequencyPenalty:    req.GetFrequencyPenalty(),
		dryMultiplier:       req.GetDryMultiplier(),
		dryBase:             req.GetDryBase(),
		dryAllowedLength:    req.GetDryAllowedLength(),
		dryPenaltyLastN:     req.GetDryPenaltyLastN(),
		drySequenceBreakers: req.GetDrySequenceBreakers(),
		topNSigma:           req.GetTopNSigma(),
		typicalP:            req.GetTypicalP(),
		xtcProbability:      req.GetXtcProbability(),
		xtcThreshold:        req.GetXtcThreshold(),
		dynatempRange:       req.GetDynatempRange(),
		dynatempExponent:    req.GetDynatempExponent(),
		mirostat:            req.GetMirostat(),
		mirostatTau:         req.GetMirostatTau(),
		mirostatEta:         req.GetMirostatEta(),
		logitBias:           req.GetLogitBias(),
		postSamplingProbs:   req.GetPostSamplingProbs(),
		minKeep:             req.GetMinKeep(),
		samplers:            req.GetSamplers(),
		grammar:             req.GetGrammar(),
		jsonSchema:          req.GetJSONSchema(),
		lora:                req.GetLora(),
		byModel:             m.adapterNamed(req.GetModel().Or("")),
		responseFormat:      req.GetResponseFormat(),
		nKeep:               req.GetNKeep(),
		nDiscard:            req.GetNDiscard(),
		nCacheReuse:         req.GetNCacheReuse(),
		tMaxPredictMs:       req.GetTMaxPredictMs(),
		nIndent:             req.GetNIndent(),
		returnProgress:      req.GetReturnProgress(),
		timingsPerToken:     req.GetTimingsPerToken(),
		cachePrompt:         req.GetCachePrompt(),
		specNMax:            req.GetSpeculativeDotNMax(),
		specNMin:            req.GetSpeculativeDotNMin(),
		specPMin:            req.GetSpeculativeDotPMin(),
		nCtx:                m.info.NCtx,
		defaults:            m.defaults,
		tok:                 m.tok,
	}
}

// tokenizerLike is what logit_bias and ignore_eos need of the tokenizer.
type tokenizerLike interface {
	Encode(text string, addSpecial, parseSpecial bool) []int32
	NVocab() int
	EOGs() []int32
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

// params checks the fields and applies them over the defaults. The schema already
// enforces these limits for requests that come through the router; checking again keeps the
// engine safe from handlers called any other way.
func (f samplingFields) params() (engine.Params, error) {
	p := engine.DefaultParams()
	if f.defaults != nil {
		p = *f.defaults
		// The request's settings must not write into the shared defaults' slices.
		p.Stop = slices.Clone(p.Stop)
		p.DRYSequenceBreakers = slices.Clone(p.DRYSequenceBreakers)
		p.LogitBias = slices.Clone(p.LogitBias)
		p.Samplers = slices.Clone(p.Samplers)
	}
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
	var err error
	if p.Lora, p.LoraListed, err = loraParams(f.lora); err != nil {
		return p, err
	}
	if p.Lora == nil && f.byModel.scales != nil {
		p.Lora, p.LoraListed = f.byModel.scales, f.byModel.listed
	}
	if err := f.samplerParams(&p); err != nil {
		return p, err
	}
	if p.IgnoreEOS && f.tok != nil {
		// As llama-server: ignore_eos bans every end-of-generation token with a bias of
		// -infinity after the request's own, so they are never sampled (and show in
		// generation_settings.logit_bias).
		for _, id := range f.tok.EOGs() {
			p.LogitBias = append(p.LogitBias, engine.LogitBias{Token: id, Bias: float32(math.Inf(-1))})
		}
	}
	if err := f.cacheParams(&p); err != nil {
		return p, err
	}
	return p, nil
}

// cacheParams applies the fields about the prompt cache, context shift and time limit.
func (f samplingFields) cacheParams(p *engine.Params) error {
	nonNeg := func(v int) bool { return v >= 0 }
	for _, err := range []error{
		optInt(f.nKeep, &p.NKeep, "n_keep", "-1 or more", func(v int) bool { return v >= -1 }),
		optInt(f.nDiscard, &p.NDiscard, "n_discard", "0 or more", nonNeg),
		optInt(f.nCacheReuse, &p.NCacheReuse, "n_cache_reuse", "0 or more", nonNeg),
		optInt(f.tMaxPredictMs, &p.TMaxPredictMs, "t_max_predict_ms", "0 or more", nonNeg),
		optInt(f.nIndent, &p.NIndent, "n_indent", "0 or more", nonNeg),
	} {
		if err != nil {
			return err
		}
	}
	p.ReturnProgress = f.returnProgress.Or(false) // streams only: see generationTasks
	p.TimingsPerToken = f.timingsPerToken.Or(false)
	p.SkipPromptCache = !f.cachePrompt.Or(true)
	return nil
}

// finite reports whether v is an ordinary number.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// optFloat applies a float field that must satisfy ok, else fails with "'name' must be what".
func optFloat(o gen.OptNilFloat64, dst *float32, name, what string, ok func(float64) bool) error {
	v, set := o.Get()
	if !set {
		return nil
	}
	if !finite(v) || !ok(v) {
		return invalidRequest("'%s' must be %s, got %v", name, what, v)
	}
	*dst = float32(v)
	return nil
}

// optInt applies an integer field that must satisfy ok, else fails with "'name' must be what".
func optInt(o gen.OptNilInt, dst *int, name, what string, ok func(int) bool) error {
	v, set := o.Get()
	if !set {
		return nil
	}
	if !ok(v) {
		return invalidRequest("'%s' must be %s, got %d", name, what, v)
	}
	*dst = v
	return nil
}

// samplerParams applies the fields of the samplers beyond top-k/top-p/min-p/temperature.
func (f samplingFields) samplerParams(p *engine.Params) error {
	anyF := func(float64) bool { return true }
	nonNegF := func(v float64) bool { return v >= 0 }
	unitF := func(v float64) bool { return v >= 0 && v <= 1 }
	nonNegI := func(v int) bool { return v >= 0 }
	lastN := func(v int) bool { return v >= -1 }
	for _, e := range []error{
		optFloat(f.repeatPenalty, &p.RepeatPenalty, "repeat_penalty", "above 0", func(v float64) bool { return v > 0 }),
		optInt(f.repeatLastN, &p.RepeatLastN, "repeat_last_n", "-1 (the context size) or more", lastN),
		optFloat(f.presencePenalty, &p.PresencePenalty, "presence_penalty", "a number", anyF),
		optFloat(f.frequencyPenalty, &p.FrequencyPenalty, "frequency_penalty", "a number", anyF),
		optFloat(f.dryMultiplier, &p.DRYMultiplier, "dry_multiplier", "0 or more", nonNegF),
		optFloat(f.dryBase, &p.DRYBase, "dry_base", "0 or more", nonNegF),
		optInt(f.dryAllowedLength, &p.DRYAllowedLength, "dry_allowed_length", "0 or more", nonNegI),
		optInt(f.dryPenaltyLastN, &p.DRYPenaltyLastN, "dry_penalty_last_n", "-1 (the context size) or more", lastN),
		optFloat(f.topNSigma, &p.TopNSigma, "top_n_sigma", "a number", anyF),
		optFloat(f.typicalP, &p.TypicalP, "typical_p", "between 0 and 1", unitF),
		optFloat(f.xtcProbability, &p.XTCProbability, "xtc_probability", "between 0 and 1", unitF),
		optFloat(f.xtcThreshold, &p.XTCThreshold, "xtc_threshold", "between 0 and 1", unitF),
		optFloat(f.dynatempRange, &p.DynatempRange, "dynatemp_range", "0 or more", nonNegF),
		optFloat(f.dynatempExponent, &p.DynatempExponent, "dynatemp_exponent", "0 or more", nonNegF),
		optInt(f.mirostat, &p.Mirostat, "mirostat", "0 (off), 1 or 2", func(v int) bool { return v >= 0 && v <= 2 }),
		optFloat(f.mirostatTau, &p.MirostatTau, "mirostat_tau", "0 or more", nonNegF),
		optFloat(f.mirostatEta, &p.MirostatEta, "mirostat_eta", "0 or more", nonNegF),
		optInt(f.minKeep, &p.MinKeep, "min_keep", "0 or more", nonNegI),
		optInt(f.specNMax, &p.SpecNMax, "speculative.n_max", "0 or more", nonNegI),
		optInt(f.specNMin, &p.SpecNMin, "speculative.n_min", "0 or more", nonNegI),
		optFloat(f.specPMin, &p.SpecPMin, "speculative.p_min", "between 0 and 1", unitF),
	} {
		if e != nil {
			return e
		}
	}
	if f.nCtx > 0 {
		if p.RepeatLastN == -1 {
			p.RepeatLastN = f.nCtx
		}
		if p.DRYPenaltyLastN == -1 {
			p.DRYPenaltyLastN = f.nCtx
		}
	}
	if v, ok := f.drySequenceBreakers.Get(); ok {
		if len(v) == 0 {
			return invalidRequest("'dry_sequence_breakers' must be a non-empty array of strings")
		}
		p.DRYSequenceBreakers = v
	}
	p.PostSamplingProbs = f.postSamplingProbs.Or(false)
	var err error
	if p.LogitBias, err = f.parseLogitBias(); err != nil {
		return err
	}
	if s, err := parseSamplers(f.samplers); err != nil {
		return err
	} else if s != nil {
		p.Samplers = s
	}
	return f.constraint(p)
}
