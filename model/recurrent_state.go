package model

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// The recurrent state of a hybrid model's Gated DeltaNet layers (block_recurrent.go): per
// layer and per sequence, the conv state (the last SSMConv-1 inputs of every channel) and the
// delta-rule state (a matrix per value head). It lives in the cache beside the attention
// layers' keys and values, in state slots: a batch names each row's slot (Batch.States), and
// a sequence whose batch rows start at position 0 starts from a zero state. A state cannot be
// cut back as keys and values can; a caller that wants to return to an earlier position keeps
// a copy (ReadState, WriteState: llama-server's context checkpoints).

// Recurrent reports whether the model has recurrent layers, whose state per sequence is in
// state slots (Batch.States) rather than cache rows.
func (m *Model) Recurrent() bool { return m.Config.Recurrent != nil }

// stateSizes are a slot's floats of conv state and of delta-rule state in one recurrent layer.
func (c Config) stateSizes() (conv, ssm int) {
	return gpu.SSMConvStateSize(c.convChannels(), c.SSMConv), gpu.DeltaNetStateSize(c.SSMHeadDim, c.SSMValHeads)
}

// StateBytes is the size of one sequence's recurrent state over all layers (0 for a model
// without recurrent layers): what ReadState returns and a checkpoint holds.
func (m *Model) StateBytes() int {
	return StateBytes(m.Config)
}

// StateBytes is a sequence's recurrent state over all of c's layers, in bytes (0 without
// recurrent layers), for memory estimates before a model is loaded.
func StateBytes(c Config) int { return stateBytesOf(c, 0, c.NLayer) }

// stateBytesOf is a sequence's recurrent state over layers [lo, hi), in bytes.
func stateBytesOf(c Config, lo, hi int) int {
	if c.Recurrent == nil {
		return 0
	}
	conv, ssm := c.stateSizes()
	n := 0
	for _, r := range c.Recurrent[lo:hi] {
		if r {
			n += 4 * (conv + ssm)
		}
	}
	return n
}

// newStates allocates the recurrent layers' state buffers of kv, slots sequences each.
func (m *Model) newStates(kv *KVCache, slots int) error {
	c := m.Config
	conv, ssm := c.stateSizes()
	kv.States = slots
	kv.conv, kv.ssm = make([]*gpu.Buffer, c.NLayer), make([]*gpu.Buffer, c.NLayer)
	for il, r := range c.Recurrent {
		if !r || il < m.lo || il >= m.hi {
			continue
		}
		var err error
		if kv.conv[il], err = m.dev.NewBuffer(fmt.Sprintf("conv_state_l%d", il), uint64(slots*conv)*4); err != nil {
			return fmt.Errorf("model: recurrent state of %d sequences: %w", slots, err)
		}
		if kv.ssm[il], err = m.dev.NewBuffer(fmt.Sprintf("ssm_state_l%d", il), uint64(slots*ssm)*4); err != nil {
			return fmt.Errorf("model: recurrent state of %d sequences: %w", slots, err)
		}
	}
	return nil
}

// stateSeqs checks a batch's state slots and returns its sequences as the recurrent kernels
// take them: consecutive rows of one slot at consecutive positions make one sequence, and a
// slot may not come back later in the batch. States nil puts every row in slot 0.
func (m *Model) stateSeqs(kv *KVCache, b Batch) ([]gpu.RecurrentSeq, error) {
	if !m.Recurrent() {
		if b.States != nil {
			return nil, fmt.Errorf("model: batch with recurrent state slots for %s, which has no recurrent layers", m.Config.Arch)
		}
		return nil, nil
	}
	n := len(b.Tokens)
	if b.States != nil && len(b.States) != n {
		return nil, fmt.Errorf("model: batch of %d tokens with %d state slots", n, len(b.States))
	}
	slot := func(i int) int {
		if b.States == nil {
			return 0
		}
		return int(b.States[i])
	}
	var seqs []gpu.RecurrentSeq
	seen := map[int]bool{}
	for i := 0; i < n; i++ {
		sl := slot(i)
		if len(seqs) > 0 && seqs[len(seqs)-1].Slot == sl {
			if b.Pos[i] != b.Pos[i-1]+1 {
				return nil, fmt.Errorf("model: batch row %d of state slot %d at position %d after %d: a recurrent sequence's rows take consecutive positions", i, sl, b.Pos[i], b.Pos[i-1])
			}
			seqs[len(seqs)-1].Tokens++
			continue
		}
		if sl < 0 || sl >= kv.States {
			return nil, fmt.Errorf("model: batch row %d: state slot %d outside the cache's %d", i, sl, kv.States)
		}
		if seen[sl] {
			return nil, fmt.Errorf("model: batch rows of state slot %d are not consecutive", sl)
		}
		seen[sl] = true
		seqs = append(seqs, gpu.RecurrentSeq{First: i, Tokens: 1, Slot: sl})
	}
	return seqs, nil
}

