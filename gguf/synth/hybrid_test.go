package synth

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
)

// TestQwen35Validate refuses a hybrid without an attention block.
func TestQwen35Validate(t *testing.T) {
	c := tiny(t, quantize.MixF32)
	c.Arch, c.HeadDim, c.Layers = "qwen35", 32, 3
	if err := c.Validate(); err == nil {
		t.Error("a qwen35 of 3 layers (none of them attention) accepted")
	}
}

// TestQwen35 generates the hybrid at the tiny preset's width with heads of 32 and checks its
// blocks (recurrent ones, and every fourth gated attention), their shapes, the recurrent
// layers' keys and the interleaved RoPE's sections, ssm_a negative and ssm_conv1d left in F32
// by a quantized mix.
func TestQwen35(t *testing.T) {
	type shape = []uint64
	// dim 64, 4 heads of 32 (2 KV): state 32, 2 key heads, 4 value heads, conv over
	// 2·32·2 + 32·4 = 256 channels.
	recurrent := map[string]shape{"attn_norm.weight": {64}, "post_attention_norm.weight": {64},
		"attn_qkv.weight": {64, 256}, "attn_gate.weight": {64, 128}, "ssm_conv1d.weight": {4, 256},
		"ssm_dt.bias": {4}, "ssm_a": {4}, "ssm_beta.weight": {64, 4}, "ssm_alpha.weight": {64, 4},
		"ssm_norm.weight": {32}, "ssm_out.weight": {128, 64},
		"ffn_gate.weight": {64, 192}, "ffn_up.weight": {64, 192}, "ffn_down.weight": {192, 64}}
	attention := map[string]shape{"attn_norm.weight": {64}, "post_attention_norm.weight": {64},
		"attn_q.weight": {64, 256}, "attn_k.weight": {64, 64}, "attn_v.weight": {64, 64}, "attn_output.weight": {128, 64},
		"attn_q_norm.weight": {32}, "attn_k_norm.weight": {32},
		"ffn_gate.weight": {64, 192}, "ffn_up.weight": {64, 192}, "ffn_down.weight": {192, 64}}
	for _, mix := range []quantize.Mix{quantize.MixF32, quantize.MixQ8_0} {
		t.Run(mix.String(), func(t *testing.T) {
			c := tiny(t, mix)
			c.Arch, c.HeadDim, c.Layers, c.FF = "qwen35", 32, 8, 192
			f, _ := generate(t, c)
			want := map[string]shape{"token_embd.weight": {64, 512}, "output_norm.weight": {64}, "output.weight": {64, 512}}
			for i := range c.Layers {
				block := recurrent
				if (i+1)%4 == 0 {
					block = attention
				}
				for name, s := range block {
					want[fmt.Sprintf("blk.%d.%s", i, name)] = s
				}
			}
			checkShapes(t, f, want)
			for _, ti := range f.Tensors {
				if len(ti.Shape) == 1 || slices.Contains([]string{"blk.0.ssm_conv1d.weight", "blk.1.ssm_conv1d.weight"}, ti.Name) {
					if ti.Type != gguf.TypeF32 {
						t.Errorf("%s: %s, want F32", ti.Name, ti.Type)
					}
				}
				if ti.Name == "blk.0.ssm_a" {
					vals := make([]float32, ti.NumElements())
					if err := gguf.Dequantize(ti.Type, f.TensorData(&ti), vals); err != nil {
						t.Fatal(err)
					}
					for _, v := range vals {
						if v >= 0 {
							t.Errorf("ssm_a %v: want -exp of its log, negative", vals)
						}
					}
				}
			}
			for key, v := range map[string]uint64{"ssm.conv_kernel": 4, "ssm.inner_size": 128, "ssm.state_size": 32,
				"ssm.time_step_rank": 4, "ssm.group_count": 2, "full_attention_interval": 4, "rope.dimension_count": 8,
				"attention.key_length": 32} {
				if got, ok := f.Uint("qwen35." + key); !ok || got != v {
					t.Errorf("qwen35.%s = %d (%v), want %d", key, got, ok, v)
				}
			}
			if sect, ok := f.Int32s("qwen35.rope.dimension_sections"); !ok || fmt.Sprint(sect) != "[2 1 1 0]" {
				t.Errorf("qwen35.rope.dimension_sections %v (%v)", sect, ok)
			}
		})
	}
}

// TestQwen35MoE checks qwen35moe's blocks: qwen35's mixers (recurrent layers with their own
// head counts), then behind post_attention_norm the router, the experts and the shared expert
// of FF rows with its gate, and the expert keys llama.cpp reads.
func TestQwen35MoE(t *testing.T) {
	c, err := Preset("qwen35moe-tiny")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := generate(t, c)
	type shape = []uint64
	want := map[string]shape{"blk.0.attn_qkv.weight": {64, 256}, "blk.0.attn_gate.weight": {64, 128}, "blk.0.ssm_out.weight": {128, 64},
		"blk.3.attn_q.weight": {64, 256}, "blk.3.attn_output.weight": {128, 64},
		"blk.0.post_attention_norm.weight": {64}, "blk.3.post_attention_norm.weight": {64},
		"blk.0.ffn_gate_inp.weight": {64, 8}, "blk.0.ffn_gate_exps.weight": {64, 96, 8}, "blk.0.ffn_up_exps.weight": {64, 96, 8},
		"blk.0.ffn_down_exps.weight": {96, 64, 8}, "blk.3.ffn_down_exps.weight": {96, 64, 8},
		"blk.0.ffn_gate_inp_shexp.weight": {64}, "blk.0.ffn_gate_shexp.weight": {64, 192}, "blk.0.ffn_up_shexp.weight": {64, 192},
		"blk.0.ffn_down_shexp.weight": {192, 64}}
	for _, ti := range f.Tensors {
		if s, ok := want[ti.Name]; ok {
			if fmt.Sprint(ti.Shape) != fmt.Sprint(s) {
				t.Errorf("%s: shape %v, want %v", ti.Name, ti.Shape, s)
			}
			delete(want, ti.Name)
		}
		if strings.HasSuffix(ti.Name, "ffn_norm.weight") || strings.HasSuffix(ti.Name, "ffn_gate.weight") {
			t.Errorf("%s: a dense feed-forward's tensor in a Mixture of Experts", ti.Name)
		}
	}
	for name := range want {
		t.Errorf("%s missing", name)
	}
	for key, v := range map[string]uint64{"expert_count": 8, "expert_used_count": 2, "expert_feed_forward_length": 96,
		"expert_shared_feed_forward_length": 192, "ssm.time_step_rank": 4, "ssm.group_count": 2} {
		if got, ok := f.Uint("qwen35moe." + key); !ok || got != v {
			t.Errorf("qwen35moe.%s = %d (%v), want %d", key, got, ok, v)
		}
	}
}
