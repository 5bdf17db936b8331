package model

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model/lora"
)

// LoRA adapters on the GPU. Each targeted matrix product y = W·x gains, for every adapter a
// batch runs with a nonzero scale, scale·B·(A·x), as llama.cpp's build_lora_mm adds each
// adapter's term. The pairs of one projection group (q, k and v; gate and up), which share
// their input, run as one: their A matrices stacked (one product gives every pair's A·x) and
// their B matrices block-diagonal over the group's output columns; the B product adds its
// scaled result into y in its own epilogue. With one adapter active, no term needs a dispatch
// of its own in a decode step: a group after an RMS norm (q, k, v; gate, up) runs inside the
// norm (A·x) and the projection (B·t in its epilogue), and a residual projection's (attn_output,
// ffn_down) is added by the RMS norm that reads the residual stream next (normProject); only
// the last layer's ffn_down takes a dispatch (gpu.LoRA). An adapter at scale 0 costs nothing.

// loraTerm is one adapter's pairs on one projection group.
type loraTerm struct {
	adapter int
	a, b    gpu.Weight // a: the stacked A (rank rows); b: the group's B (out rows of rank)
	rank    int        // the pairs' ranks together
	col     int        // the first of y's columns b writes
	factor  float32    // alpha / rank, or 1 without alpha: the effective scale per user scale
	// fa and fb are a and b in f32 for the fused decode kernel (nil past its rank), act the
	// rounding a's and b's type gives activations.
	fa, fb *gpu.Buffer
	act    gpu.ActQuant
}

// loraTerms are a layer's terms, by the projection group they add to; the experts' terms
// (expGateUp, expDown) one a pair (adapter_experts.go), then the shared expert's.
type loraTerms struct {
	qkv, wo, gateUp, down []loraTerm
	expGateUp, expDown    []loraTerm
	shGateUp, shDown      []loraTerm
}

// TensorShape returns a base tensor's ggml shape, for checking an adapter against the model.
func (m *Model) TensorShape(name string) ([]uint64, bool) {
	s, ok := m.shapes[name]
	return s, ok
}

// Adapters is the number of LoRA adapters loaded (LoadAdapter); adapter i's scale is
// Batch.Lora[i].
func (m *Model) Adapters() int { return m.adapters }

// LoadAdapterFile reads a LoRA adapter file, checks it against the model and uploads it,
// returning its index (Batch.Lora's).
func (m *Model) LoadAdapterFile(path string) (int, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	ad, err := lora.Read(f, m.Config.Arch, m.TensorShape)
	if err != nil {
		return 0, err
	}
	id, err := m.LoadAdapter(ad, f)
	for st := m.next; st != nil && err == nil; st = st.next { // each stage its layers' terms
		_, err = st.LoadAdapter(ad, f)
	}
	return id, err
}

// loraGroup is where an adapter's pairs on one projection group go, and the pairs.
type loraGroup struct {
	dst     *[]loraTerm
	members []loraMember
}

type loraMember struct {
	pair *lora.Pair
	col  int // the first column of the group's output the pair's B writes
}

// LoadAdapter uploads a LoRA adapter (lora.Read against this model) whose file f is open, and
// returns its index: Batch.Lora's. f may be closed afterwards.
func (m *Model) LoadAdapter(ad *lora.Adapter, f *gguf.File) (int, error) {
	if m.enc != nil {
		return 0, fmt.Errorf("model: %s is an embedding model: LoRA adapters are not supported", m.Config.Arch)
	}
	groups, err := m.loraGroups(ad)
	if err != nil {
		return 0, err
	}
	id := m.adapters
	l := &loader{f: f, dev: m.dev}
	type placed struct {
		dst  *[]loraTerm
		term loraTerm
	}
	var terms []placed
	rank := 0
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		g := groups[k]
		var t loraTerm
		var err error
		if g.members[0].pair.Experts > 0 { // an expert pair's group has it alone
			t, err = l.loraExpertTerm(g.members[0], ad)
		} else {
			t, err = l.loraTerm(k, g.members, ad)
		}
		if err != nil {
			l.release()
			return 0, err
		}
		t.adapter = id
		terms = append(terms, placed{g.dst, t})
		rank = max(rank, t.rank)
	}
	if err := ensureWords(m.dev, &m.scratch.loraT, "lora_t", m.maxBatch*max(rank, m.loraRank)); err != nil {
		l.release()
		return 0, err
	}
	if slices.ContainsFunc(terms, func(p placed) bool { return p.term.a.Experts > 0 }) {
		if err := ensureWords(m.dev, &m.scratch.loraExp, "lora_exp", m.maxBatch*m.Config.NExpertUsed*max(rank, m.loraRank)); err != nil {
			l.release()
			return 0, err
		}
	}
	m.loraRank = max(m.loraRank, rank)
	for _, t := range terms {
		*t.dst = append(*t.dst, t.term)
	}
	m.weights, m.vectors = append(m.weights, l.weights...), append(m.vectors, l.bufs...)
	m.adapters++
	return id, nil
}

