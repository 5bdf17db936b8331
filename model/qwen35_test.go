package model_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// hybridPrompt is a prompt of n tokens that differs with seed.
func hybridPrompt(n, seed int) []int32 {
	p := []int32{1}
	for i := range n - 1 {
		p = append(p, int32(3+(i*37+seed*101)%500))
	}
	return p
}

// TestQwen35PromptMatchesTokenByToken checks, in every kernel shape the device offers, that a
// prompt run in one pass (the chunked recurrent kernels over many tokens), in passes of 7 and
// token by token gives the same logits, and that a state slot left by another sequence is
// cleared when a sequence starts at position 0.
func TestQwen35PromptMatchesTokenByToken(t *testing.T) {
	dev := gputest.Device(t)
	prompt := hybridPrompt(70, 0)
	for _, v := range moeVariants {
		t.Run(v.name, func(t *testing.T) {
			withVariant(t, dev, v.barrierFree, v.subgroups, func() {
				m := loadBatch(t, 128, "models", "hybrid", "qwen35-F32.gguf")
				kv := newStates(t, m, 128, 1)
				// Another sequence leaves its state in the slot first.
				if _, err := m.Forward(kv, hybridPrompt(20, 5), 0); err != nil {
					t.Fatal(err)
				}
				whole, err := m.Forward(kv, prompt, 0)
				if err != nil {
					t.Fatal(err)
				}
				var chunked, one []float32
				for at := 0; at < len(prompt); at += 7 {
					if chunked, err = m.Forward(kv, prompt[at:min(at+7, len(prompt))], at); err != nil {
						t.Fatal(err)
					}
				}
				for i, tok := range prompt {
					if one, err = m.Forward(kv, []int32{tok}, i); err != nil {
						t.Fatal(err)
					}
				}
				for _, c := range []struct {
					name string
					got  []float32
				}{{"passes of 7", chunked}, {"token by token", one}} {
					if e := cpuref.RelErr(whole, c.got); e > pathTol(m, 1e-4) {
						t.Errorf("whole prompt vs %s: relative error %.3g", c.name, e)
					}
					if argmax(whole) != argmax(c.got) {
						t.Errorf("greedy token %d from the whole prompt, %d in %s", argmax(whole), argmax(c.got), c.name)
					}
				}
			})
		})
	}
}

// newStates is a cache of n rows and states state slots for m, released when the test ends.
func newStates(t *testing.T, m *model.Model, n, states int) *model.KVCache {
	t.Helper()
	kv, err := m.NewKVCacheFor(n, states)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kv.Release)
	return kv
}

// TestQwen35BatchedSequences checks that four prompts of different lengths, run together in
// one batch per step in four state slots (each in its own region of the cache), then decoded
// together for 8 greedy steps, give each the tokens it gets alone.
func TestQwen35BatchedSequences(t *testing.T) {
	m := loadOpts(t, model.Options{MaxBatch: 128, MaxOutputs: 4}, "models", "hybrid", "qwen35-Q8_0.gguf")
	const region, steps = 64, 8
	prompts := [][]int32{hybridPrompt(9, 1), hybridPrompt(23, 2), hybridPrompt(4, 3), hybridPrompt(31, 4)}
	alone := make([][]int32, len(prompts))
	for i, p := range prompts {
		alone[i] = greedy(t, m, p, steps, nil)
	}
	kv := newStates(t, m, region*len(prompts), len(prompts))
	var b model.Batch
	for i, p := range prompts {
		for j, tok := range p {
			b.Tokens = append(b.Tokens, tok)
			b.Pos = append(b.Pos, int32(j))
			b.Base = append(b.Base, int32(i*region))
			b.States = append(b.States, int32(i))
		}
		b.Logits = append(b.Logits, len(b.Tokens)-1)
	}
	got := make([][]int32, len(prompts))
	for step := range steps {
		logits, err := m.ForwardBatch(kv, b)
		if err != nil {
			t.Fatal(err)
		}
		next := model.Batch{}
		for i, l := range logits {
			id := argmax(l)
			got[i] = append(got[i], id)
			next.Tokens = append(next.Tokens, id)
			next.Pos = append(next.Pos, int32(len(prompts[i])+step))
			next.Base = append(next.Base, int32(i*region))
			next.States = append(next.States, int32(i))
			next.Logits = append(next.Logits, i)
		}
		b = next
	}
	for i := range prompts {
		if !slices.Equal(got[i], alone[i]) {
			t.Errorf("prompt %d: batched %v, alone %v", i, got[i], alone[i])
		}
	}
}

