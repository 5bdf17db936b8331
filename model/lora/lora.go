// Package lora reads LoRA adapters: GGUF files of low-rank pairs (llama.cpp's
// convert_lora_to_gguf output) that add scale·B·(A·x) to a base model's matrix products. It
// checks an adapter against its base model as llama.cpp's llama_adapter_lora_init does, with
// errors that name the tensor.
package lora

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// Pair is the low-rank update of one base matrix of Out rows of In: A is Rank rows of In
// (ggml ne [In, Rank]), B is Out rows of Rank (ne [Rank, Out]); their data is the adapter
// file's. For a base holding Experts matrices (ne [In, Out, Experts]: a Mixture-of-Experts
// block's ffn_*_exps) each expert has its own pair: A ne [In, Rank, Experts], B ne [Rank,
// Out, Experts], as llama.cpp's build_lora_mm_id multiplies them.
type Pair struct {
	// Base names the base model's tensor (blk.0.attn_q.weight).
	Base          string
	A, B          *gguf.TensorInfo
	Rank, In, Out int
	Experts       int // 0: one matrix
}

// Adapter is a LoRA adapter file, checked against its base model.
type Adapter struct {
	// Alpha is adapter.lora.alpha; 0 when the file has none.
	Alpha float32
	// Pairs are the adapter's updates, by base tensor name.
	Pairs map[string]*Pair
}

// Scale is the factor an adapter's products take at a user scale: user × alpha / rank, or
// the user scale itself without alpha (llama.cpp's llama_adapter_lora_weight::get_scale).
func (a *Adapter) Scale(p *Pair, user float32) float32 {
	if a.Alpha == 0 {
		return user
	}
	return user * a.Alpha / float32(p.Rank)
}

// Read reads an adapter file and checks it against a base model of architecture arch whose
// tensors' ggml shapes baseShape gives: the same architecture, each pair's two halves present,
// its base tensor present, and the shapes fitting (A's columns the base's, B's rows the
// base's, A's rows B's columns).
func Read(f *gguf.File, arch string, baseShape func(name string) ([]uint64, bool)) (*Adapter, error) {
	if t, _ := f.String("general.type"); t != "adapter" {
		return nil, fmt.Errorf("lora: general.type is %q, not adapter: not a LoRA adapter", t)
	}
	if t, _ := f.String("adapter.type"); t != "lora" {
		return nil, fmt.Errorf("lora: adapter.type is %q, not lora", t)
	}
	if a := f.Architecture(); a != arch {
		return nil, fmt.Errorf("lora: the adapter is for architecture %q, the model is %q", a, arch)
	}
	ad := &Adapter{Pairs: map[string]*Pair{}}
	if v, ok := f.Float("adapter.lora.alpha"); ok {
		ad.Alpha = float32(v)
	}
	halves := map[string][2]*gguf.TensorInfo{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		name, half := "", 0
		switch {
		case strings.HasSuffix(t.Name, ".lora_a"):
			name = strings.TrimSuffix(t.Name, ".lora_a")
		case strings.HasSuffix(t.Name, ".lora_b"):
			name, half = strings.TrimSuffix(t.Name, ".lora_b"), 1
		default:
			return nil, fmt.Errorf("lora: tensor %q has unexpected suffix (want .lora_a or .lora_b)", t.Name)
		}
		if strings.HasSuffix(name, "_norm.weight") {
			continue // as llama.cpp: norms in adapters are skipped
		}
		h := halves[name]
		h[half] = t
		halves[name] = h
	}
	for _, name := range slices.Sorted(maps.Keys(halves)) {
		h := halves[name]
		if h[0] == nil || h[1] == nil {
			return nil, fmt.Errorf("lora: tensor %q is missing one component (lora_a or lora_b)", name)
		}
		w, ok := baseShape(name)
		if !ok {
			return nil, fmt.Errorf("lora: tensor %q does not exist in the base model", name)
		}
		a, b := h[0], h[1]
		experts := 0
		if len(w) == 3 { // a matrix per expert: so must the pair be
			experts = int(w[2])
		}
		dims := 2 + min(experts, 1)
		if len(w) != dims || len(a.Shape) != dims || len(b.Shape) != dims || w[0] != a.Shape[0] || w[1] != b.Shape[1] || a.Shape[1] != b.Shape[0] ||
			experts > 0 && (a.Shape[2] != w[2] || b.Shape[2] != w[2]) {
			return nil, fmt.Errorf("lora: tensor %q: shapes lora_a %v and lora_b %v do not fit the base's %v", name, a.Shape, b.Shape, w)
		}
		for _, t := range []*gguf.TensorInfo{a, b} {
			switch t.Type {
			case gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16:
			default:
				return nil, fmt.Errorf("lora: tensor %q is %s: adapters of F32, F16 and BF16 are supported", t.Name, t.Type)
			}
		}
		if b.Shape[0] == 0 || b.Shape[0] > 1<<14 {
			return nil, fmt.Errorf("lora: tensor %q has rank %d", name, b.Shape[0])
		}
		ad.Pairs[name] = &Pair{Base: name, A: a, B: b, Rank: int(b.Shape[0]), In: int(a.Shape[0]), Out: int(b.Shape[1]), Experts: experts}
	}
	if len(ad.Pairs) == 0 {
		return nil, fmt.Errorf("lora: the adapter holds no tensor pairs")
	}
	return ad, nil
}
