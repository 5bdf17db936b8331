package quantize

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// Model holds the hyper-parameters llama.cpp's mix rules depend on.
type Model struct {
	// Arch is general.architecture; "falcon" has rules of its own.
	Arch string
	// Layers is block_count, the n_layer of the ffn_down "use more bits" rules.
	Layers int
	// Heads and KVHeads give the GQA ratio, which decides attn_v's type in Q2_K.
	Heads, KVHeads int
	// Experts is expert_count; 8 experts (Mixtral) get more bits in attention.
	Experts int
}

// ModelOf reads the hyper-parameters from a file's metadata, with llama.cpp's defaults for
// absent keys (head_count_kv = head_count).
func ModelOf(f *gguf.File) Model {
	m := Model{Arch: f.Architecture()}
	get := func(key string) int {
		v, _ := f.Uint(m.Arch + "." + key)
		return int(min(v, 1<<31))
	}
	m.Layers = get("block_count")
	m.Heads = get("attention.head_count")
	m.KVHeads = m.Heads
	if _, ok := f.Lookup(m.Arch + ".attention.head_count_kv"); ok {
		m.KVHeads = get("attention.head_count_kv")
	}
	m.Experts = get("expert_count")
	return m
}

// gqa is llama.cpp's n_gqa(): query heads per KV head, 0 when unknown.
func (m Model) gqa() int {
	if m.KVHeads == 0 {
		return 0
	}
	return m.Heads / m.KVHeads
}

// is70B mirrors llama.cpp's LLM_TYPE_70B, for which attn_v gets Q5_K instead of Q3_K/Q4_K.
func (m Model) is70B() bool { return m.Arch == "llama" && m.Layers == 80 && m.Heads != m.KVHeads }

// Tensor is what planning needs to know of a tensor.
type Tensor struct {
	// Name is the GGUF tensor name; the mix rules match on it (blk.N.attn_v.weight, ...).
	Name string
	// Shape is ggml-ordered: Shape[0] is the row length that decides block-size fallbacks.
	Shape []uint64
	// Type is the input type, kept when the tensor is not quantized.
	Type gguf.GGMLType
}

// TensorPlan says what becomes of one tensor.
type TensorPlan struct {
	// Name and Shape are the input tensor's, unchanged by conversion.
	Name  string
	Shape []uint64 // ggml order: Shape[0] is the row length
	// From is the input type, To the output type.
	From, To gguf.GGMLType
	// Wanted is the type the mix's rules chose; To differs when the row length forced a
	// fallback, and Note then says why in llama-quantize's words.
	Wanted gguf.GGMLType
	Note   string // empty unless To != Wanted
}

// Fallback reports whether the row length forced a type other than the one the mix wanted.
func (p TensorPlan) Fallback() bool { return p.To != p.Wanted }

// Converts reports whether the tensor's bytes change (otherwise they are copied as they are).
func (p TensorPlan) Converts() bool { return p.From != p.To }

// Elements returns the number of elements.
func (p TensorPlan) Elements() uint64 {
	n := uint64(1)
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// Size returns the tensor's byte size in its output type.
func (p TensorPlan) Size() uint64 { s, _ := p.To.RowSize(p.Elements()); return s }

// layerOf parses the layer index from "blk.N.…" as llama.cpp's sscanf("blk.%d.") does; -1 for
// tensors outside the layers.
func layerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	end := 0
	for end < len(rest) && (rest[end] >= '0' && rest[end] <= '9' || end == 0 && (rest[0] == '-' || rest[0] == '+')) {
		end++
	}
	n, err := strconv.Atoi(rest[:end])
	if err != nil {
		return -1
	}
	return n
}

// SortTensors puts tensors in llama-quantize's order (its loader's weight_name_comparer: layer
// index, then name bytewise, with non-layer tensors first). That order is also the order of
// the layer counters in the mix rules, and of the tensors in llama-quantize's output.
func SortTensors(ts []Tensor) {
	slices.SortStableFunc(ts, func(a, b Tensor) int { return compareNames(a.Name, b.Name) })
}

