package reference

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// The Mixture-of-Experts architectures' settings, as llama.cpp b10587 reads and uses them
// (src/models/{qwen3moe,qwen2moe,llama,openai-moe}.cpp and load_hparams in src/llama-model.cpp):
//
//	qwen3moe: qwen3's attention (QK-norm, NeoX RoPE); softmax gating, the chosen weights
//	          normalised; experts of expert_feed_forward_length rows (default
//	          feed_forward_length / expert_used_count), SiLU-gated.
//	qwen2moe: qwen2's attention (NeoX, optional q/k/v biases); softmax gating, weights not
//	          normalised; plus a shared expert of expert_shared_feed_forward_length rows
//	          (default feed_forward_length) scaled by sigmoid(x . ffn_gate_inp_shexp).
//	qwen35moe: qwen35's hybrid blocks (qwen35.go) with qwen2moe's experts and gated shared
//	          expert, the chosen weights normalised.
//	llama with expert_count > 0 (Mixtral): softmax gating, weights normalised, experts of
//	          feed_forward_length rows; ffn_gate_exps optional (silu(up) without it).
//	gpt-oss:  biases on q, k, v (optional) and attn_output (required); attn_sinks per head in
//	          the softmax's denominator; scores scaled by 1/sqrt(n_rot); NeoX RoPE with YaRN;
//	          post_attention_norm as the FFN's input norm; a router bias, SOFTMAX_WEIGHT gating
//	          (top k of the raw logits, softmax over those k), weights not normalised; biases
//	          on every expert matrix; swiglu_oai (alpha 1.702, limit 7); layer il slides over
//	          attention.sliding_window positions when il % p < p - 1, p the
//	          attention.sliding_window_pattern (default 2: the even layers), p = 0 all.
//
// None of these reads expert_weights_scale, expert_weights_norm or expert_gating_func: their
// graphs fix the gating and the normalisation, and the scale stays 0 (none). None loads fused
// ffn_gate_up_exps tensors (SplitGateUp serves architectures that do).

// readGPTOSS reads gpt-oss's sliding window (required), its pattern and the sliding layers'
// RoPE: base rope.freq_base_swa (default rope.freq_base) and the training scale, which
// rope.scaling.type none does not reset for them.
func readGPTOSS(f *gguf.File, hp *hparams, trainScale float32) error {
	a := hp.arch
	window, ok := f.Uint(a + ".attention.sliding_window")
	if !ok || window == 0 || window > 1<<30 {
		return fmt.Errorf("reference: %s.attention.sliding_window missing or invalid", a)
	}
	hp.window, hp.swaPattern = int(window), 2
	if p, ok := f.Uint(a + ".attention.sliding_window_pattern"); ok && p <= 1<<20 {
		hp.swaPattern = int(p)
	}
	hp.ropeBaseSWA, hp.ropeScaleSWA = hp.ropeBase, trainScale
	if v, ok := f.Float(a + ".rope.freq_base_swa"); ok {
		hp.ropeBaseSWA = float32(v)
	}
	// Tensors are sized, and scores scaled, by n_rot: the head size is n_rot.
	hp.headDim = hp.nRot
	hp.attnScale = float32(1 / math.Sqrt(float64(hp.nRot)))
	return nil
}

// readMoE reads the experts' counts and sizes and fixes each architecture's routing.
func readMoE(f *gguf.File, hp *hparams) error {
	a := hp.arch
	u := func(key string) (int, bool) {
		v, ok := f.Uint(a + "." + key)
		if !ok || v > 1<<24 {
			return 0, false
		}
		return int(v), true
	}
	nExpert, _ := u("expert_count")
	nUsed, _ := u("expert_used_count")
	switch a {
	case "qwen3moe", "qwen2moe", "gpt-oss", "qwen35moe":
		if nExpert == 0 || nUsed == 0 {
			return fmt.Errorf("reference: %s needs %s.expert_count and expert_used_count", a, a)
		}
	case "llama":
		if nExpert == 0 {
			return nil // dense
		}
		if nUsed == 0 {
			return fmt.Errorf("reference: llama with %d experts needs llama.expert_used_count", nExpert)
		}
	default:
		return nil
	}
	if nUsed > nExpert {
		return fmt.Errorf("reference: expert_used_count %d exceeds expert_count %d", nUsed, nExpert)
	}
	hp.nExpert = nExpert
	hp.routing = Routing{NUsed: nUsed, Gating: GatingSoftmax, Normalize: true}
	hp.act = ActSiLU
	switch a {
	case "llama":
		hp.nFFExp = hp.nFF
	case "qwen3moe", "qwen2moe", "qwen35moe":
		hp.nFFExp, _ = u("expert_feed_forward_length")
		if hp.nFFExp == 0 {
			hp.nFFExp = hp.nFF / nUsed
		}
		if a == "qwen2moe" || a == "qwen35moe" { // qwen35moe's weights stay normalised
			hp.routing.Normalize = a == "qwen35moe"
			hp.nFFShexp, _ = u("expert_shared_feed_forward_length")
			if hp.nFFShexp == 0 {
				hp.nFFShexp = hp.nFF
			}
			if hp.nFFShexp == 0 {
				return fmt.Errorf("reference: %s needs expert_shared_feed_forward_length or feed_forward_length", a)
			}
		}
	case "gpt-oss":
		hp.nFFExp, _ = u("expert_feed_forward_length") // required
		hp.routing.Gating, hp.routing.Normalize = GatingSoftmaxWeight, false
		hp.act = ActSwiGLUOAI
	}
	if hp.nFFExp == 0 {
		return fmt.Errorf("reference: %s.expert_feed_forward_length missing", a)
	}
	return nil
}

// loadMoE reads a block's router and experts (name gives a tensor's full name in the block).
func loadMoE(w loader, hp hparams, name func(string) string) (*MoE, error) {
	m := &MoE{NEmbd: hp.nEmbd, NFF: hp.nFFExp, NExpert: hp.nExpert, Routing: hp.routing, Act: hp.act}
	var err error
	get := func(dst *[]float32, s string, required bool, shape ...int) {
		if err != nil {
			return
		}
		if required {
			*dst, err = w.tensor(name(s), shape...)
		} else {
			*dst, err = w.optional(name(s), shape...)
		}
	}
	d, ff, e := hp.nEmbd, hp.nFFExp, hp.nExpert
	oss := hp.arch == "gpt-oss"
	get(&m.Router, "ffn_gate_inp.weight", true, d, e)
	get(&m.Gate, "ffn_gate_exps.weight", hp.arch != "llama", d, ff, e) // llama's is optional
	get(&m.Up, "ffn_up_exps.weight", true, d, ff, e)
	get(&m.Down, "ffn_down_exps.weight", true, ff, d, e)
	if oss {
		get(&m.RouterBias, "ffn_gate_inp.bias", true, e)
		get(&m.GateBias, "ffn_gate_exps.bias", true, ff, e)
		get(&m.UpBias, "ffn_up_exps.bias", true, ff, e)
		get(&m.DownBias, "ffn_down_exps.bias", true, d, e)
	}
	if hp.arch == "qwen2moe" || hp.arch == "qwen35moe" {
		s := &SharedExpert{NFF: hp.nFFShexp}
		get(&s.GateInp, "ffn_gate_inp_shexp.weight", true, d)
		get(&s.Gate, "ffn_gate_shexp.weight", true, d, s.NFF)
		get(&s.Up, "ffn_up_shexp.weight", true, d, s.NFF)
		get(&s.Down, "ffn_down_shexp.weight", true, s.NFF, d)
		m.Shared = s
	}
	return m, err
}
