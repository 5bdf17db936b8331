package server

import (
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// TestSamplingFieldMapping checks each llama-server sampling field reaches engine.Params, on
// both endpoints, and that generation_settings reports it.
func TestSamplingFieldMapping(t *testing.T) {
	inf := float32(math.Inf(-1))
	cases := []struct {
		name    string
		fields  string
		check   func(p engine.Params) bool
		setting string // generation_settings path, "" to skip
		want    any
	}{
		{"repeat_penalty", `"repeat_penalty":1.3`, func(p engine.Params) bool { return p.RepeatPenalty == 1.3 }, "repeat_penalty", float64(float32(1.3))},
		{"repeat_last_n", `"repeat_last_n":16`, func(p engine.Params) bool { return p.RepeatLastN == 16 }, "repeat_last_n", 16.0},
		{"repeat_last_n -1", `"repeat_last_n":-1`, func(p engine.Params) bool { return p.RepeatLastN == 256 }, "repeat_last_n", 256.0},
		{"presence_penalty", `"presence_penalty":0.5`, func(p engine.Params) bool { return p.PresencePenalty == 0.5 }, "presence_penalty", 0.5},
		{"frequency_penalty", `"frequency_penalty":-0.5`, func(p engine.Params) bool { return p.FrequencyPenalty == -0.5 }, "frequency_penalty", -0.5},
		{"dry_multiplier", `"dry_multiplier":0.8`, func(p engine.Params) bool { return p.DRYMultiplier == 0.8 }, "dry_multiplier", float64(float32(0.8))},
		{"dry_base", `"dry_base":2`, func(p engine.Params) bool { return p.DRYBase == 2 }, "dry_base", 2.0},
		{"dry_allowed_length", `"dry_allowed_length":3`, func(p engine.Params) bool { return p.DRYAllowedLength == 3 }, "dry_allowed_length", 3.0},
		{"dry_penalty_last_n", `"dry_penalty_last_n":32`, func(p engine.Params) bool { return p.DRYPenaltyLastN == 32 }, "dry_penalty_last_n", 32.0},
		{"dry_penalty_last_n default", ``, func(p engine.Params) bool { return p.DRYPenaltyLastN == 64 }, "dry_penalty_last_n", 64.0},
		{"dry_penalty_last_n -1", `"dry_penalty_last_n":-1`, func(p engine.Params) bool { return p.DRYPenaltyLastN == 256 }, "dry_penalty_last_n", 256.0},
		{"dry_sequence_breakers", `"dry_sequence_breakers":["\n","x"]`, func(p engine.Params) bool { return reflect.DeepEqual(p.DRYSequenceBreakers, []string{"\n", "x"}) }, "dry_sequence_breakers.1", "x"},
		{"top_n_sigma", `"top_n_sigma":1.5`, func(p engine.Params) bool { return p.TopNSigma == 1.5 }, "top_n_sigma", 1.5},
		{"typical_p", `"typical_p":0.5`, func(p engine.Params) bool { return p.TypicalP == 0.5 }, "typical_p", 0.5},
		{"xtc_probability", `"xtc_probability":0.5`, func(p engine.Params) bool { return p.XTCProbability == 0.5 }, "xtc_probability", 0.5},
		{"xtc_threshold", `"xtc_threshold":0.25`, func(p engine.Params) bool { return p.XTCThreshold == 0.25 }, "xtc_threshold", 0.25},
		{"dynatemp_range", `"dynatemp_range":0.5`, func(p engine.Params) bool { return p.DynatempRange == 0.5 }, "dynatemp_range", 0.5},
		{"dynatemp_exponent", `"dynatemp_exponent":2`, func(p engine.Params) bool { return p.DynatempExponent == 2 }, "dynatemp_exponent", 2.0},
		{"mirostat", `"mirostat":2`, func(p engine.Params) bool { return p.Mirostat == 2 }, "mirostat", 2.0},
		{"mirostat_tau", `"mirostat_tau":3`, func(p engine.Params) bool { return p.MirostatTau == 3 }, "mirostat_tau", 3.0},
		{"mirostat_eta", `"mirostat_eta":0.25`, func(p engine.Params) bool { return p.MirostatEta == 0.25 }, "mirostat_eta", 0.25},
		{"post_sampling_probs", `"post_sampling_probs":true`, func(p engine.Params) bool { return p.PostSamplingProbs }, "post_sampling_probs", true},
		{"min_keep", `"min_keep":4`, func(p engine.Params) bool { return p.MinKeep == 4 }, "min_keep", 4.0},
		{"n_keep", `"n_keep":-1`, func(p engine.Params) bool { return p.NKeep == -1 }, "n_keep", -1.0},
		{"n_discard", `"n_discard":12`, func(p engine.Params) bool { return p.NDiscard == 12 }, "n_discard", 12.0},
		{"n_cache_reuse", `"n_cache_reuse":256`, func(p engine.Params) bool { return p.NCacheReuse == 256 }, "", nil},
		{"t_max_predict_ms", `"t_max_predict_ms":500`, func(p engine.Params) bool { return p.TMaxPredictMs == 500 }, "", nil},
		{"cache_prompt false", `"cache_prompt":false`, func(p engine.Params) bool { return p.SkipPromptCache }, "", nil},
		{"cache_prompt default", ``, func(p engine.Params) bool { return !p.SkipPromptCache }, "", nil},
		{"logit_bias pairs", `"logit_bias":[[5,1.5],[6,false]]`, func(p engine.Params) bool {
			return reflect.DeepEqual(p.LogitBias, []engine.LogitBias{{Token: 5, Bias: 1.5}, {Token: 6, Bias: inf}})
		}, "logit_bias.1.bias", nil},
		{"logit_bias object", `"logit_bias":{"7":-2,"8":false}`, func(p engine.Params) bool {
			return reflect.DeepEqual(p.LogitBias, []engine.LogitBias{{Token: 7, Bias: -2}, {Token: 8, Bias: inf}})
		}, "logit_bias.0.token", 7.0},
		{"ignore_eos bans end-of-generation tokens", `"ignore_eos":true,"logit_bias":[[5,1]]`, func(p engine.Params) bool {
			return p.IgnoreEOS && reflect.DeepEqual(p.LogitBias, []engine.LogitBias{{Token: 5, Bias: 1}, {Token: 2, Bias: inf}})
		}, "logit_bias.1", map[string]any{"bias": nil, "token": 2.0}},
		{"logit_bias string", `"logit_bias":[["a",2]]`, func(p engine.Params) bool { return len(p.LogitBias) >= 1 && p.LogitBias[0].Bias == 2 }, "", nil},
		{"samplers names", `"samplers":["top-k","temp","penalties"]`, func(p engine.Params) bool {
			return reflect.DeepEqual(p.Samplers, []string{"top_k", "temperature", "penalties"})
		}, "samplers.1", "temperature"},
		{"samplers letters", `"samplers":"kt"`, func(p engine.Params) bool { return reflect.DeepEqual(p.Samplers, []string{"top_k", "temperature"}) }, "samplers.0", "top_k"},
		{"samplers default", ``, func(p engine.Params) bool { return reflect.DeepEqual(p.Samplers, engine.DefaultSamplers()) }, "samplers.8", "temperature"},
		{"speculative.n_max", `"speculative.n_max":4`, func(p engine.Params) bool { return p.SpecNMax == 4 }, "", nil},
		{"speculative.n_min", `"speculative.n_min":2`, func(p engine.Params) bool { return p.SpecNMin == 2 }, "", nil},
		{"speculative.p_min", `"speculative.p_min":0.5`, func(p engine.Params) bool { return p.SpecPMin == 0.5 }, "", nil},
		{"speculative defaults", ``, func(p engine.Params) bool { return p.SpecNMax == -1 && p.SpecNMin == -1 && p.SpecPMin == -1 }, "", nil},
	}
	for _, c := range cases {
		for _, ep := range []string{"/completion", "/v1/chat/completions"} {
			t.Run(c.name+ep, func(t *testing.T) {
				h := newHarness(t)
				body := `{"prompt":"Once","n_predict":1`
				if ep != "/completion" {
					body = `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":1`
				}
				if c.fields != "" {
					body += "," + c.fields
				}
				rec := h.do(t, http.MethodPost, ep, body+"}")
				if rec.Code != http.StatusOK {
					t.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
				if p := h.fake.lastTask(t).Params; !c.check(p) {
					t.Errorf("params do not carry %s: %+v", c.fields, p)
				}
				if ep == "/completion" && c.setting != "" {
					got := lookup(t, decodeJSON(t, rec.Body.Bytes()), "generation_settings."+c.setting)
					if !reflect.DeepEqual(got, c.want) {
						t.Errorf("generation_settings.%s = %#v, want %#v", c.setting, got, c.want)
					}
				}
			})
		}
	}
}

// TestSamplingFieldErrors checks invalid values are 400s with exact messages naming the field,
// on both endpoints.
func TestSamplingFieldErrors(t *testing.T) {
	cases := []struct{ fields, want string }{
		{`"repeat_penalty":0`, "'repeat_penalty' must be above 0, got 0"},
		{`"repeat_last_n":-2`, "'repeat_last_n' must be -1 (the context size) or more, got -2"},
		{`"dry_multiplier":-1`, "'dry_multiplier' must be 0 or more, got -1"},
		{`"dry_allowed_length":-1`, "'dry_allowed_length' must be 0 or more, got -1"},
		{`"dry_penalty_last_n":-5`, "'dry_penalty_last_n' must be -1 (the context size) or more, got -5"},
		{`"dry_sequence_breakers":[]`, "'dry_sequence_breakers' must be a non-empty array of strings"},
		{`"typical_p":1.5`, "'typical_p' must be between 0 and 1, got 1.5"},
		{`"xtc_probability":2`, "'xtc_probability' must be between 0 and 1, got 2"},
		{`"xtc_threshold":-0.1`, "'xtc_threshold' must be between 0 and 1, got -0.1"},
		{`"dynatemp_range":-1`, "'dynatemp_range' must be 0 or more, got -1"},
		{`"mirostat":3`, "'mirostat' must be 0 (off), 1 or 2, got 3"},
		{`"mirostat_tau":-1`, "'mirostat_tau' must be 0 or more, got -1"},
		{`"mirostat_eta":-1`, "'mirostat_eta' must be 0 or more, got -1"},
		{`"min_keep":-1`, "'min_keep' must be 0 or more, got -1"},
		{`"n_keep":-2`, "'n_keep' must be at least -1 (got -2)"},
		{`"n_discard":-1`, "'n_discard' must be at least 0 (got -1)"},
		{`"n_cache_reuse":-1`, "'n_cache_reuse' must be at least 0 (got -1)"},
		{`"t_max_predict_ms":-5`, "'t_max_predict_ms' must be at least 0 (got -5)"},
		{`"logit_bias":5`, "'logit_bias' must be an array of [token, bias] pairs or an object"},
		{`"logit_bias":[[1]]`, "'logit_bias' entry 0 must be a [token, bias] pair"},
		{`"logit_bias":[[1,2],7]`, "'logit_bias' entry 1 must be a [token, bias] pair"},
		{`"logit_bias":[[1,true]]`, "'logit_bias' entry 0: the bias must be a number or false"},
		{`"logit_bias":[[1,"x"]]`, "'logit_bias' entry 0: the bias must be a number or false"},
		{`"logit_bias":[[99999,"x"]]`, "'logit_bias' entry 0: the bias must be a number or false"},
		{`"logit_bias":[[{},1]]`, "'logit_bias' entry 0: the token must be an integer id or a string"},
		{`"logit_bias":[[1.5,1]]`, "'logit_bias' entry 0: the token must be an integer id or a string"},
		{`"logit_bias":{"3":"x"}`, `'logit_bias' token "3": the bias must be a number or false`},
		{`"logit_bias":{"a":true}`, `'logit_bias' token "a": the bias must be a number or false`},
		{`"samplers":["top_k","bogus"]`, `'samplers' has an unknown sampler "bogus"`},
		{`"samplers":[1]`, "'samplers' must be an array of names or a string of letters"},
		{`"samplers":"kq"`, "'samplers' has an unknown sampler letter 'q'"},
		{`"samplers":{}`, "'samplers' must be an array of names or a string of letters"},
		{`"speculative.n_max":-1`, "'speculative.n_max' must be 0 or more, got -1"},
		{`"speculative.n_min":-2`, "'speculative.n_min' must be 0 or more, got -2"},
		{`"speculative.p_min":1.5`, "'speculative.p_min' must be between 0 and 1, got 1.5"},
	}
	for _, c := range cases {
		for _, ep := range []string{"/completion", "/v1/chat/completions"} {
			h := newHarness(t)
			body := `{"prompt":"Once",` + c.fields + `}`
			if ep != "/completion" {
				body = `{"messages":[{"role":"user","content":"Hi"}],` + c.fields + `}`
			}
			rec := h.do(t, http.MethodPost, ep, body)
			if rec.Code != http.StatusBadRequest {
				t.Errorf("%s %s: status %d, want 400: %s", ep, c.fields, rec.Code, rec.Body)
				continue
			}
			if got := lookup(t, decodeJSON(t, rec.Body.Bytes()), "error.message"); got != c.want {
				t.Errorf("%s %s: message %q, want %q", ep, c.fields, got, c.want)
			}
		}
	}
}

// TestLogitBiasOutOfRange: as llama-server (which keeps only ids with 0 <= id < n_vocab),
// out-of-range token ids are skipped, not refused; the other entries still apply.
func TestLogitBiasOutOfRange(t *testing.T) {
	cases := []struct {
		fields string
		want   []engine.LogitBias
	}{
		{`"logit_bias":[[99999,1],[5,2]]`, []engine.LogitBias{{Token: 5, Bias: 2}}},
		{`"logit_bias":[[-1,1],[6,false]]`, []engine.LogitBias{{Token: 6, Bias: float32(math.Inf(-1))}}},
		{`"logit_bias":[[100000000000000000000,1]]`, []engine.LogitBias{}},
		{`"logit_bias":{"99999":1,"7":-2}`, []engine.LogitBias{{Token: 7, Bias: -2}}},
		{`"logit_bias":{"-3":1}`, []engine.LogitBias{}},
		{`"logit_bias":{"100000000000000000000":false}`, []engine.LogitBias{}},
	}
	for _, c := range cases {
		for _, ep := range []string{"/completion", "/v1/chat/completions"} {
			h := newHarness(t)
			body := `{"prompt":"Once","n_predict":1,` + c.fields + `}`
			if ep != "/completion" {
				body = `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":1,` + c.fields + `}`
			}
			rec := h.do(t, http.MethodPost, ep, body)
			if rec.Code != http.StatusOK {
				t.Errorf("%s %s: status %d, want 200: %s", ep, c.fields, rec.Code, rec.Body)
				continue
			}
			if got := h.fake.lastTask(t).Params.LogitBias; !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s %s: logit bias %v, want %v", ep, c.fields, got, c.want)
			}
		}
	}
}

// TestSamplingEngine runs the new fields through the real engine on stories260K.
func TestSamplingEngine(t *testing.T) {
	b := enginetest.Load(t, "models", "stories260K.gguf")
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(b)
	h := &harness{srv: srv, h: srv.Handler()}
	content := func(fields string) string {
		t.Helper()
		rec := h.do(t, http.MethodPost, "/completion", `{"prompt":"Once upon a time","n_predict":48,"temperature":0`+fields+`}`)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		return decodeJSON(t, rec.Body.Bytes())["content"].(string)
	}
	plain := content("")
	if !strings.HasPrefix(plain, ",") {
		t.Fatalf("greedy output %q does not start with \",\"", plain)
	}
	if pen := content(`,"repeat_penalty":1.5`); pen == plain {
		t.Errorf("repeat_penalty 1.5 left the greedy output unchanged: %q", pen)
	}
	for _, ban := range []string{`,"logit_bias":[[432,false]]`, `,"logit_bias":{"432":false}`} {
		if got := content(ban); strings.HasPrefix(got, ",") {
			t.Errorf("%s: output still starts with \",\": %q", ban, got)
		}
	}
}