// loraGroups sorts an adapter's pairs into the model's projection groups, keyed by group.
func (m *Model) loraGroups(ad *lora.Adapter) (map[string]*loraGroup, error) {
	c := m.Config
	qDim, kvDim := c.NHead*c.HeadDim, c.NKVHead*c.HeadDim
	groups := map[string]*loraGroup{}
	add := func(key string, dst *[]loraTerm, p *lora.Pair, col int) {
		g := groups[key]
		if g == nil {
			g = &loraGroup{dst: dst}
			groups[key] = g
		}
		g.members = append(g.members, loraMember{p, col})
	}
	for name, p := range ad.Pairs {
		if name == "output.weight" {
			if m.hi == c.NLayer { // the stage with the output
				add(name, &m.loraOut, p, 0)
			}
			continue
		}
		rest, ok := strings.CutPrefix(name, "blk.")
		layer, tensor, _ := strings.Cut(rest, ".")
		il, err := strconv.Atoi(layer)
		if !ok || err != nil || il < 0 || il >= len(m.layers) {
			return nil, fmt.Errorf("model: lora tensor %q: only the layers' and the output's matrices take adapters", name)
		}
		if il < m.lo || il >= m.hi {
			continue // another stage's layer
		}
		t, key := &m.layerLora[il], fmt.Sprintf("blk.%03d.", il)
		switch tensor {
		case "attn_q.weight", "attn_qkv.weight":
			add(key+"qkv", &t.qkv, p, 0)
		case "attn_k.weight":
			add(key+"qkv", &t.qkv, p, qDim)
		case "attn_v.weight":
			add(key+"qkv", &t.qkv, p, qDim+kvDim)
		case "attn_output.weight":
			add(key+"wo", &t.wo, p, 0)
		case "ffn_gate.weight":
			add(key+"gate_up", &t.gateUp, p, 0)
		case "ffn_up.weight":
			col := c.NFF
			if _, fused := m.shapes[fmt.Sprintf("blk.%d.ffn_gate.weight", il)]; !fused {
				col = 0 // Phi-3's ffn_up holds gate and up
			}
			add(key+"gate_up", &t.gateUp, p, col)
		case "ffn_down.weight":
			add(key+"down", &t.down, p, 0)
		case "ffn_gate_exps.weight", "ffn_gate_up_exps.weight": // a group each: never stacked
			add(key+tensor, &t.expGateUp, p, 0)
		case "ffn_up_exps.weight":
			add(key+tensor, &t.expGateUp, p, c.NFFExpert)
		case "ffn_down_exps.weight":
			add(key+tensor, &t.expDown, p, 0)
		case "ffn_gate_shexp.weight":
			add(key+"sh_gate_up", &t.shGateUp, p, 0)
		case "ffn_up_shexp.weight":
			add(key+"sh_gate_up", &t.shGateUp, p, c.NFFShared)
		case "ffn_down_shexp.weight":
			add(key+"sh_down", &t.shDown, p, 0)
		default:
			return nil, fmt.Errorf("model: lora tensor %q: adapters on %s are not supported", name, tensor)
		}
	}
	return groups, nil
}

