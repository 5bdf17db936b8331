package engine

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// SpecType names a speculative decoding method as llama.cpp's --spec-type does.
type SpecType string

// Speculative decoding methods.
const (
	SpecNone  SpecType = "none"
	SpecDraft SpecType = "draft-simple" // a smaller model with the same vocabulary drafts
	SpecNgram SpecType = "ngram-simple" // prompt lookup: the continuation of an earlier n-gram
)

// SpecConfig configures speculative decoding: each turn, every generating slot may add
// drafted tokens after its next token, and the model checks them all in the same batch.
type SpecConfig struct {
	// Type is the method; empty means SpecDraft when DraftModel is set, else SpecNone.
	Type SpecType
	// DraftModel is the draft model's GGUF file (llama-server's -md); it must share the
	// target's vocabulary.
	DraftModel string
	// NMax is the most tokens drafted per turn and slot (--draft-max); NMin the fewest worth
	// verifying (--draft-min): a shorter draft is dropped.
	NMax, NMin int
	// PMin stops a draft model's draft at the first token it gives a probability below PMin
	// (--draft-p-min).
	PMin float32
	// NgramN is the length of the n-gram looked up (--spec-ngram-size-n), NgramM the most
	// tokens that follow it proposed (--spec-ngram-size-m).
	NgramN, NgramM int
}

// DefaultSpecConfig is llama-server's default: no type (off, or SpecDraft once a DraftModel
// is set), --draft-max 16, --draft-min 0, --draft-p-min 0.75, --spec-ngram-size-n 12 and
// --spec-ngram-size-m 48.
func DefaultSpecConfig() SpecConfig {
	return SpecConfig{NMax: 16, PMin: 0.75, NgramN: 12, NgramM: 48}
}

// Validate reports what is wrong with the configuration, as Load would.
func (c SpecConfig) Validate() error {
	_, err := c.resolve()
	return err
}

// resolve checks the configuration and settles its type.
func (c SpecConfig) resolve() (SpecConfig, error) {
	if c.Type == "" {
		c.Type = SpecNone
		if c.DraftModel != "" {
			c.Type = SpecDraft
		}
	}
	switch c.Type {
	case SpecNone:
		if c.DraftModel != "" {
			return c, fmt.Errorf("engine: a draft model needs speculative type %s, not %s", SpecDraft, c.Type)
		}
		return c, nil
	case SpecDraft:
		if c.DraftModel == "" {
			return c, fmt.Errorf("engine: speculative type %s needs a draft model (-md)", SpecDraft)
		}
	case SpecNgram:
		if c.DraftModel != "" {
			return c, fmt.Errorf("engine: speculative type %s drafts without a model; give a draft model (-md) or %s, not both", SpecNgram, SpecNgram)
		}
		if c.NgramN < 1 || c.NgramM < 1 {
			return c, fmt.Errorf("engine: n-gram sizes must be at least 1, got n %d and m %d", c.NgramN, c.NgramM)
		}
	default:
		return c, fmt.Errorf("engine: unknown speculative type %q (supported: %s, %s, %s)", c.Type, SpecNone, SpecDraft, SpecNgram)
	}
	switch {
	case c.NMax < 1:
		return c, fmt.Errorf("engine: the draft maximum must be at least 1, got %d", c.NMax)
	case c.NMin < 0 || c.NMin > c.NMax:
		return c, fmt.Errorf("engine: the draft minimum must be between 0 and the maximum %d, got %d", c.NMax, c.NMin)
	case !(c.PMin >= 0 && c.PMin <= 1):
		return c, fmt.Errorf("engine: the draft probability minimum must be between 0 and 1, got %v", c.PMin)
	}
	return c, nil
}

// SpecStats are the engine's cumulative speculative decoding counters, llama-server's
// llamacpp:spec_decode_num_drafts_total (verification steps with a draft),
// spec_decode_num_draft_tokens_total and spec_decode_num_accepted_tokens_total.
type SpecStats struct {
	Drafts, DraftTokens, Accepted int64
}

// speculator is the engine's speculative decoding state.
type speculator struct {
	cfg SpecConfig
	// The draft model, its cache (a region per slot) and the tokens each region holds; nil
	// for n-gram drafting.
	draft  *model.Model
	kv     *model.KVCache
	region int
	cached [][]int32
	// saved, for a recurrent draft model, is how many of a slot's cached tokens the state
	// kept in its second state slot follows: taken as a turn's drafting starts, returned to
	// when the cached tokens part from the slot's context (draft_model.go's draftRestore).
	saved []int

	drafts, drafted, accepted atomic.Int64
}

// SpecStats returns the speculative decoding counters; safe for concurrent use.
func (e *Engine) SpecStats() SpecStats {
	if e.spec == nil {
		return SpecStats{}
	}
	sp := e.spec
	return SpecStats{Drafts: sp.drafts.Load(), DraftTokens: sp.drafted.Load(), Accepted: sp.accepted.Load()}
}

