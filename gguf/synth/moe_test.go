package synth

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
)

// TestMoEArchs generates qwen3moe and gpt-oss at the tiny preset's width in F32 and Q8_0 and
// checks each block's tensors (names, shapes, and the types llama-quantize gives them: the
// router, biases and sinks stay F32), the expert keys and gpt-oss's window and YaRN.
func TestMoEArchs(t *testing.T) {
	type shape = []uint64
	// dim 64, 4 heads of 32 (qwen3moe: 2*dim/heads) or 16 (gpt-oss), 2 KV heads, 8 experts of 96.
	blocks := map[string]map[string]shape{
		"qwen3moe": {"attn_norm.weight": {64}, "attn_q.weight": {64, 128}, "attn_q_norm.weight": {32}, "attn_k.weight": {64, 64},
			"attn_k_norm.weight": {32}, "attn_v.weight": {64, 64}, "attn_output.weight": {128, 64}, "ffn_norm.weight": {64},
			"ffn_gate_inp.weight": {64, 8}, "ffn_gate_exps.weight": {64, 96, 8}, "ffn_up_exps.weight": {64, 96, 8}, "ffn_down_exps.weight": {96, 64, 8}},
		"qwen2moe": {"attn_norm.weight": {64}, "attn_q.weight": {64, 64}, "attn_q.bias": {64}, "attn_k.weight": {64, 32}, "attn_k.bias": {32},
			"attn_v.weight": {64, 32}, "attn_v.bias": {32}, "attn_output.weight": {64, 64}, "ffn_norm.weight": {64},
			"ffn_gate_inp.weight": {64, 8}, "ffn_gate_exps.weight": {64, 96, 8}, "ffn_up_exps.weight": {64, 96, 8}, "ffn_down_exps.weight": {96, 64, 8},
			"ffn_gate_inp_shexp.weight": {64}, "ffn_gate_shexp.weight": {64, 172}, "ffn_up_shexp.weight": {64, 172}, "ffn_down_shexp.weight": {172, 64}},
		"gpt-oss": {"attn_norm.weight": {64}, "attn_q.weight": {64, 64}, "attn_q.bias": {64}, "attn_k.weight": {64, 32}, "attn_k.bias": {32},
			"attn_v.weight": {64, 32}, "attn_v.bias": {32}, "attn_output.weight": {64, 64}, "attn_output.bias": {64}, "attn_sinks.weight": {4},
			"post_attention_norm.weight": {64}, "ffn_gate_inp.weight": {64, 8}, "ffn_gate_inp.bias": {8},
			"ffn_gate_exps.weight": {64, 96, 8}, "ffn_gate_exps.bias": {96, 8}, "ffn_up_exps.weight": {64, 96, 8}, "ffn_up_exps.bias": {96, 8},
			"ffn_down_exps.weight": {96, 64, 8}, "ffn_down_exps.bias": {64, 8}},
	}
	for arch, block := range blocks {
		for _, mix := range []quantize.Mix{quantize.MixF32, quantize.MixQ8_0} {
			t.Run(arch+"/"+mix.String(), func(t *testing.T) {
				c := tiny(t, mix)
				c.Arch, c.Experts, c.ExpertFF = arch, 8, 96
				if err := c.Validate(); err != nil {
					t.Fatal(err)
				}
				f, _ := generate(t, c)
				want := map[string]shape{"token_embd.weight": {64, 512}, "output_norm.weight": {64}, "output.weight": {64, 512}}
				for i := range c.Layers {
					for name, s := range block {
						want[fmt.Sprintf("blk.%d.%s", i, name)] = s
					}
				}
				checkShapes(t, f, want)
				for _, ti := range f.Tensors {
					wantType := mix.DefaultType()
					if mix == quantize.MixQ8_0 && ti.Shape[0] == 172 {
						wantType = gguf.TypeF16 // rows of 172 are no whole Q8_0 blocks
					}
					if len(ti.Shape) == 1 || strings.Contains(ti.Name, "ffn_gate_inp") || strings.HasSuffix(ti.Name, ".bias") {
						wantType = gguf.TypeF32 // vectors, routers and biases are never quantized
					}
					if ti.Type != wantType {
						t.Errorf("%s: %s, want %s", ti.Name, ti.Type, wantType)
					}
				}
				keys := map[string]uint64{"expert_count": 8, "expert_used_count": 2, "expert_feed_forward_length": 96}
				if arch == "qwen2moe" {
					keys["expert_shared_feed_forward_length"] = 172
				}
				if arch == "gpt-oss" {
					keys["attention.sliding_window"] = 4
					keys["rope.scaling.original_context_length"] = 4096
				}
				for key, v := range keys {
					if got, ok := f.Uint(arch + "." + key); !ok || got != v {
						t.Errorf("%s.%s = %d (%v), want %d", arch, key, got, ok, v)
					}
				}
				typ, _ := f.String(arch + ".rope.scaling.type")
				if factor, _ := f.Float(arch + ".rope.scaling.factor"); (typ == "yarn") != (arch == "gpt-oss") || typ == "yarn" && factor != 32 {
					t.Errorf("%s.rope.scaling %q x%g", arch, typ, factor)
				}
			})
		}
	}
}

// TestMoEValidate checks the expert fields' limits.
func TestMoEValidate(t *testing.T) {
	c := tiny(t, quantize.MixF32)
	for _, bad := range []func(*Config){
		func(c *Config) { c.Experts = 4 }, // llama has no experts
		func(c *Config) { c.Arch, c.Experts, c.ExpertsUsed = "qwen3moe", 4, 5 },
		func(c *Config) { c.Arch, c.ExpertFF = "gpt-oss", -1 },
		func(c *Config) { c.Arch, c.RopeDim = "gpt-oss", 8 }, // gpt-oss rotates whole heads
	} {
		b := c
		bad(&b)
		if err := b.Validate(); err == nil {
			t.Errorf("%+v accepted", b)
		}
	}
	for _, name := range []string{"moe-tiny", "moe-128", "moe-128-dense", "qwen3-30b-a3b", "gpt-oss-20b"} {
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
}
