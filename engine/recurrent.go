package engine

import (
	"slices"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// A hybrid model's recurrent layers (qwen35) keep one state per sequence instead of a row per
// token: slot s runs in state slot s.id, which always holds the state after the slot's cached
// tokens. That state cannot be cut back as pages can, so a prefix shorter than what a holder
// cached is reused only through a context checkpoint, as llama-server does: a copy of the
// state in host memory after the first n tokens of a prompt, taken while the prompt is read
// (4 + the batch size and 4 tokens before its end, so that a follow-up request that extends
// the conversation finds one), kept with the holder's pages (its own, a cache entry's, a busy
// slot's) and restored into the slot that reuses them.

// DefaultCtxCheckpoints is llama-server's default --ctx-checkpoints: the most checkpoints a
// slot keeps.
const DefaultCtxCheckpoints = 32

// checkpoint is a sequence's recurrent state after its first n cached tokens
// (model.ReadState's bytes), in host memory; never changed once taken, so holders share them.
type checkpoint struct {
	n     int
	state []byte
}

// statePrefix is, for a recurrent model, how much of prompt holder o can give slot s under the
// scales key, and the checkpoint to restore for it: s's own cache with its live state when the
// prompt extends all of it (nil checkpoint), else o's latest checkpoint within the shared
// prefix. At least one prompt token is always left to evaluate, for its logits.
func (e *Engine) statePrefix(s, o *slot, prompt []int32, key string) (int, *checkpoint) {
	n := min(o.prefixFor(prompt, key), len(prompt)-1)
	if o == s && len(s.cached) <= n {
		return len(s.cached), nil
	}
	for i := len(o.ckpts) - 1; i >= 0; i-- {
		if c := &o.ckpts[i]; c.n <= n {
			return c.n, c
		}
	}
	return 0, nil
}

// startRecurrent gives slot s the longest prefix of prompt whose state can be had: its own
// live state, or a checkpoint of its own, of a prompt cache entry or of a busy slot (sharing
// that holder's pages up to it), else none. It returns the tokens reused.
func (e *Engine) startRecurrent(s *slot, prompt []int32, key string, skip bool) (int, error) {
	best, bestN, bestCk := s, 0, (*checkpoint)(nil)
	if !skip {
		for _, o := range slices.Concat([]*slot{s}, e.cacheEntries(), e.slots) {
			if o != s && o.idle() && o.id >= 0 {
				continue // an idle slot shares once its prompt is in the cache (promptcache.go)
			}
			if n, ck := e.statePrefix(s, o, prompt, key); n > bestN {
				best, bestN, bestCk = o, n, ck
			}
		}
	}
	if best != s {
		e.adopt(s, best, bestN)
	}
	e.truncate(s, bestN)
	if bestCk == nil {
		return bestN, nil
	}
	if err := e.model.WriteState(e.kv, s.id, bestCk.state); err != nil {
		e.truncate(s, 0)
		return 0, err
	}
	e.log.Debug("restored context checkpoint", "slot", s.id, "n_tokens", bestCk.n, "size_mib", float64(len(bestCk.state))/(1<<20))
	return bestN, nil
}

// checkpointCut shortens a prompt chunk of slot s so that it ends where llama-server would
// checkpoint (a recurrent model's state is then saved, afterChunk). A sliding-window model
// takes the same cuts with no checkpoint: its cache here keeps every key, but llama-server's
// pieces are what make its arithmetic (a batch of one token multiplies in another order).
func (e *Engine) checkpointCut(s *slot, prompt, chunk []int32) []int32 {
	if !e.promptCuts || e.ctxCheckpoints <= 0 {
		return chunk
	}
	for _, at := range e.checkpointsAt(len(prompt)) {
		if at > len(s.cached) && at < len(s.cached)+len(chunk) {
			chunk = chunk[:at-len(s.cached)]
		}
	}
	return chunk
}

// checkpointsAt are the prompt positions at which a prompt of n tokens is checkpointed:
// llama-server's checkpoint_offsets, 4 + the batch size and 4 tokens before its end.
func (e *Engine) checkpointsAt(n int) [2]int {
	return [2]int{n - 4 - e.batch, n - 4}
}

// afterChunk takes a checkpoint of slot s when its prompt's evaluated tokens reached a
// checkpoint position; the oldest goes when the slot has its most.
func (e *Engine) afterChunk(s *slot, prompt []int32) {
	if !e.recurrent || e.ctxCheckpoints <= 0 || len(s.cached) >= len(prompt) {
		return
	}
	n := len(s.cached)
	if at := e.checkpointsAt(len(prompt)); n != at[0] && n != at[1] || n <= 0 {
		return
	}
	if k := len(s.ckpts); k > 0 && s.ckpts[k-1].n >= n {
		return // the prompt started from this checkpoint
	}
	state, err := e.model.ReadState(e.kv, s.id)
	if err != nil {
		e.log.Warn("context checkpoint failed", "slot", s.id, "err", err)
		return
	}
	if len(s.ckpts) >= e.ctxCheckpoints {
		e.log.Debug("erasing old context checkpoint", "slot", s.id, "n_tokens", s.ckpts[0].n)
		s.ckpts = slices.Delete(s.ckpts, 0, 1)
	}
	s.ckpts = append(s.ckpts, checkpoint{n: n, state: state})
	e.log.Debug("created context checkpoint", "slot", s.id, "count", len(s.ckpts), "max", e.ctxCheckpoints, "n_tokens", n,
		"size_mib", float64(len(state))/(1<<20))
}

// keepCheckpoints drops the checkpoints of s past its first n cached tokens.
func keepCheckpoints(s *slot, n int) {
	i := len(s.ckpts)
	for i > 0 && s.ckpts[i-1].n > n {
		i--
	}
	clear(s.ckpts[i:])
	s.ckpts = s.ckpts[:i]
}

// cacheState gives prompt cache entry entry, just made from slot s, the slot's checkpoints and
// its live state as one more: an entry has no state slot, so its whole prompt is reused
// through that checkpoint.
func (e *Engine) cacheState(entry, s *slot) {
	if !e.recurrent {
		return
	}
	entry.ckpts = slices.Clone(s.ckpts)
	state, err := e.model.ReadState(e.kv, s.id)
	if err != nil {
		e.log.Warn("prompt cache: the recurrent state was not saved", "slot", s.id, "err", err)
		return
	}
	entry.ckpts = append(entry.ckpts, checkpoint{n: len(s.cached), state: state})
}

// appendStates adds n rows of slot s to a batch's state slots, for a recurrent model.
func (e *Engine) appendStates(b *model.Batch, s *slot, n int) {
	if !e.recurrent {
		return
	}
	for range n {
		b.States = append(b.States, int32(s.id))
	}
}
