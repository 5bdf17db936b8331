package model

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model/lora"
)

// LoRA adapters on a Mixture-of-Experts block's expert matrices (ffn_gate_exps, ffn_up_exps,
// ffn_gate_up_exps, ffn_down_exps): each expert has its own A and B, and a token's chosen
// experts' pairs add scale·B_e·(A_e·x) to its assignment's row, as llama.cpp's
// build_lora_mm_id does (two mul_mat_id routed as the product was, scaled, added). Each pair
// is a term of its own, A and B in the adapter's type: stacking pairs would move the products
// within B's rows, and so their rounding, off llama.cpp's.

// loraExpertTerm uploads an adapter's pair on expert matrices: A as Experts blocks of Rank
// rows of In, B as Experts blocks of Out rows of Rank, the file's bytes as they are.
func (l *loader) loraExpertTerm(mb loraMember, ad *lora.Adapter) (loraTerm, error) {
	p := mb.pair
	if p.Rank%4 != 0 {
		return loraTerm{}, fmt.Errorf("model: lora tensor %q: rank %d on experts; their products take a multiple of 4", p.Base, p.Rank)
	}
	var ws [2]gpu.Weight
	for i, h := range []struct {
		rows, cols int
	}{{p.Rank, p.In}, {p.Out, p.Rank}} {
		t := p.A
		if i == 1 {
			t = p.B
		}
		typ, ok := gpu.WeightTypeByName(t.Type.String())
		if !ok {
			return loraTerm{}, fmt.Errorf("model: lora tensor %q: type %s not supported", t.Name, t.Type)
		}
		w, err := l.dev.UploadExperts(t.Name, typ, p.Experts, h.rows, h.cols, l.f.TensorData(t))
		if err != nil {
			return loraTerm{}, fmt.Errorf("model: lora tensor %q: %w", t.Name, err)
		}
		l.weights = append(l.weights, w)
		ws[i] = w
	}
	return loraTerm{a: ws[0], b: ws[1], rank: p.Rank, col: mb.col, factor: ad.Scale(p, 1)}, nil
}

// addExpertLora records, after an expert product of x into y (yStride wide), the terms of the
// adapters this pass runs with a nonzero scale: each assignment's A_e·x into loraExp, then
// scale·B_e·(A_e·x) added to its row of y at the term's columns.
func (m *Model) addExpertLora(r *gpu.Recorder, terms []loraTerm, x *gpu.Buffer, b gpu.MoEBatch, perAssign bool, y *gpu.Buffer, yStride int) {
	for i := range terms {
		t := &terms[i]
		scale := m.loraScale(t)
		if scale == 0 {
			continue
		}
		m.expertProducts(r, []proj{{w: t.a}}, x, b, perAssign, m.scratch.loraExp, t.rank, 0)
		m.expertProducts(r, []proj{{w: t.b, col: t.col}}, m.scratch.loraExp, b, true, y, yStride, scale)
	}
}