// TestQwen35StateCheckpoint checks that a state read after a prefix (a checkpoint) and written
// back, into the same slot after the sequence went on or into another slot, continues exactly
// as the uninterrupted run: the keys and values of the prefix stay in the cache rows, the
// recurrent layers' memory comes from the checkpoint.
func TestQwen35StateCheckpoint(t *testing.T) {
	m := loadBatch(t, 64, "models", "hybrid", "qwen35-F32.gguf")
	if got, want := m.StateBytes(), 6*4*(3*(2*2*32+4*32)+4*32*32); got != want {
		t.Fatalf("StateBytes %d, want %d", got, want)
	}
	prompt := hybridPrompt(40, 6)
	kv := newStates(t, m, 64, 2)
	if _, err := m.Forward(kv, prompt[:30], 0); err != nil {
		t.Fatal(err)
	}
	ckpt, err := m.ReadState(kv, 0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.Forward(kv, prompt[30:], 30)
	if err != nil {
		t.Fatal(err)
	}
	for _, slot := range []int32{0, 1} {
		if err := m.WriteState(kv, int(slot), ckpt); err != nil {
			t.Fatal(err)
		}
		b := model.Batch{Logits: []int{9}}
		for i, tok := range prompt[30:] {
			b.Tokens, b.Pos, b.Base, b.States = append(b.Tokens, tok), append(b.Pos, int32(30+i)), append(b.Base, 0), append(b.States, slot)
		}
		got, err := m.ForwardBatch(kv, b)
		if err != nil {
			t.Fatal(err)
		}
		if e := cpuref.RelErr(want, got[0]); e != 0 {
			t.Errorf("slot %d restored from the checkpoint: relative error %.3g from the uninterrupted run", slot, e)
		}
	}
	if err := m.WriteState(kv, 0, ckpt[1:]); err == nil || !strings.Contains(err.Error(), "want") {
		t.Errorf("a short state: %v", err)
	}
	if _, err := m.ReadState(kv, 2); err == nil || !strings.Contains(err.Error(), "state slot 2 outside the cache's 2") {
		t.Errorf("slot 2 of 2: %v", err)
	}
}

// TestQwen35StateCopies checks the copies speculative decoding keeps: a batch's StateCopies
// copy a slot's state before the pass (the copy is the state before the batch's rows, the slot
// goes on), CopyStates puts it back, and copies outside the cache or onto themselves fail.
func TestQwen35StateCopies(t *testing.T) {
	m := loadBatch(t, 64, "models", "hybrid", "qwen35-F32.gguf")
	prompt := hybridPrompt(40, 6)
	kv := newStates(t, m, 64, 2)
	if _, err := m.Forward(kv, prompt[:30], 0); err != nil {
		t.Fatal(err)
	}
	before, err := m.ReadState(kv, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := model.Batch{Logits: []int{9}, StateCopies: []model.StateCopy{{Src: 0, Dst: 1}}}
	for i, tok := range prompt[30:] {
		b.Tokens, b.Pos, b.Base, b.States = append(b.Tokens, tok), append(b.Pos, int32(30+i)), append(b.Base, 0), append(b.States, 0)
	}
	if _, err := m.ForwardBatch(kv, b); err != nil {
		t.Fatal(err)
	}
	kept, err := m.ReadState(kv, 1)
	if err != nil {
		t.Fatal(err)
	}
	after, err := m.ReadState(kv, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kept, before) || bytes.Equal(after, before) {
		t.Fatalf("the copy equals the state before the pass: %v; the slot moved on: %v", bytes.Equal(kept, before), !bytes.Equal(after, before))
	}
	if err := m.CopyStates(kv, []model.StateCopy{{Src: 1, Dst: 0}}); err != nil {
		t.Fatal(err)
	}
	if back, err := m.ReadState(kv, 0); err != nil || !bytes.Equal(back, before) {
		t.Fatalf("slot 0 after CopyStates: equal %v (%v)", bytes.Equal(back, before), err)
	}
	for _, c := range []struct {
		copy model.StateCopy
		want string
	}{{model.StateCopy{Src: 0, Dst: 2}, "state slot 2 outside the cache's 2"}, {model.StateCopy{Src: 1, Dst: 1}, "state copy of slot 1 onto itself"}} {
		if err := m.CopyStates(kv, []model.StateCopy{c.copy}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CopyStates %+v: %v, want %q", c.copy, err, c.want)
		}
		b.StateCopies = []model.StateCopy{c.copy}
		if _, err := m.ForwardBatch(kv, b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("a batch copying %+v: %v, want %q", c.copy, err, c.want)
		}
	}
}

// TestQwen35BatchErrors checks the state slots a batch may name.
func TestQwen35BatchErrors(t *testing.T) {
	m := loadBatch(t, 16, "models", "hybrid", "qwen35-F32.gguf")
	kv := newStates(t, m, 64, 2)
	for _, c := range []struct {
		name   string
		pos    []int32
		states []int32
		want   string
	}{
		{"slot out of range", []int32{0, 1}, []int32{0, 2}, "state slot 2 outside the cache's 2"},
		{"slot split", []int32{0, 0, 1}, []int32{0, 1, 0}, "rows of state slot 0 are not consecutive"},
		{"positions skip", []int32{0, 2}, []int32{1, 1}, "a recurrent sequence's rows take consecutive positions"},
		{"too few", []int32{0, 1}, []int32{0}, "2 tokens with 1 state slots"},
	} {
		b := model.Batch{Tokens: make([]int32, len(c.pos)), Pos: c.pos, Base: make([]int32, len(c.pos)), States: c.states}
		if _, err := m.ForwardBatch(kv, b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := m.ShiftKV(kv, 0, 0, nil, nil, []model.Shift{{Src: 4, Dst: 0, N: 2}}); err == nil || !strings.Contains(err.Error(), "cannot be shifted") {
		t.Errorf("shift: %v", err)
	}
	dense := load(t, "models", "stories260K.gguf")
	kvd, err := dense.NewKVCache(16)
	if err != nil {
		t.Fatal(err)
	}
	defer kvd.Release()
	b := model.Batch{Tokens: []int32{1}, Pos: []int32{0}, Base: []int32{0}, States: []int32{0}}
	if _, err := dense.ForwardBatch(kvd, b); err == nil || !strings.Contains(err.Error(), "no recurrent layers") {
		t.Errorf("states for a dense model: %v", err)
	}
}

// TestQwen35Hparams checks the recurrent shape and layer pattern read from the reference file,
// and the load errors of damaged keys.
func TestQwen35Hparams(t *testing.T) {
	m := load(t, "models", "hybrid", "qwen35-F32.gguf")
	c := m.Config
	want := []bool{true, true, true, false, true, true, true, false}
	if !slices.Equal(c.Recurrent, want) || c.SSMConv != 4 || c.SSMHeadDim != 32 || c.SSMKeyHeads != 2 || c.SSMValHeads != 4 ||
		c.MRope != [4]int{4, 2, 2, 0} || !c.IMRoPE || !c.GatedAttn || c.NRot != 16 || c.HeadDim != 32 {
		t.Errorf("config %+v", c)
	}
	if m.KVLayers() != 2 {
		t.Errorf("KVLayers %d, want the 2 attention layers", m.KVLayers())
	}
	dev := gputest.Device(t)
	u32 := func(k string, v uint32) []gguf.KV { return []gguf.KV{{Key: k, Type: gguf.TypeUint32, Value: v}} }
	for _, c := range []struct {
		name string
		drop []string
		add  []gguf.KV
		want string
	}{
		{"no state size", []string{"qwen35.ssm.state_size"}, nil, "metadata qwen35.ssm.state_size missing"},
		{"groups", []string{"qwen35.ssm.group_count"}, u32("qwen35.ssm.group_count", 3), "group_count 3 does not divide time_step_rank 4"},
		{"kernel", []string{"qwen35.ssm.conv_kernel"}, u32("qwen35.ssm.conv_kernel", 1), "conv_kernel 1 not supported"},
		{"inner", []string{"qwen35.ssm.inner_size"}, u32("qwen35.ssm.inner_size", 100), "inner_size 100 is not time_step_rank 4 heads of state_size 32"},
		{"interval", []string{"qwen35.full_attention_interval"}, u32("qwen35.full_attention_interval", 2), `tensor "blk.1.attn_q.weight" missing`},
		{"nextn", nil, u32("qwen35.nextn_predict_layers", 8), "nextn_predict_layers 8 not below block_count 8"},
		{"sections", []string{"qwen35.rope.dimension_sections"}, nil, "rope.dimension_sections missing"},
	} {
		f := edited(t, c.drop, c.add, nil, "models", "hybrid", "qwen35-F32.gguf")
		if _, err := model.Load(dev, f, model.Options{MaxBatch: 16}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
