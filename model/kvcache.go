package model

import (
	"fmt"
	"slices"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// splitAttentionFrom is the context length from which decoding on a GPU splits each head's
// keys over several workgroups (gpu.AttentionSplit); below it one workgroup per head suffices.
const splitAttentionFrom = 512

// KVCache is the keys and values of every attention layer for NCtx cache rows, and a hybrid
// model's recurrent state for States sequences (recurrent_state.go), resident on the GPU. How
// rows belong to sequences is the caller's business, told per batch: contiguous regions
// (Batch.Base) or pages listed in page tables (Batch.PageBits, Batch.Pages).
type KVCache struct {
	NCtx   int // cache rows (token slots) per layer, shared by all sequences
	States int // recurrent state slots (0 for a model without recurrent layers)
	// k and v are per layer; nil for recurrent layers and for layers that read an earlier
	// layer's cache (Gemma 4: Config.kvSource).
	k, v []*gpu.Buffer
	part *gpu.Buffer // split-K attention partials, on GPUs with contexts long enough to split
	rows []uint64    // per layer, the bytes of one cache row (one token's keys, or values)
	// conv and ssm are the recurrent layers' states, States slots each; nil for attention
	// layers.
	conv, ssm []*gpu.Buffer
	// next is the next stage's cache of a split model (split.go): its layers, on its device.
	// Each stage's k, v, conv and ssm are indexed by layer, nil for the layers of others.
	next *KVCache
}

// NewKVCache allocates a cache of nCtx rows, f16 unless the model was loaded with KVF32, and
// one recurrent state slot (NewKVCacheFor).
func (m *Model) NewKVCache(nCtx int) (*KVCache, error) { return m.NewKVCacheFor(nCtx, 1) }

// NewKVCacheFor allocates a cache of nCtx rows and, for a model with recurrent layers, states
// recurrent state slots: one per sequence that runs at once.
func (m *Model) NewKVCacheFor(nCtx, states int) (*KVCache, error) {
	kv, err := m.newStageKV(nCtx, states)
	if err != nil || m.next == nil {
		return kv, err
	}
	if kv.next, err = m.next.NewKVCacheFor(nCtx, states); err != nil {
		kv.Release()
		return nil, err
	}
	return kv, nil
}

// newStageKV allocates this stage's part of a cache (NewKVCacheFor): its layers'.
func (m *Model) newStageKV(nCtx, states int) (*KVCache, error) {
	c := m.Config
	kv := &KVCache{NCtx: nCtx, rows: make([]uint64, c.NLayer)}
	if m.Recurrent() {
		if err := m.newStates(kv, max(states, 1)); err != nil {
			kv.Release()
			return nil, err
		}
	}
	for i := 0; i < c.NLayer; i++ {
		if i < m.lo || i >= m.hi || c.Recurrent != nil && c.Recurrent[i] || c.kvSource(i) != i {
			kv.k, kv.v = append(kv.k, nil), append(kv.v, nil)
			continue
		}
		row := uint64(m.kvRowBytes(i))
		kv.rows[i] = row
		k, err := m.dev.NewBuffer(fmt.Sprintf("cache_k_l%d", i), uint64(nCtx)*row)
		if err != nil {
			kv.Release()
			return nil, fmt.Errorf("model: KV cache of %d tokens: %w", nCtx, err)
		}
		kv.k = append(kv.k, k)
		v, err := m.dev.NewBuffer(fmt.Sprintf("cache_v_l%d", i), uint64(nCtx)*row)
		if err != nil {
			kv.Release()
			return nil, fmt.Errorf("model: KV cache of %d tokens: %w", nCtx, err)
		}
		kv.v = append(kv.v, v)
	}
	if !m.dev.BarrierFree && nCtx >= splitAttentionFrom {
		var err error
		kv.part, err = m.dev.NewBuffer("attention_partials", uint64(gpu.AttentionSplitSize(1, c.NHead, c.maxHeadDim(), nCtx))*4)
		if err != nil {
			kv.Release()
			return nil, fmt.Errorf("model: KV cache of %d tokens: %w", nCtx, err)
		}
	}
	return kv, nil
}

// Release frees the cache's device memory, every stage's.
func (kv *KVCache) Release() {
	for _, b := range kv.buffers() {
		b.Release()
	}
	kv.k, kv.v, kv.part, kv.conv, kv.ssm = nil, nil, nil, nil, nil
	if kv.next != nil {
		kv.next.Release()
		kv.next = nil
	}
}

// buffers lists the cache's buffers: keys, values, partials and states (nil where none).
func (kv *KVCache) buffers() []*gpu.Buffer {
	return slices.Concat(kv.k, kv.v, []*gpu.Buffer{kv.part}, kv.conv, kv.ssm)
}

// Batch is one forward pass over tokens of one or more sequences: each token with its
// position and where its sequence lives in the cache, and the batch rows whose logits are
// wanted, in the order they are returned.
//
// With PageBits 0, Base[i] is the first cache row of token i's sequence (sequences keep
// contiguous regions). Otherwise the cache is a pool of pages of 2^PageBits rows and Base[i]
// is the index in Pages where token i's sequence's page table starts: the page numbers holding
// its positions 0, 2^PageBits, ... in order. Copies, run first, let a sequence take a private
// copy of rows it shares with another (copy-on-write) in the same submit.
type Batch struct {
	Tokens []int32 // token ids, each below Config.NVocab
	Pos    []int32 // each token's position in its sequence
	Base   []int32 // each token's sequence: first cache row, or page-table index in Pages
	Logits []int   // batch rows whose logits are returned, in return order

	PageBits int       // log2 of the page size in rows; 0: contiguous regions, no paging
	Pages    []int32   // the page tables, concatenated; unused with PageBits 0
	Copies   []RowCopy // copy-on-write row copies, run before the pass
	// StateCopies copy recurrent state slots before the pass, as Copies do rows: a caller keeps
	// a slot's state as it was before rows it may have to take back (speculative decoding).
	StateCopies []StateCopy

	// States, for a model with recurrent layers (Model.Recurrent), is each row's state slot
	// (KVCache.States): a sequence's rows consecutive, at consecutive positions, continuing
	// from the slot's state, or from zeros when the first is at position 0. nil: slot 0 for
	// every row.
	States []int32

	// Embeds, when set, gives rows their input as an embedding (an image's, NEmbd values)
	// instead of a token's: such a row's token is a placeholder (MediaToken), and its
	// embedding is used as it is (no EmbedScale).
	Embeds [][]float32
	// AttnEnds, when set, is the last position each row attends to: its own (causal), or the
	// last of its image for an image's rows, which see one another both ways as llama.cpp
	// decodes Gemma 3's images. All of an image's rows must be in one batch.
	AttnEnds []int32
	// MPos, for an M-RoPE model (Config.MRoped), gives each row's four rotary positions (t,
	// h, w, e) in place of its position: an image's rows turn by their place in its grid, and
	// the text after it by positions that advanced by the grid's longer side only. nil: each
	// row's Pos for t, h and w, 0 for e.
	MPos []int32
	// Lora are the user scales of the model's LoRA adapters (Model.LoadAdapter's indices) for
	// every row of the batch; an adapter past its end, or at 0, is not applied.
	Lora []float32
	// Probe, when set, has the pass also compute one row's attention weights in one layer and
	// head, read back with its result (Model.ProbeWeights); nil records nothing extra.
	Probe *AttnProbe
}

// MediaToken is where the placeholder tokens of embedding rows (Batch.Embeds) start: ids at or
// above it name media positions, never a vocabulary entry.
const MediaToken = 1 << 30

// RowCopy copies N cache rows, in every layer, from row Src to row Dst.
type RowCopy struct {
	Src, Dst, N int // cache row indices and a row count, not sequence positions
}

// StateCopy copies state slot Src's recurrent state, every layer's, to state slot Dst.
type StateCopy struct{ Src, Dst int }

// maxPageBits bounds the page size (2^maxPageBits rows).
const maxPageBits = 16

// checkBatch validates a batch against the model's limits and the cache.
func (m *Model) checkBatch(kv *KVCache, b Batch) error {
	n := len(b.Tokens)
	if n == 0 || n > m.maxBatch || len(b.Pos) != n || len(b.Base) != n {
		return fmt.Errorf("model: batch of %d tokens (%d positions, %d bases); the limit is %d", n, len(b.Pos), len(b.Base), m.maxBatch)
	}
	if len(b.Logits) > m.maxOutputs {
		return fmt.Errorf("model: %d logit rows requested; the limit is %d", len(b.Logits), m.maxOutputs)
	}
	if b.PageBits < 0 || b.PageBits > maxPageBits {
		return fmt.Errorf("model: page size 2^%d rows unsupported", b.PageBits)
	}
	for _, p := range b.Pages {
		if p < 0 || int(p)<<b.PageBits >= kv.NCtx {
			return fmt.Errorf("model: page %d is outside the cache of %d rows", p, kv.NCtx)
		}
	}
	for _, c := range b.StateCopies {
		if err := m.checkStateCopy(kv, c); err != nil {
			return err
		}
	}
	if len(b.Lora) > m.adapters {
		return fmt.Errorf("model: batch with %d adapter scales for %d adapters", len(b.Lora), m.adapters)
	}
	if b.MPos != nil && len(b.MPos) != 4*n {
		return fmt.Errorf("model: batch of %d tokens with %d M-RoPE positions", n, len(b.MPos))
	}
	if b.Embeds != nil && len(b.Embeds) != n || b.AttnEnds != nil && len(b.AttnEnds) != n {
		return fmt.Errorf("model: batch of %d tokens with %d embeddings and %d attention ends", n, len(b.Embeds), len(b.AttnEnds))
	}
	if p := b.Probe; p != nil {
		c := m.Config
		switch {
		case m.enc != nil:
			return fmt.Errorf("model: %s is an encoder: attention probes look at a decoder's layers", c.Arch)
		case p.Row < 0 || p.Row >= n:
			return fmt.Errorf("model: attention probe of batch row %d in a batch of %d tokens", p.Row, n)
		case p.Layer < 0 || p.Layer >= c.NLayer || p.Head < 0 || p.Head >= c.NHead:
			return fmt.Errorf("model: attention probe of layer %d, head %d; the model has %d layers of %d heads", p.Layer, p.Head, c.NLayer, c.NHead)
		case c.Recurrent != nil && c.Recurrent[p.Layer]:
			return fmt.Errorf("model: attention probe of layer %d, a recurrent layer without attention", p.Layer)
		}
	}
	for i, id := range b.Tokens {
		if b.Embeds != nil && b.Embeds[i] != nil {
			if id < MediaToken || len(b.Embeds[i]) != m.Config.NEmbd {
				return fmt.Errorf("model: batch row %d: an embedding of %d values for token %d (want %d values and a media token)", i, len(b.Embeds[i]), id, m.Config.NEmbd)
			}
		} else if id < 0 || int(id) >= m.Config.NVocab {
			return fmt.Errorf("model: token id %d out of range (vocabulary %d)", id, m.Config.NVocab)
		}
		if b.AttnEnds != nil && b.AttnEnds[i] < b.Pos[i] {
			return fmt.Errorf("model: batch row %d at position %d attends only to %d", i, b.Pos[i], b.AttnEnds[i])
		}
		if b.Pos[i] < 0 || b.Base[i] < 0 {
			return fmt.Errorf("model: token %d has position %d and base %d", i, b.Pos[i], b.Base[i])
		}
		if b.PageBits == 0 && int(b.Base[i]+b.Pos[i]) >= kv.NCtx {
			return fmt.Errorf("model: token %d at position %d of the sequence at row %d is outside the cache of %d", i, b.Pos[i], b.Base[i], kv.NCtx)
		}
		if b.PageBits > 0 && int(b.Base[i])+int(b.Pos[i]>>b.PageBits) >= len(b.Pages) {
			return fmt.Errorf("model: token %d at position %d is past the end of its page table (at %d of %d entries)", i, b.Pos[i], b.Base[i], len(b.Pages))
		}
	}
	if _, err := m.stateSeqs(kv, b); err != nil {
		return err
	}
	for _, r := range b.Logits {
		if r < 0 || r >= n {
			return fmt.Errorf("model: logits of batch row %d requested of %d", r, n)
		}
	}
	for _, c := range b.Copies {
		if c.N <= 0 || c.Src < 0 || c.Dst < 0 || c.Src+c.N > kv.NCtx || c.Dst+c.N > kv.NCtx {
			return fmt.Errorf("model: copy of %d cache rows from %d to %d is outside the cache of %d", c.N, c.Src, c.Dst, kv.NCtx)
		}
	}
	return nil
}

// writePos uploads the batch's positions and cache addressing in the layout the cache kernels
// read (gpu.RoPEKV): positions, then per token its first row or page-table index, then the
// page tables.
func (m *Model) writePos(b Batch) error {
	n := len(b.Tokens)
	words := make([]int32, 0, 2*n+len(b.Pages))
	words = append(words, b.Pos...)
	for _, base := range b.Base {
		if b.PageBits > 0 {
			base += int32(2 * n) // tables follow the two per-token arrays
		}
		words = append(words, base)
	}
	words = append(words, b.Pages...)
	if err := ensureWords(m.dev, &m.scratch.pos, "pos", len(words)); err != nil {
		return err
	}
	if err := m.dev.Write(m.scratch.pos, 0, gpu.Bytes(words)); err != nil {
		return err
	}
	if m.Config.MRoped() {
		mpos := b.MPos
		if mpos == nil {
			mpos = make([]int32, 4*n)
			for i, p := range b.Pos {
				mpos[4*i], mpos[4*i+1], mpos[4*i+2] = p, p, p
			}
		}
		if err := ensureWords(m.dev, &m.scratch.mpos, "mpos", len(mpos)); err != nil {
			return err
		}
		if err := m.dev.Write(m.scratch.mpos, 0, gpu.Bytes(mpos)); err != nil {
			return err
		}
	}
	if b.AttnEnds == nil {
		return nil
	}
	// Attention reads its limits from a copy with the attention ends for positions.
	copy(words, b.AttnEnds)
	if err := ensureWords(m.dev, &m.scratch.attnPos, "attn_pos", len(words)); err != nil {
		return err
	}
	return m.dev.Write(m.scratch.attnPos, 0, gpu.Bytes(words))
}

// ensureWords grows *buf (nil: none yet) to hold at least n words.
func ensureWords(dev *gpu.Device, buf **gpu.Buffer, label string, n int) error {
	if *buf != nil && uint64(n)*4 <= (*buf).Size() {
		return nil
	}
	size := n
	if *buf != nil {
		size = max(n, 2*int((*buf).Size()/4))
	}
	b, err := dev.NewBuffer(label, uint64(size)*4)
	if err != nil {
		return fmt.Errorf("model: %s buffer of %d words: %w", label, n, err)
	}
	if *buf != nil {
		(*buf).Release()
	}
	*buf = b
	return nil
}

// sequences counts the batch's sequences (distinct bases).
func (b Batch) sequences() int {
	seen := map[int32]bool{}
	for _, base := range b.Base {
		seen[base] = true
	}
	return len(seen)
}

// recordCopies records the batch's state copies and its row copies in every layer.
func (b Batch) recordCopies(r *gpu.Recorder, kv *KVCache) {
	recordStateCopies(r, kv, b.StateCopies)
	for _, c := range b.Copies {
		for i := range kv.k {
			if kv.k[i] == nil {
				continue
			}
			w := int(kv.rows[i] / 4) // words per row
			r.CopyWithin(kv.k[i], c.Src*w, c.Dst*w, c.N*w)
			r.CopyWithin(kv.v[i], c.Src*w, c.Dst*w, c.N*w)
		}
	}
}

// Shift is a move of N cached positions of one sequence from Src to Dst < Src (see ShiftKV).
type Shift struct {
	Src, Dst, N int // sequence positions and a count, not cache rows
}

// ShiftKV moves positions of one sequence to earlier positions in every layer, keys turned to
// their new positions (the context shift and cache reuse of llama.cpp's seq_rm + seq_add). The
// sequence is addressed as in a Batch: pageBits 0 and base its first row, or its page table.
// The row copies run first (copy-on-write of pages the moves write), then the moves in order,
// all in one submit.
func (m *Model) ShiftKV(kv *KVCache, pageBits int, base int32, pages []int32, copies []RowCopy, moves []Shift) error {
	for st, skv := m, kv; st != nil; st, skv = st.next, skv.next {
		if err := st.shiftStage(skv, pageBits, base, pages, copies, moves); err != nil {
			return err
		}
	}
	return nil
}

// shiftStage is ShiftKV on this stage's layers.
func (m *Model) shiftStage(kv *KVCache, pageBits int, base int32, pages []int32, copies []RowCopy, moves []Shift) error {
	if m.enc != nil {
		return fmt.Errorf("model: %s keeps no cache between passes", m.Config.Arch)
	}
	if m.Recurrent() {
		return fmt.Errorf("model: %s's recurrent state cannot be shifted", m.Config.Arch)
	}
	if len(moves) == 0 {
		return nil
	}
	b := Batch{Tokens: []int32{0}, Pos: []int32{0}, Base: []int32{base}, PageBits: pageBits, Pages: pages, Copies: copies}
	if err := m.checkBatch(kv, b); err != nil {
		return err
	}
	limit := kv.NCtx
	if pageBits > 0 {
		limit = len(pages) << pageBits
	} else {
		limit -= int(base)
	}
	for _, s := range moves {
		if s.N <= 0 || s.Dst < 0 || s.Dst >= s.Src || s.Src+s.N > limit {
			return fmt.Errorf("model: cache shift of %d positions from %d to %d (sequence of %d rows)", s.N, s.Src, s.Dst, limit)
		}
	}
	if err := m.writePos(b); err != nil {
		return err
	}
	r, err := m.dev.Begin()
	if err != nil {
		return err
	}
	c := m.Config
	b.recordCopies(r, kv)
	for i := range kv.k {
		if kv.k[i] == nil {
			continue
		}
		rope, _ := m.layerAttention(i)
		rope.PageBits = pageBits
		for _, s := range moves {
			r.ShiftKV(m.scratch.pos, kv.k[i], kv.v[i], m.kvF16, c.NKVHead, c.attnShape(i).headDim, rope, s.Src, s.Dst, s.N)
		}
	}
	return r.Submit()
}