// uploadStates writes the batch's recurrent sequences for the kernels and zeroes the state of
// each that starts at position 0. It must run after checkBatch and before the pass is
// recorded (the zeroing writes are ordered before the next submit).
func (m *Model) uploadStates(kv *KVCache, b Batch) error {
	m.rec = gpu.RecurrentBatch{}
	if !m.Recurrent() {
		return nil
	}
	seqs, err := m.stateSeqs(kv, b)
	if err != nil {
		return err
	}
	if err := m.dev.Write(m.scratch.recSeqs, 0, gpu.PackRecurrentSeqs(seqs)); err != nil {
		return err
	}
	m.rec = gpu.RecurrentBatch{Buf: m.scratch.recSeqs, Seqs: seqs}
	for _, s := range seqs {
		if b.Pos[s.First] == 0 {
			if err := m.writeState(kv, s.Slot, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadState reads state slot slot's recurrent state, StateBytes long: each recurrent layer's
// conv state in layer order, then each one's delta-rule state (the order of llama.cpp's state
// files). It waits for all submitted work.
func (m *Model) ReadState(kv *KVCache, slot int) ([]byte, error) {
	if err := m.checkSlot(kv, slot); err != nil {
		return nil, err
	}
	out := make([]byte, 0, m.StateBytes())
	for _, part := range m.stateParts(kv) {
		at := uint64(slot*part.n) * 4
		data, err := readRange(part.dev, part.b, at, at+uint64(part.n)*4)
		if err != nil {
			return nil, err
		}
		out = append(out, data...)
	}
	return out, nil
}

// statePart is one buffer of a recurrent layer's state, on dev: n floats a slot.
type statePart struct {
	dev *gpu.Device
	b   *gpu.Buffer
	n   int
}

// stateParts lists kv's state buffers in ReadState's order, over every stage of a split model.
func (m *Model) stateParts(kv *KVCache) []statePart {
	conv, ssm := m.Config.stateSizes()
	var convs, ssms []statePart
	for st, skv := m, kv; st != nil; st, skv = st.next, skv.next {
		for il := st.lo; il < st.hi; il++ {
			if m.Config.Recurrent[il] {
				convs, ssms = append(convs, statePart{st.dev, skv.conv[il], conv}), append(ssms, statePart{st.dev, skv.ssm[il], ssm})
			}
		}
	}
	return append(convs, ssms...)
}

// WriteState sets state slot slot's recurrent state to data, as ReadState returns it; the
// write is ordered before the next submit.
func (m *Model) WriteState(kv *KVCache, slot int, data []byte) error {
	if err := m.checkSlot(kv, slot); err != nil {
		return err
	}
	if len(data) != m.StateBytes() {
		return fmt.Errorf("model: a recurrent state of %d bytes, want %d", len(data), m.StateBytes())
	}
	return m.writeState(kv, slot, data)
}

// writeState writes slot's state from data, or zeroes it when data is nil.
func (m *Model) writeState(kv *KVCache, slot int, data []byte) error {
	for _, part := range m.stateParts(kv) {
		var src []byte
		if data != nil {
			src, data = data[:4*part.n], data[4*part.n:]
		} else {
			if len(m.zeroState) < 4*part.n {
				m.zeroState = make([]byte, 4*part.n)
			}
			src = m.zeroState[:4*part.n]
		}
		if err := part.dev.Write(part.b, uint64(slot*part.n)*4, src); err != nil {
			return err
		}
	}
	return nil
}

// checkSlot checks that kv has state slot slot.
func (m *Model) checkSlot(kv *KVCache, slot int) error {
	if !m.Recurrent() {
		return fmt.Errorf("model: %s has no recurrent state", m.Config.Arch)
	}
	if slot < 0 || slot >= kv.States {
		return fmt.Errorf("model: state slot %d outside the cache's %d", slot, kv.States)
	}
	return nil
}

// StateShape is how a sequence's recurrent state (ReadState's bytes) splits into llama.cpp's
// state-file rows: Layers recurrent layers, each with a conv row of ConvBytes and a delta-rule
// row of SSMBytes, of the file's Blocks blocks (its multi-token-prediction ones counted).
type StateShape struct{ Layers, ConvBytes, SSMBytes, Blocks int }

// StateShape is the model's StateShape (all 0 without recurrent layers).
func (m *Model) StateShape() StateShape {
	c := m.Config
	if c.Recurrent == nil {
		return StateShape{}
	}
	conv, ssm := c.stateSizes()
	n := 0
	for _, r := range c.Recurrent {
		if r {
			n++
		}
	}
	return StateShape{Layers: n, ConvBytes: 4 * conv, SSMBytes: 4 * ssm, Blocks: c.NLayer + c.NextNLayers}
}

// checkStateCopy checks that c copies between two state slots of kv.
func (m *Model) checkStateCopy(kv *KVCache, c StateCopy) error {
	if err := m.checkSlot(kv, c.Src); err != nil {
		return err
	}
	if err := m.checkSlot(kv, c.Dst); err != nil {
		return err
	}
	if c.Src == c.Dst {
		return fmt.Errorf("model: state copy of slot %d onto itself", c.Src)
	}
	return nil
}

// recordStateCopies records copies of state slots in this stage's recurrent layers.
func recordStateCopies(r *gpu.Recorder, kv *KVCache, copies []StateCopy) {
	for _, c := range copies {
		for il := range kv.conv {
			for _, b := range []*gpu.Buffer{kv.conv[il], kv.ssm[il]} {
				if b == nil {
					continue
				}
				n := int(b.Size()/4) / kv.States // words of one slot
				r.CopyWithin(b, c.Src*n, c.Dst*n, n)
			}
		}
	}
}

// CopyStates copies state slots now, in one submit a stage: a caller returning a slot to the
// state it kept with Batch.StateCopies.
func (m *Model) CopyStates(kv *KVCache, copies []StateCopy) error {
	for _, c := range copies {
		if err := m.checkStateCopy(kv, c); err != nil {
			return err
		}
	}
	for st, skv := m, kv; st != nil; st, skv = st.next, skv.next {
		r, err := st.dev.Begin()
		if err != nil {
			return err
		}
		recordStateCopies(r, skv, copies)
		if err := r.Submit(); err != nil {
			return err
		}
	}
	return nil
}