// loraTerm uploads one group's pairs: A stacked, B block-diagonal over the group's columns
// from the first a pair writes to the last, each in the pairs' type when they share one (the
// values are exact in it), else in F32.
func (l *loader) loraTerm(name string, members []loraMember, ad *lora.Adapter) (loraTerm, error) {
	sort.Slice(members, func(i, j int) bool { return members[i].col < members[j].col })
	typ := members[0].pair.A.Type
	rank, in, lo, hi := 0, members[0].pair.In, members[0].col, 0
	for _, mb := range members {
		p := mb.pair
		if p.A.Type != typ || p.B.Type != typ {
			typ = gguf.TypeF32
		}
		if p.In != in {
			return loraTerm{}, fmt.Errorf("model: lora tensor %q: inputs of %d, its group's of %d", p.Base, p.In, in)
		}
		rank += p.Rank
		hi = max(hi, mb.col+p.Out)
	}
	width := hi - lo
	a := make([]float32, 0, rank*in)
	b := make([]float32, width*rank)
	at := 0
	for _, mb := range members {
		p := mb.pair
		av, err := float32s(p.A, l.f.TensorData(p.A))
		if err != nil {
			return loraTerm{}, err
		}
		bv, err := float32s(p.B, l.f.TensorData(p.B))
		if err != nil {
			return loraTerm{}, err
		}
		a = append(a, av...)
		for r := range p.Out {
			copy(b[(mb.col-lo+r)*rank+at:], bv[r*p.Rank:(r+1)*p.Rank])
		}
		at += p.Rank
	}
	aw, err := l.adapterWeight(name+".lora_a", typ, rank, in, a)
	if err != nil {
		return loraTerm{}, err
	}
	bw, err := l.adapterWeight(name+".lora_b", typ, width, rank, b)
	if err != nil {
		return loraTerm{}, err
	}
	// every pair of an adapter has one rank, so one factor serves the group
	t := loraTerm{a: aw, b: bw, rank: rank, col: lo, factor: ad.Scale(members[0].pair, 1)}
	if rank <= gpu.LoRAMaxRank {
		if t.fa, err = l.dev.Upload(name+".lora_a.f32", gpu.Bytes(a)); err != nil {
			return loraTerm{}, fmt.Errorf("model: lora tensor %q: %w", name, err)
		}
		l.bufs = append(l.bufs, t.fa)
		if t.fb, err = l.dev.Upload(name+".lora_b.f32", gpu.Bytes(b)); err != nil {
			return loraTerm{}, fmt.Errorf("model: lora tensor %q: %w", name, err)
		}
		l.bufs = append(l.bufs, t.fb)
		t.act = gpu.ActFor(aw.Type)
	}
	return t, nil
}

// adapterWeight uploads rows x cols values in typ (F32, F16 or BF16).
func (l *loader) adapterWeight(name string, typ gguf.GGMLType, rows, cols int, v []float32) (gpu.Weight, error) {
	var data []byte
	switch typ {
	case gguf.TypeF16, gguf.TypeBF16:
		data = make([]byte, 2*len(v))
		for i, x := range v {
			h := gguf.F32ToF16(x)
			if typ == gguf.TypeBF16 {
				h = gguf.F32ToBF16(x)
			}
			binary.LittleEndian.PutUint16(data[2*i:], h)
		}
	default:
		typ, data = gguf.TypeF32, gpu.Bytes(v)
	}
	wt, ok := gpu.WeightTypeByName(typ.String())
	if !ok {
		return gpu.Weight{}, fmt.Errorf("model: lora tensor %q: type %s not supported", name, typ)
	}
	w, err := l.dev.UploadWeight(name, wt, rows, cols, data)
	if err != nil {
		return gpu.Weight{}, fmt.Errorf("model: lora tensor %q: %w", name, err)
	}
	l.weights = append(l.weights, w)
	return w, nil
}

// loraScale is the scale the pass runs term t with: 0 when its adapter is off.
func (m *Model) loraScale(t *loraTerm) float32 {
	if t.adapter >= len(m.passLora) {
		return 0
	}
	return m.passLora[t.adapter] * t.factor
}

// fusable is the one active term of a group, when one alone is active and has the fused
// kernels' f32 copies; nil otherwise.
func (m *Model) fusable(terms []loraTerm) *loraTerm {
	if m.dev.CPUMath {
		return nil // the products in llama.cpp's orders (addLora's)
	}
	var one *loraTerm
	for i := range terms {
		if m.loraScale(&terms[i]) == 0 {
			continue
		}
		if one != nil || terms[i].fa == nil {
			return nil
		}
		one = &terms[i]
	}
	return one
}

// actOf is the activation rounding a term's products take.
func (m *Model) actOf(t *loraTerm) gpu.ActQuant {
	if !m.actQuant {
		return gpu.ActNone
	}
	return t.act
}

// pendingLora is a residual projection's adapter terms not yet added to the residual stream
// (deferLora): the next RMS norm adds them on its way, else flushLora.
type pendingLora struct {
	terms []loraTerm
	x     *gpu.Buffer // the projection's input
	k     int
}

