package engine

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// shiftContext makes room in a slot whose context is full, as llama-server's context shift
// does: it keeps the first n_keep tokens (the whole prompt for -1, plus BOS), drops the
// n_discard after them (half of the rest by default) and moves the others down, turning their
// keys to the new positions, so generation goes on with a shortened past.
func (e *Engine) shiftContext(s *slot) error {
	g, n := s.gen, len(s.cached)
	nKeep := g.p.NKeep
	if nKeep < 0 {
		nKeep = len(g.prompt)
	}
	if e.tok.AddBOS() {
		nKeep++
	}
	nKeep = max(0, min(nKeep, e.slotCtx-4, n))
	nDiscard := g.p.NDiscard
	if nDiscard <= 0 {
		nDiscard = (n - nKeep) / 2
	}
	nDiscard = min(nDiscard, n-nKeep)
	if nDiscard == 0 {
		return fmt.Errorf("engine: context shift: nothing to discard (n_keep %d of %d tokens)", nKeep, n)
	}
	moves := []model.Shift{}
	if rest := n - nKeep - nDiscard; rest > 0 {
		moves = append(moves, model.Shift{Src: nKeep + nDiscard, Dst: nKeep, N: rest})
	}
	if err := e.moveCache(s, nKeep, moves); err != nil {
		return err
	}
	s.cached = append(s.cached[:nKeep], s.cached[nKeep+nDiscard:]...)
	e.truncate(s, len(s.cached))
	g.res.Truncated = true
	e.log.Debug("context shift", "slot", s.id, "n_keep", nKeep, "n_discard", nDiscard, "n_past", len(s.cached))
	return nil
}

// reuseChunks is llama-server's cache reuse (--cache-reuse, n_cache_reuse): after the common
// prefix of n tokens, chunks of at least minChunk tokens of s's cache that reappear in the
// prompt are moved to their prompt positions instead of being computed again. It returns the
// new number of cached prompt tokens; s.cached is set to that prefix of the prompt.
func (e *Engine) reuseChunks(s *slot, prompt []int32, n, minChunk int) (int, error) {
	cache := s.cached
	headC, headP := n, n
	var moves []model.Shift
	for headC < len(cache) && headP < len(prompt)-1 {
		m := 0
		for headC+m < len(cache) && headP+m < len(prompt)-1 && cache[headC+m] == prompt[headP+m] {
			m++
		}
		if m >= minChunk {
			if headC != headP {
				moves = append(moves, model.Shift{Src: headC, Dst: headP, N: m})
			}
			headC += m
			headP += m
		} else {
			headC++
		}
	}
	if headP == n {
		return n, nil
	}
	if err := e.moveCache(s, n, moves); err != nil {
		return 0, err
	}
	s.cached = append(s.cached[:0], prompt[:headP]...)
	e.truncate(s, headP)
	return headP, nil
}

// moveCache runs moves (all to positions >= from) on s's cache, first giving s private copies
// of the shared pages the moves write.
func (e *Engine) moveCache(s *slot, from int, moves []model.Shift) error {
	if len(moves) == 0 {
		return nil
	}
	end := 0
	for _, m := range moves {
		end = max(end, m.Dst+m.N)
	}
	var copies []model.RowCopy
	for i := from >> pageBits; i < pagesFor(end); i++ {
		if e.pool.refs[s.pages[i]] == 1 {
			continue
		}
		pg, ok := e.allocPage(s)
		if !ok {
			return errCacheFull
		}
		copies = append(copies, model.RowCopy{Src: int(s.pages[i]) << pageBits, Dst: int(pg) << pageBits, N: pageRows})
		e.pool.release(s.pages[i])
		s.pages[i] = pg
	}
	return e.model.ShiftKV(e.kv, pageBits, 0, s.pages, copies, moves)
}