func compareNames(a, b string) int {
	if c := cmp.Compare(layerOf(a), layerOf(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// Plan gives every tensor of f its type under mix, in llama-quantize's output order.
func Plan(f *gguf.File, mix Mix) ([]TensorPlan, error) {
	ts := make([]Tensor, len(f.Tensors))
	for i, t := range f.Tensors {
		ts[i] = Tensor{Name: t.Name, Shape: t.Shape, Type: t.Type}
	}
	SortTensors(ts)
	return PlanTensors(ModelOf(f), ts, mix)
}

// PlanTensors gives each tensor its type under mix, returning the plans in the order given.
// The layer counters of the mix rules advance in llama-quantize's order whatever the order of
// ts, so a model written in another tensor order gets the same types.
func PlanTensors(m Model, ts []Tensor, mix Mix) ([]TensorPlan, error) {
	if _, ok := mix.info(); !ok {
		return nil, fmt.Errorf("quantize: unsupported mix %v", mix)
	}
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compareNames(ts[a].Name, ts[b].Name) })
	p := &planner{m: m, mix: mix, tied: true}
	for _, t := range ts {
		c := categoryOf(t.Name)
		if c == catAttnV || c == catAttnQKV || c == catAttnKVB {
			p.nAttnV++
		}
		if c == catOutput {
			p.tied = false
		}
	}
	plans := make([]TensorPlan, len(ts))
	for _, i := range order {
		pl, err := p.plan(ts[i])
		if err != nil {
			return nil, err
		}
		plans[i] = pl
	}
	return plans, nil
}

// category is llama.cpp's tensor_category: the broad role a tensor name implies.
type category int

const (
	catOther category = iota
	catTokenEmbd
	catAttnQ
	catAttnK
	catAttnV
	catAttnQKV
	catAttnKVB
	catAttnOutput
	catFFNUp
	catFFNGate
	catFFNDown
	catOutput
)

// categoryOf matches names in llama.cpp's order (substrings, so expert tensors such as
// ffn_down_exps count as ffn_down).
func categoryOf(name string) category {
	switch {
	case name == "output.weight":
		return catOutput
	case name == "token_embd.weight" || name == "per_layer_token_embd.weight":
		return catTokenEmbd
	case strings.Contains(name, "attn_qkv.weight"):
		return catAttnQKV
	case strings.Contains(name, "attn_kv_b.weight"):
		return catAttnKVB
	case strings.Contains(name, "attn_v.weight"):
		return catAttnV
	case strings.Contains(name, "attn_k.weight"):
		return catAttnK
	case strings.Contains(name, "attn_q.weight"):
		return catAttnQ
	case strings.Contains(name, "attn_output.weight"):
		return catAttnOutput
	case strings.Contains(name, "ffn_up"):
		return catFFNUp
	case strings.Contains(name, "ffn_gate"):
		return catFFNGate
	case strings.Contains(name, "ffn_down"):
		return catFFNDown
	}
	return catOther
}

// keepSubstrings name tensors llama.cpp never quantizes although they are "weight" matrices:
// norms, MoE routers and small architecture-specific tables.
var keepSubstrings = []string{
	"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
	"per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
	"indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
	"time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
	"time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
	"time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
	"time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd",
	"sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
	"mm.a.code_embd",
}

// nDims is ggml_n_dims: trailing dimensions of 1 do not count, so a [n, 1] tensor is 1-D.
func nDims(shape []uint64) int {
	n := len(shape)
	for n > 1 && shape[n-1] == 1 {
		n--
	}
	return n
}

// allowsQuantization is llama.cpp's tensor_allows_quantization: matrices (2-D and up) whose
// names end in "weight", except norms and the tensors in keepSubstrings.
func allowsQuantization(t Tensor) bool {
	if nDims(t.Shape) < 2 || !strings.HasSuffix(t.Name, "weight") {
		return false
	}
	if t.Name == "position_embd.weight" || t.Name == "token_types.weight" {
		return false
	}
	for _, s := range keepSubstrings {
		if strings.Contains(t.Name, s) {
			return false
		}
	}
	return true
}

// planner carries llama.cpp's quantize_state_impl counters across tensors.
type planner struct {
	m      Model
	mix    Mix
	tied   bool // no output.weight: token_embd doubles as the output matrix
	nAttnV int
	iAttnV int
	iDown  int
	iGate  int
	iUp    int
}

func (p *planner) plan(t Tensor) (TensorPlan, error) {
	pl := TensorPlan{Name: t.Name, Shape: t.Shape, From: t.Type, To: t.Type, Wanted: t.Type}
	if !allowsQuantization(t) {
		return pl, nil
	}
	typ := p.mix.DefaultType()
	if p.mix.quantized() {
		var err error
		if typ, err = p.rules(t, typ); err != nil {
			return pl, err
		}
	}
	pl.Wanted, pl.To = typ, typ
	if p.mix.quantized() {
		pl.To, pl.Note = fallback(t, typ)
	}
	return pl, nil
}

// useMoreBits picks the layers that get more bits in the _M mixes: the first and last eighth
// and every third layer in between.
func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

// layer returns the layer index the ffn rules use: the running count, or for MoE models (whose
// expert tensors need not come in layer order) the index in the name, as llama.cpp does.
func (p *planner) layer(count int, name string) (int, error) {
	if p.m.Experts <= 1 {
		return count, nil
	}
	i := layerOf(name)
	if i < 0 || i >= p.m.Layers {
		return 0, fmt.Errorf("quantize: tensor %s: cannot tell its layer (of %d)", name, p.m.Layers)
	}
	return i, nil
}

// rules is llama.cpp's llama_tensor_get_type_impl restricted to this package's mixes (of the IQ
// types only IQ4_NL and IQ4_XS; no importance matrix).
func (p *planner) rules(t Tensor, typ gguf.GGMLType) (gguf.GGMLType, error) {
	mix, falcon := p.mix, p.m.Arch == "falcon"
	c := categoryOf(t.Name)
	switch {
	case c == catOutput || p.tied && c == catTokenEmbd:
		if mix == MixMXFP4_MOE || falcon || t.Shape[0]%typ.BlockSize() != 0 {
			return gguf.TypeQ8_0, nil
		}
		if typ != gguf.TypeQ8_0 {
			return gguf.TypeQ6_K, nil
		}
	case mix == MixMXFP4_MOE:
		// Expert tensors (3-D: a matrix per expert) get MXFP4, every other matrix Q8_0, before
		// any of the rules below (so no layer counters advance). bailingmoe3's 3-D MLA
		// projections are not experts.
		expert := c == catFFNUp || c == catFFNGate || c == catFFNDown
		if len(t.Shape) > 2 && t.Shape[2] > 1 && (p.m.Arch != "bailingmoe3" || expert) {
			return gguf.TypeMXFP4, nil
		}
		return gguf.TypeQ8_0, nil
	case c == catAttnV || c == catAttnQKV || c == catAttnKVB:
		switch {
		case mix == MixQ2_K:
			typ = gguf.TypeQ3_K
			if p.m.gqa() >= 4 {
				typ = gguf.TypeQ4_K
			}
		case mix == MixQ3_K_M:
			typ = gguf.TypeQ4_K
			if p.iAttnV < 2 {
				typ = gguf.TypeQ5_K
			}
		case mix == MixQ3_K_L:
			typ = gguf.TypeQ5_K
		case (mix == MixIQ4_NL || mix == MixIQ4_XS) && p.m.gqa() >= 4:
			typ = gguf.TypeQ5_K
		case (mix == MixQ4_K_M || mix == MixQ5_K_M) && useMoreBits(p.iAttnV, p.nAttnV):
			typ = gguf.TypeQ6_K
		case mix == MixQ4_K_S && p.iAttnV < 4:
			typ = gguf.TypeQ5_K
		}
		if p.m.is70B() && (typ == gguf.TypeQ3_K || typ == gguf.TypeQ4_K) {
			typ = gguf.TypeQ5_K
		}
		if p.m.Experts == 8 {
			typ = gguf.TypeQ8_0
		}
		p.iAttnV++
	case c == catAttnK:
		if p.m.Experts == 8 {
			typ = gguf.TypeQ8_0
		}
	case c == catFFNDown:
		i, err := p.layer(p.iDown, t.Name)
		if err != nil {
			return 0, err
		}
		n := p.m.Layers
		switch {
		case mix == MixQ2_K:
			typ = gguf.TypeQ3_K
		case mix == MixQ3_K_M:
			switch {
			case i < n/16:
				typ = gguf.TypeQ5_K
			case !falcon || useMoreBits(i, n):
				typ = gguf.TypeQ4_K
			default:
				typ = gguf.TypeQ3_K
			}
		case mix == MixQ3_K_L:
			typ = gguf.TypeQ5_K
			if falcon {
				typ = gguf.TypeQ4_K
			}
		case mix == MixQ4_K_M:
			switch {
			case falcon && i < n/16:
				typ = gguf.TypeQ6_K
			case falcon && useMoreBits(i, n):
				typ = gguf.TypeQ5_K
			case falcon:
				typ = gguf.TypeQ4_K
			case useMoreBits(i, n):
				typ = gguf.TypeQ6_K
			}
		case (mix == MixIQ4_NL || mix == MixIQ4_XS) && i < n/8: // llama.cpp: only without an imatrix
			typ = gguf.TypeQ5_K
		case mix == MixQ5_K_M && useMoreBits(i, n):
			typ = gguf.TypeQ6_K
		case mix == MixQ4_K_S && !falcon && i < n/8:
			typ = gguf.TypeQ5_K
		}
		p.iDown++
	case c == catAttnOutput:
		switch {
		case falcon:
			if mix == MixQ3_K_L {
				typ = gguf.TypeQ4_K
			}
		case p.m.Experts == 8:
			switch mix {
			case MixQ2_K, MixQ3_K_S, MixQ3_K_M, MixQ4_K_S, MixQ4_K_M, MixIQ4_NL, MixIQ4_XS:
				typ = gguf.TypeQ5_K
			}
		case mix == MixQ2_K:
			typ = gguf.TypeQ3_K
		case mix == MixQ3_K_M:
			typ = gguf.TypeQ4_K
		case mix == MixQ3_K_L:
			typ = gguf.TypeQ5_K
		}
	case c == catFFNGate:
		if _, err := p.layer(p.iGate, t.Name); err != nil {
			return 0, err
		}
		p.iGate++
	case c == catFFNUp:
		if _, err := p.layer(p.iUp, t.Name); err != nil {
			return 0, err
		}
		p.iUp++
	}
	return typ, nil
}

// fallback is llama.cpp's tensor_type_fallback: when the row length is not a multiple of the
// wanted type's block size, K-quants fall back to a 32-block type of about as many bits (the
// 256-block IQ types to IQ4_NL), and when 32 does not divide the row either, to F16. Where
// llama.cpp defines no fallback (the 32-block types themselves: Q8_0, IQ4_NL, MXFP4, ...) and
// aborts, this goes to F16 directly, what llama-quantize gives with --tensor-type NAME=f16.
func fallback(t Tensor, want gguf.GGMLType) (gguf.GGMLType, string) {
	ncols := t.Shape[0]
	if ncols%want.BlockSize() == 0 {
		return want, ""
	}
	note := fmt.Sprintf("ncols %d not divisible by %d (required for type %s)", ncols, want.BlockSize(), want)
	to := gguf.TypeF16
	switch want {
	case gguf.TypeQ2_K, gguf.TypeQ3_K:
		to = gguf.TypeQ4_0
	case gguf.TypeQ4_K:
		to = gguf.TypeQ5_0
	case gguf.TypeQ5_K:
		to = gguf.TypeQ5_1
	case gguf.TypeQ6_K:
		to = gguf.TypeQ8_0
	case gguf.TypeIQ4_XS, gguf.TypeIQ3_S, gguf.TypeIQ3_XXS, gguf.TypeIQ2_S, gguf.TypeIQ2_XS,
		gguf.TypeIQ2_XXS, gguf.TypeIQ1_M, gguf.TypeIQ1_S:
		to = gguf.TypeIQ4_NL
	default:
		note += ", no fallback type defined"
	}
	if ncols%to.BlockSize() != 0 {
		note += ", must use F16 due to unusual shape"
		to = gguf.TypeF16
	}
	return to, note + ", falling back to " + to.String()
}