// deferLora leaves a residual projection's terms (of input x, k wide, into s.x) for the RMS
// norm that reads s.x next, when one term alone is active; otherwise it records them now.
func (m *Model) deferLora(r *gpu.Recorder, terms []loraTerm, x *gpu.Buffer, k, n int) {
	if t := m.fusable(terms); t != nil && t.col+t.b.Rows <= m.Config.NEmbd {
		m.pending = &pendingLora{terms: terms, x: x, k: k}
		return
	}
	m.addLora(r, terms, x, 0, n, k, m.scratch.x, m.Config.NEmbd)
}

// flushLora records the terms deferLora left, when no RMS norm took them.
func (m *Model) flushLora(r *gpu.Recorder, n int) {
	if p := m.pending; p != nil {
		m.pending = nil
		m.addLora(r, p.terms, p.x, 0, n, p.k, m.scratch.x, m.Config.NEmbd)
	}
}

// normProject records the RMS norm of the residual stream with weight norm and the group's
// projection of it into y (yStride wide), with the group's adapter terms. The norm first adds
// the terms the previous residual projection left (deferLora), and a decode step's one active
// adapter of this group runs inside the two dispatches: its A·x computed by the norm, its
// B·(A·x) added by the product's epilogue (MatMulLoRA).
func (m *Model) normProject(r *gpu.Recorder, norm *gpu.Buffer, ps []proj, terms []loraTerm, n int, y *gpu.Buffer, yStride int) {
	c, s := m.Config, &m.scratch
	var res *gpu.LoRAResidual
	if p := m.pending; p != nil {
		m.pending = nil
		t := m.fusable(p.terms)
		res = &gpu.LoRAResidual{In: p.x, A: t.fa, B: t.fb, K: p.k, Rank: t.rank, Col: t.col, Width: t.b.Rows, Scale: m.loraScale(t), Act: m.actOf(t)}
	}
	next := m.fusable(terms)
	if n > gpu.LoRAMaxTokens || !m.dev.BarrierFree && n > gpu.MatVecMaxTokens {
		next = nil
	}
	if res == nil && next == nil {
		r.RMSNorm(s.x, norm, s.xn, c.NEmbd, n, c.RMSEps)
		m.project(r, ps, s.xn, 0, n, c.NEmbd, y, yStride, false)
		m.addLora(r, terms, s.xn, 0, n, c.NEmbd, y, yStride)
		return
	}
	if next == nil {
		r.RMSNormLoRA(s.x, norm, s.xn, c.NEmbd, n, c.RMSEps, nil, res)
		m.project(r, ps, s.xn, 0, n, c.NEmbd, y, yStride, false)
		m.addLora(r, terms, s.xn, 0, n, c.NEmbd, y, yStride)
		return
	}
	r.RMSNormLoRA(s.x, norm, s.xn, c.NEmbd, n, c.RMSEps, &gpu.LoRAInput{A: next.fa, T: s.loraT, Rank: next.rank, Act: m.actOf(next)}, res)
	m.projectWith(r, ps, s.xn, 0, n, c.NEmbd, y, yStride, false,
		&gpu.LoRAEpilogue{B: next.fb, T: s.loraT, Rank: next.rank, Col: next.col, Width: next.b.Rows, Scale: m.loraScale(next)})
}

// addLora records, after a projection of the nTokens rows of x (k wide, from xRow0) into y,
// the terms of the adapters this pass runs with a nonzero scale.
func (m *Model) addLora(r *gpu.Recorder, terms []loraTerm, x *gpu.Buffer, xRow0, nTokens, k int, y *gpu.Buffer, yStride int) {
	for _, t := range terms {
		if m.loraScale(&t) == 0 {
			continue
		}
		if t.fa != nil && nTokens <= gpu.LoRAMaxTokens && !m.dev.CPUMath {
			r.LoRA(x, xRow0, nTokens, k, t.fa, t.fb, t.rank, t.b.Rows, y, yStride, t.col, m.loraScale(&t), m.actOf(&t))
			continue
		}
		m.project(r, []proj{{w: t.a}}, x, xRow0, nTokens, k, m.scratch.loraT, t.rank, false)
		m.projectScaled(r, proj{w: t.b, col: t.col}, m.scratch.loraT, nTokens, t.rank, y, yStride, m.loraScale(&t))
	}
}
