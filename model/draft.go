package model

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// draftScratch holds DraftGreedy's device buffers, grown as needed and kept between calls so
// their bind groups stay cached.
type draftScratch struct {
	out  *gpu.Buffer // picked ids, then their probabilities (u32 bits)
	plan *gpu.Buffer // each sequence's first drafted position, then its base
	// recSeqs is a recurrent model's sequences in the passes after the first: one token each.
	recSeqs *gpu.Buffer
}

func (d *draftScratch) release() {
	d.out.Release()
	d.plan.Release()
	d.recSeqs.Release()
	d.out, d.plan, d.recSeqs = nil, nil, nil
}

// ensure grows buffer *b to at least n u32 values.
func (m *Model) ensure(b **gpu.Buffer, name string, n int) error {
	if *b != nil && (*b).Size() >= uint64(n)*4 {
		return nil
	}
	(*b).Release()
	nb, err := m.dev.NewBuffer(name, uint64(n)*4)
	if err != nil {
		return fmt.Errorf("model: scratch %s: %w", name, err)
	}
	*b = nb
	return nil
}

// DraftGreedy proposes steps tokens for each of several sequences by greedy decoding, as a
// speculative decoding draft model does, without reading logits back between tokens: first
// holds each sequence's tokens not yet in the cache (its last token last) with one logits
// row per sequence, the sequence's last token. That pass and steps-1 passes of one token per
// sequence are recorded into one command buffer (more only if the dispatches overflow one),
// each pass's picks (gpu Argmax with FEED) becoming the next pass's tokens on the GPU.
//
// It returns, per sequence in the order of first.Logits, the picked ids and their softmax
// probabilities. Every drafted token but the last is written into the cache after the
// sequence's last token; the caller decides how many of them stay valid.
// The draft model's cache keeps one contiguous region per sequence (PageBits 0). A model with
// recurrent layers takes each sequence's state slot from first.States (the same for all its
// rows), and first.StateCopies run before the first pass: a caller keeps the states as they
// were before the draft, to return to them (CopyStates) when it is rejected.
func (m *Model) DraftGreedy(kv *KVCache, first Batch, steps int) (ids [][]int32, probs [][]float32, err error) {
	if m.next != nil {
		return nil, nil, fmt.Errorf("model: a draft model runs on one device, not split")
	}
	if m.enc != nil {
		return nil, nil, fmt.Errorf("model: %s is an embedding model: it does not generate text", m.Config.Arch)
	}
	if first.MPos != nil {
		return nil, nil, fmt.Errorf("model: a draft after an image's rows: the drafting loop advances a text token's M-RoPE positions only")
	}
	if err := m.checkBatch(kv, first); err != nil {
		return nil, nil, err
	}
	if first.PageBits != 0 || len(first.Copies) > 0 {
		// The argmax feed writes each next token's cache row as base + position.
		return nil, nil, fmt.Errorf("model: a draft needs contiguous cache regions (Batch.PageBits 0, no copies)")
	}
	seqs := len(first.Logits)
	if seqs == 0 || steps < 1 {
		return nil, nil, fmt.Errorf("model: a draft of %d steps for %d sequences", steps, seqs)
	}
	if seqs > m.maxBatch {
		return nil, nil, fmt.Errorf("model: a draft for %d sequences; the batch limit is %d", seqs, m.maxBatch)
	}
	plan := make([]int32, 2*seqs)
	lastPos := 0
	for i, row := range first.Logits {
		plan[i], plan[seqs+i] = first.Pos[row]+1, first.Base[row]
		// Passes after the first write the drafted tokens at plan[i] .. plan[i]+steps-2.
		if end := int(plan[i]) + steps - 2; steps > 1 && int(plan[seqs+i])+end >= kv.NCtx {
			return nil, nil, fmt.Errorf("model: a draft of %d tokens after position %d of the sequence at row %d overflows the cache of %d", steps, first.Pos[row], first.Base[row], kv.NCtx)
		}
		lastPos = max(lastPos, int(plan[i]))
	}
	if err := m.ensure(&m.draft.out, "draft_out", 2*steps*seqs); err != nil {
		return nil, nil, err
	}
	if err := m.ensure(&m.draft.plan, "draft_plan", 2*seqs); err != nil {
		return nil, nil, err
	}
	if err := m.upload(first); err != nil {
		return nil, nil, err
	}
	if err := m.uploadStates(kv, first); err != nil {
		return nil, nil, err
	}
	firstRec, stepRec := m.rec, gpu.RecurrentBatch{}
	if m.Recurrent() { // the passes after the first: token i is sequence i's, in its slot
		for i, row := range first.Logits {
			slot := 0
			if first.States != nil {
				slot = int(first.States[row])
			}
			stepRec.Seqs = append(stepRec.Seqs, gpu.RecurrentSeq{First: i, Tokens: 1, Slot: slot})
		}
		if err := m.ensure(&m.draft.recSeqs, "draft_rec_seqs", 3*seqs); err != nil {
			return nil, nil, err
		}
		if err := m.dev.Write(m.draft.recSeqs, 0, gpu.PackRecurrentSeqs(stepRec.Seqs)); err != nil {
			return nil, nil, err
		}
		stepRec.Buf = m.draft.recSeqs
	}
	if err := m.dev.Write(m.draft.plan, 0, gpu.Bytes(plan)); err != nil {
		return nil, nil, err
	}
	firstKeys := 0
	for _, p := range first.Pos {
		firstKeys = max(firstKeys, int(p)+1)
	}
	each := make([]int, seqs) // every row of a one-token-per-sequence pass has logits
	for i := range each {
		each[i] = i
	}
	c, s := m.Config, &m.scratch
	r, err := m.dev.Begin()
	if err != nil {
		return nil, nil, err
	}
	recordStateCopies(r, kv, first.StateCopies)
	perPass := 0
	for step := 0; step < steps; step++ {
		if step == 0 {
			m.rec = firstRec
			m.record(r, kv, len(first.Tokens), first.sequences(), firstKeys, first.PageBits, first.Logits)
		} else {
			if r.Dispatches()+perPass > gpu.MaxDispatches {
				if err := r.Submit(); err != nil {
					return nil, nil, err
				}
				if r, err = m.dev.Begin(); err != nil {
					return nil, nil, err
				}
			}
			before := r.Dispatches()
			m.rec = stepRec
			m.record(r, kv, seqs, seqs, lastPos+step, 0, each)
			perPass = r.Dispatches() - before + 1
		}
		var feed *gpu.ArgmaxFeed
		if step < steps-1 {
			feed = &gpu.ArgmaxFeed{IDs: s.ids, Pos: s.pos, Plan: m.draft.plan, Step: step}
			if c.MRoped() {
				feed.MPos = s.mpos
			}
		}
		r.Argmax(s.logits, m.draft.out, c.NVocab, seqs, step*seqs, steps*seqs, feed)
		if step == 0 {
			perPass = r.Dispatches() // an upper bound for the later, smaller passes
		}
	}
	raw, err := r.SubmitAndRead(m.draft.out, 0, uint64(2*steps*seqs)*4)
	if err != nil {
		return nil, nil, err
	}
	words := gpu.Float32s(raw)
	ids, probs = make([][]int32, seqs), make([][]float32, seqs)
	for i := range seqs {
		for step := range steps {
			at := step*seqs + i
			ids[i] = append(ids[i], int32(math.Float32bits(words[at])))
			probs[i] = append(probs[i], words[steps*seqs+at])
		}
	}
	return ids, probs, nil
}
