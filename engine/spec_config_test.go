package engine

import (
	"strings"
	"testing"
)

func TestSpecConfigResolve(t *testing.T) {
	with := func(edit func(*SpecConfig)) SpecConfig {
		c := DefaultSpecConfig()
		edit(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  SpecConfig
		typ  SpecType
		err  string
	}{
		{"default is off", DefaultSpecConfig(), SpecNone, ""},
		{"a draft model turns it on", with(func(c *SpecConfig) { c.DraftModel = "d.gguf" }), SpecDraft, ""},
		{"n-gram", with(func(c *SpecConfig) { c.Type = SpecNgram }), SpecNgram, ""},
		{"draft type without a model", with(func(c *SpecConfig) { c.Type = SpecDraft }), "", "speculative type draft-simple needs a draft model (-md)"},
		{"none with a model", with(func(c *SpecConfig) { c.Type, c.DraftModel = SpecNone, "d.gguf" }), "", "a draft model needs speculative type draft-simple, not none"},
		{"n-gram with a model", with(func(c *SpecConfig) { c.Type, c.DraftModel = SpecNgram, "d.gguf" }), "", "give a draft model (-md) or ngram-simple, not both"},
		{"unknown type", with(func(c *SpecConfig) { c.Type = "ngram-cache" }), "", `unknown speculative type "ngram-cache" (supported: none, draft-simple, ngram-simple)`},
		{"n-gram size", with(func(c *SpecConfig) { c.Type, c.NgramN = SpecNgram, 0 }), "", "n-gram sizes must be at least 1, got n 0 and m 48"},
		{"draft max", with(func(c *SpecConfig) { c.DraftModel, c.NMax = "d.gguf", 0 }), "", "the draft maximum must be at least 1, got 0"},
		{"draft min above max", with(func(c *SpecConfig) { c.DraftModel, c.NMin = "d.gguf", 17 }), "", "the draft minimum must be between 0 and the maximum 16, got 17"},
		{"p min", with(func(c *SpecConfig) { c.DraftModel, c.PMin = "d.gguf", 1.5 }), "", "the draft probability minimum must be between 0 and 1, got 1.5"},
	} {
		got, err := tc.cfg.resolve()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		case tc.err == "" && got.Type != tc.typ:
			t.Errorf("%s: type %q, want %q", tc.name, got.Type, tc.typ)
		}
	}
}

// TestSpecLimits checks the per-request overrides: n_max capped by the engine's, n_min by
// n_max, -1 keeping the engine's values.
func TestSpecLimits(t *testing.T) {
	sp := &speculator{cfg: SpecConfig{NMax: 8, NMin: 2, PMin: 0.5}}
	p := DefaultParams()
	if a, b, c := sp.limits(p); a != 8 || b != 2 || c != 0.5 {
		t.Errorf("defaults: %d %d %v", a, b, c)
	}
	p.SpecNMax, p.SpecNMin, p.SpecPMin = 20, 30, 0
	if a, b, c := sp.limits(p); a != 8 || b != 8 || c != 0 {
		t.Errorf("overrides: %d %d %v, want 8 8 0", a, b, c)
	}
	p.SpecNMax = 3
	if a, b, _ := sp.limits(p); a != 3 || b != 3 {
		t.Errorf("n_max 3: %d %d", a, b)
	}
}