// limits are a request's draft bounds: its overrides of the engine's, the maximum capped by
// the engine's (batch and logits buffers are sized for it), the minimum by the maximum as in
// llama-server.
func (sp *speculator) limits(p Params) (nMax, nMin int, pMin float32) {
	nMax, nMin, pMin = sp.cfg.NMax, sp.cfg.NMin, sp.cfg.PMin
	if p.SpecNMax >= 0 {
		nMax = min(p.SpecNMax, sp.cfg.NMax)
	}
	if p.SpecNMin >= 0 {
		nMin = p.SpecNMin
	}
	if p.SpecPMin >= 0 {
		pMin = p.SpecPMin
	}
	return nMax, min(nMin, nMax), pMin
}

// draftWant is a generating slot that may draft up to k tokens this turn.
type draftWant struct {
	s    *slot
	k    int
	nMin int
	pMin float32
}

// propose drafts for every generating slot before a turn's batch is built, and returns the
// drafts by slot id (nil when speculative decoding is off). A slot drafts at most what its
// request still needs, what its context has room for and what the batch has room for after
// one token per generating slot.
func (e *Engine) propose() [][]int32 {
	sp := e.spec
	if sp == nil {
		return nil
	}
	budget := e.batch
	for _, s := range e.slots {
		if s.gen != nil && s.gen.promptDone {
			budget -= 1 + len(s.replay)
		}
	}
	var wants []draftWant
	for _, s := range e.slots {
		g := s.gen
		if g == nil || !g.promptDone || budget <= 0 || len(s.replay) > 0 {
			continue
		}
		if sp.draft != nil && g.images {
			continue // the draft model cannot read an image's rows
		}
		nMax, nMin, pMin := sp.limits(g.p)
		k := min(nMax, budget, e.slotCtx-1-len(s.cached))
		if g.p.NPredict >= 0 {
			k = min(k, g.p.NPredict-g.res.TokensPredicted-1)
		}
		if k < max(nMin, 1) {
			continue
		}
		wants = append(wants, draftWant{s: s, k: k, nMin: nMin, pMin: pMin})
		budget -= k
	}
	drafts := make([][]int32, len(e.slots))
	if len(wants) == 0 {
		return drafts
	}
	if sp.draft != nil {
		e.draftWithModel(wants, drafts)
		return drafts
	}
	for _, w := range wants {
		hist := append(append(make([]int32, 0, len(w.s.cached)+1), w.s.cached...), w.s.gen.next)
		d := ngramDraft(hist, sp.cfg.NgramN, min(sp.cfg.NgramM, w.k))
		if len(d) >= w.nMin {
			drafts[w.s.id] = d
		}
	}
	return drafts
}

// verify samples a generating slot's batch rows in order — its next token, then each
// drafted token — exactly as plain decoding would sample one token per turn, while the
// target keeps choosing the drafted tokens. Each row's token goes through step (stop
// strings, end of generation, n_predict, grammar, probabilities, streaming); the slot's
// cached tokens grow one row at a time, so the first rejected draft and everything after it
// is left out (its cache rows are overwritten later). As in llama-server
// (common_sampler_sample_and_accept_n), each row is sampled as if there were no draft and the
// draft is kept while it agrees: the sampler's draws and so the output are exactly those of
// plain decoding with the same seed, greedy or not.
func (e *Engine) verify(s *slot, toks []int32, logits []logitsRow) (Result, bool) {
	g, sp := s.gen, e.spec
	drafted := toks[1:]
	g.res.Timings.DraftN += len(drafted)
	sp.drafts.Add(1)
	sp.drafted.Add(int64(len(drafted)))
	accepted := 0
	defer func() {
		sp.accepted.Add(int64(accepted))
		e.log.Debug("draft verified", "slot", s.id, "drafted", len(drafted), "accepted", accepted)
	}()
	for i, row := range logits {
		s.cached = append(s.cached, toks[i])
		final, done := e.step(s, row)
		if done {
			return final, true
		}
		if i == len(drafted) || g.next != drafted[i] {
			break
		}
		accepted++
		g.res.Timings.DraftNAccepted++
	}
	return Result{}, false
}

// keptState is the state slot that keeps slot id's recurrent state as it was before its
// draft, in a cache of two state slots for each of nSlots slots: the target's before the
// verification pass (Batch.StateCopies), a recurrent draft model's before its drafting.
func keptState(id, nSlots int) int { return nSlots + id }

// stateSlots is how many recurrent state slots a cache for nSlots slots holds: one a slot,
// and with kept a second one a slot (keptState) for drafts that may be taken back.
func stateSlots(nSlots int, kept bool) int {
	if kept {
		return 2 * nSlots
	}
	return nSlots
}

// rollBack returns a recurrent model's slot s to its state before a verification pass whose
// draft was partly rejected, as llama-server restores its speculative checkpoint: the state
// the pass kept (keptState) goes back into the slot's, and the cache keeps its first from
// tokens. The rows verified and kept (the slot's next token and the accepted drafts, already
// sampled and sent) are evaluated again with the next turn's token (slot.replay), as
// llama-server replays the accepted tokens; a slot that is done keeps none of them. On
// failure the slot's cache is dropped, its state no longer being known.
func (e *Engine) rollBack(s *slot, from int, done bool) error {
	if !done {
		s.replay = slices.Clone(s.cached[from:])
	}
	if err := e.model.CopyStates(e.kv, []model.StateCopy{{Src: keptState(s.id, len(e.slots)), Dst: s.id}}); err != nil {
		s.replay = nil
		e.truncate(s, 0)
		return err
	}
	e.truncate(s, from)
	return nil
}
