package server

import (
	"context"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// GetProps implements GET /props: the server's settings, the default generation settings and
// the chat template, with every key llama-server's /props has. Nothing in it needs the model,
// so a sleeping server answers it as it is, with is_sleeping true.
func (s *Server) GetProps(context.Context) (*gen.PropsResponse, error) {
	m := s.model()
	if m == nil {
		return nil, errLoading
	}
	defaults := engine.DefaultParams()
	if m.defaults != nil {
		defaults = *m.defaults
	}
	c := m.caps
	params := slotParams(defaults, false, m.info.SpecType)
	// llama-server reports the defaults before the server's --reasoning-format is applied to
	// them, which happens per request: "none" here, "deepseek" in completions and /slots.
	params.ReasoningFormat = "none"
	return &gen.PropsResponse{
		DefaultGenerationSettings: gen.DefaultGenerationSettings{
			Params: params,
			NCtx:   m.info.NCtx,
		},
		TotalSlots:      m.info.NSlots,
		ModelAlias:      m.name,
		ModelFtype:      m.info.FileType,
		ModelPath:       m.info.Path,
		Modalities:      gen.Modalities{Vision: m.imageMarker != ""},
		MediaMarker:     s.mediaMarker,
		EndpointSlots:   !s.cfg.NoSlots,
		EndpointProps:   s.cfg.Props,
		EndpointMetrics: s.cfg.Metrics,
		// Our extensions, present only when on: a default server's /props is llama-server's.
		EndpointTools: gen.OptBool{Value: true, Set: s.cfg.Tools != nil},
		EndpointMcp:   gen.OptBool{Value: true, Set: s.cfg.MCPEndpoint},
		// No web UI is served yet.
		UI:           false,
		UISettings:   gen.PropsResponseUISettings{},
		ChatTemplate: m.template.Source,
		ChatTemplateCaps: gen.ChatTemplateCaps{
			SupportsObjectArguments:   c.ObjectArguments,
			SupportsParallelToolCalls: c.ParallelToolCalls,
			SupportsPreserveReasoning: c.PreserveReasoning,
			SupportsReasoningEffort:   c.ReasoningEffort,
			SupportsStringContent:     c.StringContent,
			SupportsSystemRole:        c.SystemRole,
			SupportsToolCalls:         c.ToolCalls,
			SupportsTools:             c.Tools,
			SupportsTypedContent:      c.TypedContent,
		},
		BosToken:         m.template.BOS,
		EosToken:         m.template.EOS,
		BuildInfo:        s.cfg.SystemFingerprint,
		IsSleeping:       m.sleeping(),
		CorsProxyEnabled: s.cfg.CORSProxy,
		Devices:          splitDevices(m.info.Split),
	}, nil
}

// splitDevices is /props' devices: nil (absent) unless the model is split over several.
func splitDevices(split []engine.DeviceLayers) []gen.DeviceLayers {
	if len(split) < 2 {
		return nil
	}
	out := make([]gen.DeviceLayers, len(split))
	for i, d := range split {
		out[i] = gen.DeviceLayers{Index: d.Index, Name: d.Name, FirstLayer: d.Lo, NLayers: d.Hi - d.Lo, Output: d.Output}
	}
	return out
}

// UpdateProps implements POST /props. As in llama-server it answers 501 unless enabled
// (--props), and no property can be changed yet: the body is accepted and ignored.
func (s *Server) UpdateProps(context.Context, gen.OptPropsUpdateRequest) (*gen.PropsUpdateResponse, error) {
	if !s.cfg.Props {
		return nil, &apiError{typ: errNotSupported,
			message: "This server does not support changing global properties. Start it with `--props`"}
	}
	return &gen.PropsUpdateResponse{Success: true}, nil
}

// slotParams reports p as /slots and /props show a slot's settings: generation_settings
// without the per-request inputs (stop, logit_bias, grammar, ...), as llama-server's
// task_params::to_json(only_metrics = true).
func slotParams(p engine.Params, stream bool, spec engine.SpecType) gen.SlotParams {
	g := generationSettings(p, stream, spec)
	return gen.SlotParams{
		Seed:                g.Seed,
		Temperature:         g.Temperature,
		DynatempRange:       g.DynatempRange,
		DynatempExponent:    g.DynatempExponent,
		TopK:                g.TopK,
		TopP:                g.TopP,
		MinP:                g.MinP,
		TopNSigma:           g.TopNSigma,
		XtcProbability:      g.XtcProbability,
		XtcThreshold:        g.XtcThreshold,
		TypicalP:            g.TypicalP,
		RepeatLastN:         g.RepeatLastN,
		RepeatPenalty:       g.RepeatPenalty,
		PresencePenalty:     g.PresencePenalty,
		FrequencyPenalty:    g.FrequencyPenalty,
		DryMultiplier:       g.DryMultiplier,
		DryBase:             g.DryBase,
		DryAllowedLength:    g.DryAllowedLength,
		DryPenaltyLastN:     g.DryPenaltyLastN,
		Mirostat:            g.Mirostat,
		MirostatTau:         g.MirostatTau,
		MirostatEta:         g.MirostatEta,
		AdaptiveTarget:      g.AdaptiveTarget,
		AdaptiveDecay:       g.AdaptiveDecay,
		MaxTokens:           g.MaxTokens,
		NPredict:            g.NPredict,
		NKeep:               g.NKeep,
		NDiscard:            g.NDiscard,
		IgnoreEos:           g.IgnoreEos,
		Stream:              g.Stream,
		NProbs:              g.NProbs,
		MinKeep:             g.MinKeep,
		ChatFormat:          g.ChatFormat,
		ReasoningFormat:     g.ReasoningFormat,
		ReasoningInContent:  g.ReasoningInContent,
		GenerationPrompt:    g.GenerationPrompt,
		Samplers:            g.Samplers,
		SpeculativeDotTypes: g.SpeculativeDotTypes,
		TimingsPerToken:     g.TimingsPerToken,
		PostSamplingProbs:   g.PostSamplingProbs,
		BackendSampling:     g.BackendSampling,
		Lora:                g.Lora,
	}
}
