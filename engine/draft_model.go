package engine

import (
	"fmt"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// loadDraft loads the draft model, checks that it shares the target's vocabulary and gives
// it a cache with a region per slot. A region holds the slot's context plus NMax rows, so
// the drafting passes of a slot near the end of its context stay inside its own region.
func loadDraft(dev *gpu.Device, cfg SpecConfig, target *model.Model, opts model.Options, nSlots, slotCtx int, logger *log.Logger) (*speculator, error) {
	f, err := gguf.Open(cfg.DraftModel)
	if err != nil {
		return nil, fmt.Errorf("draft model: %w", err)
	}
	defer f.Close()
	opts.MaxOutputs, opts.Progress = nSlots, nil
	m, err := model.Load(dev, f, opts)
	if err != nil {
		return nil, fmt.Errorf("load draft model %s: %w", cfg.DraftModel, err)
	}
	if err := vocabsCompatible(target.Tokenizer, m.Tokenizer, target.Config.NVocab, m.Config.NVocab); err != nil {
		m.Close()
		return nil, fmt.Errorf("draft model %s: %w", cfg.DraftModel, err)
	}
	region := slotCtx + cfg.NMax
	kv, err := m.NewKVCacheFor(region*nSlots, stateSlots(nSlots, true)) // used by a recurrent model only
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("draft model: %w", err)
	}
	c := m.Config
	logger.Info("draft model loaded", "path", cfg.DraftModel, "arch", c.Arch, "layers", c.NLayer, "n_embd", c.NEmbd, "type", c.FileType,
		"draft_max", cfg.NMax, "draft_min", cfg.NMin, "draft_p_min", cfg.PMin)
	sp := &speculator{cfg: cfg, draft: m, kv: kv, region: region, cached: make([][]int32, nSlots)}
	if m.Recurrent() {
		sp.saved = make([]int, nSlots)
	}
	return sp, nil
}

// vocabsCompatible is llama.cpp's common_speculative_are_compatible, made strict: drafted ids
// are target ids, so the two vocabularies must be the same — same tokenizer type, size,
// special tokens and token texts.
func vocabsCompatible(target, draft *tokenizer.Tokenizer, targetLogits, draftLogits int) error {
	if target.Model() != draft.Model() {
		return fmt.Errorf("the draft model's vocabulary type (%s) must match the target's (%s)", draft.Model(), target.Model())
	}
	if target.NVocab() != draft.NVocab() || targetLogits != draftLogits {
		return fmt.Errorf("the draft model's vocabulary has %d tokens (%d logits), the target's %d (%d logits): they must match",
			draft.NVocab(), draftLogits, target.NVocab(), targetLogits)
	}
	if target.AddBOS() != draft.AddBOS() || target.AddEOS() != draft.AddEOS() || target.BOS() != draft.BOS() || target.EOS() != draft.EOS() {
		return fmt.Errorf("the draft model's special tokens must match the target's (bos %d/%d, eos %d/%d, add_bos %v/%v, add_eos %v/%v)",
			draft.BOS(), target.BOS(), draft.EOS(), target.EOS(), draft.AddBOS(), target.AddBOS(), draft.AddEOS(), target.AddEOS())
	}
	for id := int32(0); int(id) < target.NVocab(); id++ {
		if t, d := target.TokenText(id), draft.TokenText(id); t != d || target.IsControl(id) != draft.IsControl(id) {
			kind := "token"
			if target.IsControl(id) || draft.IsControl(id) {
				kind = "special token"
			}
			return fmt.Errorf("the draft model's vocabulary must match the target's: %s %d is %q in the target, %q in the draft", kind, id, t, d)
		}
	}
	return nil
}

// firstDraftChunk is how many tokens the first DraftGreedy call of a turn drafts when
// --draft-p-min may cut the draft short; see draftWithModel.
const firstDraftChunk = 2

// draftWithModel fills drafts for every want with the draft model's greedy continuation of
// the slot's context (its cached tokens and next token), all slots batched: first the tokens
// a slot's draft cache lacks, then one pass per drafted token, each DraftGreedy call one
// command buffer that reads back only the drafted ids and probabilities. A draft stops at
// the first token below the request's p_min, at k tokens, and is dropped when shorter than
// its n_min. A failure only loses the drafts.
//
// p_min is only known once the probabilities are read back, so with p_min > 0 the drafts
// come in chunks of 2, 4, 8, ... tokens, continuing only the slots not yet cut: drafting all
// k at once would spend most of its passes on tokens that p_min discards (stories260K
// drafting for itself generated 7 times slower that way). With p_min 0 one call drafts all.
func (e *Engine) draftWithModel(wants []draftWant, drafts [][]int32) {
	sp := e.spec
	seqs := make([][]int32, len(wants)) // each slot's context and draft so far
	for i, w := range wants {
		seqs[i] = append(append(make([]int32, 0, len(w.s.cached)+1+w.k), w.s.cached...), w.s.gen.next)
		// Keep the shared prefix but always evaluate the last token: its logits start the draft.
		n := min(commonPrefix(sp.cached[w.s.id], seqs[i]), len(seqs[i])-1)
		if sp.saved != nil && n < len(sp.cached[w.s.id]) {
			n = e.draftRestore(w.s.id, n)
		}
		sp.cached[w.s.id] = sp.cached[w.s.id][:n]
	}
	if err := e.draftCatchUp(wants, seqs); err != nil {
		e.log.Error("draft model: catching up failed", "err", err)
		return
	}
	kept := make([]int, len(wants))
	active := make([]int, len(wants))
	for i := range active {
		active[i] = i
	}
	chunk := firstDraftChunk
	for call := 0; len(active) > 0; call++ {
		var first model.Batch
		steps, cuts := 0, false
		for _, i := range active {
			w := wants[i]
			base := int32(w.s.id * sp.region)
			if sp.saved != nil && call == 0 { // the state the draft starts from, to return to
				first.StateCopies = append(first.StateCopies, model.StateCopy{Src: w.s.id, Dst: keptState(w.s.id, len(sp.cached))})
				sp.saved[w.s.id] = len(sp.cached[w.s.id])
			}
			for p := len(sp.cached[w.s.id]); p < len(seqs[i]); p++ {
				first.Tokens = append(first.Tokens, seqs[i][p])
				first.Pos = append(first.Pos, int32(p))
				first.Base = append(first.Base, base)
				if sp.saved != nil {
					first.States = append(first.States, int32(w.s.id))
				}
			}
			first.Logits = append(first.Logits, len(first.Tokens)-1)
			steps = max(steps, w.k-kept[i])
			cuts = cuts || w.pMin > 0
		}
		if cuts {
			steps = min(steps, chunk)
		}
		ids, probs, err := guard(func() ([][]int32, [][]float32, error) { return sp.draft.DraftGreedy(sp.kv, first, steps) })
		if err != nil {
			e.log.Error("draft model: drafting failed", "err", err)
			break
		}
		var next []int
		for j, i := range active {
			w := wants[i]
			// The cache now holds the sequence and every token this call drafted but the last.
			sp.cached[w.s.id] = append(seqs[i][:len(seqs[i]):len(seqs[i])], ids[j][:steps-1]...)
			cut := false
			for s := 0; s < steps && kept[i] < w.k; s++ {
				if probs[j][s] < w.pMin {
					cut = true
					break
				}
				seqs[i] = append(seqs[i], ids[j][s])
				kept[i]++
			}
			if !cut && kept[i] < w.k {
				next = append(next, i)
			}
		}
		active, chunk = next, 2*chunk
	}
	for i, w := range wants {
		if kept[i] >= max(w.nMin, 1) {
			drafts[w.s.id] = seqs[i][len(seqs[i])-kept[i]:]
		}
	}
}

// draftCatchUp evaluates, without logits, as much of the context the slots' draft caches
// lack as keeps the drafting pass's first batch within the batch size (the tokens right after
// a long prompt; normally nothing). Each slot's last token is left for the drafting pass.
func (e *Engine) draftCatchUp(wants []draftWant, ctxs [][]int32) error {
	sp := e.spec
	total := 0
	for i, w := range wants {
		total += len(ctxs[i]) - len(sp.cached[w.s.id])
	}
	for total > e.batch {
		var b model.Batch
		need := total - e.batch
		took := make([]int, len(wants))
		for i, w := range wants {
			have := len(sp.cached[w.s.id])
			rest := ctxs[i][have : len(ctxs[i])-1]
			take := min(len(rest), e.batch-len(b.Tokens), need-len(b.Tokens))
			for j, tok := range rest[:take] {
				b.Tokens = append(b.Tokens, tok)
				b.Pos = append(b.Pos, int32(have+j))
				b.Base = append(b.Base, int32(w.s.id*sp.region))
				if sp.saved != nil {
					b.States = append(b.States, int32(w.s.id))
				}
			}
			took[i] = take
		}
		if len(b.Tokens) == 0 { // more slots than the batch holds: DraftGreedy reports it
			return nil
		}
		if _, _, err := guard(func() ([][]int32, [][]float32, error) {
			_, err := sp.draft.ForwardBatch(sp.kv, b)
			return nil, nil, err
		}); err != nil {
			return err
		}
		for i, w := range wants {
			sp.cached[w.s.id] = ctxs[i][:len(sp.cached[w.s.id])+took[i]]
		}
		total -= len(b.Tokens)
	}
	return nil
}

// draftRestore returns a recurrent draft model's slot id, whose cached tokens part from its
// context after n of them, to the state kept as its last drafting began (speculator.saved),
// and returns how many tokens that state follows; 0, the state to be started anew, when it
// was kept past n or cannot be restored.
func (e *Engine) draftRestore(id, n int) int {
	sp := e.spec
	at := sp.saved[id]
	if at == 0 || at > n {
		return 0
	}
	if _, _, err := guard(func() ([][]int32, [][]float32, error) {
		return nil, nil, sp.draft.CopyStates(sp.kv, []model.StateCopy{{Src: keptState(id, len(sp.cached)), Dst: id}})
	}); err != nil {
		e.log.Error("draft model: restoring its state failed", "slot", id, "err", err)
		return 0
	}
	return at
}

// guard runs a draft model call, turning a GPU panic into an error as the engine's forward
// does, so a draft failure cannot take the server down.
func guard(f func() ([][]int32, [][]float32, error)) (ids [][]int32, probs [][]float32, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine: internal error: %v", p)
		}
	}()
	return f()
}
