package model

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// qwen35: Qwen3.5/3.6 dense, a hybrid of Gated DeltaNet linear-attention layers, which carry a
// recurrent state per sequence (block_recurrent.go), and every fourth layer gated full
// attention (q and an output gate from attn_q, QK-norm, partial interleaved M-RoPE), each
// followed by a dense SwiGLU behind post_attention_norm, as llama.cpp's src/models/qwen35.cpp.
func init() {
	register(&arch{name: "qwen35", hparams: qwen35Hparams, layer: qwen35Layer, block: qwen35Block})
}

// qwen35Hparams reads the recurrent layers' shape and pattern, the M-RoPE sections and the
// multi-token-prediction blocks (left out: NLayer counts the blocks a pass runs), as
// llama_model_qwen35::load_arch_hparams.
func qwen35Hparams(k keys, c *Config) error {
	c.RopeNeoX, c.GatedAttn, c.IMRoPE = true, true, true
	var dInner int
	for _, r := range []struct {
		key string
		dst *int
	}{{"ssm.conv_kernel", &c.SSMConv}, {"ssm.inner_size", &dInner}, {"ssm.state_size", &c.SSMHeadDim},
		{"ssm.time_step_rank", &c.SSMValHeads}, {"ssm.group_count", &c.SSMKeyHeads}} {
		if err := k.required(r.key, r.dst); err != nil {
			return err
		}
	}
	switch a := k.arch; {
	case dInner != c.SSMValHeads*c.SSMHeadDim:
		return fmt.Errorf("model: %s.ssm.inner_size %d is not time_step_rank %d heads of state_size %d", a, dInner, c.SSMValHeads, c.SSMHeadDim)
	case c.SSMValHeads%c.SSMKeyHeads != 0:
		return fmt.Errorf("model: %s.ssm.group_count %d does not divide time_step_rank %d", a, c.SSMKeyHeads, c.SSMValHeads)
	case c.SSMConv < 2 || c.SSMConv > gpu.SSMConvMaxKernel:
		return fmt.Errorf("model: %s.ssm.conv_kernel %d not supported (2 to %d)", a, c.SSMConv, gpu.SSMConvMaxKernel)
	case c.SSMHeadDim > gpu.DeltaNetMaxHeadDim:
		return fmt.Errorf("model: %s.ssm.state_size %d not supported (at most %d)", a, c.SSMHeadDim, gpu.DeltaNetMaxHeadDim)
	}
	if err := readMRope(k, c); err != nil {
		return err
	}
	k.uint("nextn_predict_layers", &c.NextNLayers)
	if c.NextNLayers >= c.NLayer {
		return fmt.Errorf("model: %s.nextn_predict_layers %d not below block_count %d", k.arch, c.NextNLayers, c.NLayer)
	}
	all := c.NLayer
	c.NLayer -= c.NextNLayers
	flags, err := recurrentLayers(k, all)
	if err != nil {
		return err
	}
	c.Recurrent = flags[:c.NLayer]
	return nil
}

// recurrentLayers is which of the file's n blocks are recurrent: attention.recurrent_layers
// (flags, or one for all) when present, else every layer but each full_attention_interval-th
// (default 4: layers 3, 7, 11, ... attend).
func recurrentLayers(k keys, n int) ([]bool, error) {
	key := k.arch + ".attention.recurrent_layers"
	flags := make([]bool, n)
	kv, ok := k.f.Lookup(key)
	if !ok {
		interval := 4
		k.uint("full_attention_interval", &interval)
		if interval < 1 {
			return nil, fmt.Errorf("model: %s.full_attention_interval is 0", k.arch)
		}
		for il := range flags {
			flags[il] = (il+1)%interval != 0
		}
		return flags, nil
	}
	switch v := kv.Value.(type) {
	case bool:
		for il := range flags {
			flags[il] = v
		}
		return flags, nil
	case gguf.Array:
		if b, ok := v.Values.([]bool); ok && len(b) == n {
			return b, nil
		}
		if ints, ok := k.f.Int32s(key); ok && len(ints) == n {
			for il, x := range ints {
				flags[il] = x != 0
			}
			return flags, nil
		}
	}
	return nil, fmt.Errorf("model: %s: want %d flags, one per block", key, n)
}

// readMRope reads the M-RoPE sections (rope.dimension_sections: 1 to 4 integers, padded to
// four as llama.cpp pads them; a rotated pair's section follows from its index modulo their
// total).
func readMRope(k keys, c *Config) error {
	key := k.arch + ".rope.dimension_sections"
	v, ok := k.f.Int32s(key)
	if !ok || len(v) == 0 || len(v) > 4 {
		return fmt.Errorf("model: %s missing or not 1 to 4 integers", key)
	}
	total := 0
	for i, n := range v {
		if n < 0 || n > 1<<16 {
			return fmt.Errorf("model: %s has a section of %d", key, n)
		}
		c.MRope[i] = int(n)
		total += int(n)
	}
	if total == 0 {
		return fmt.Errorf("model: %s are all 0", key)
	}
	return nil
}

// qwen35Layer loads a block: Gated DeltaNet or gated attention, then the dense feed-forward
// behind post_attention_norm.
func qwen35Layer(l *loader, c *Config, ly *layer, il int) error {
	var err error
	if c.Recurrent[il] {
		err = loadDeltaNet(l, c, ly, il)
	} else {
		err = loadAttention(l, c, ly, il)
	}
	if err != nil {
		return err
	}
	return loadFFN(l, c, ly, il, "post_attention_norm")
}

// qwen35Block records a block: its mixer (Gated DeltaNet or gated attention), then the
// feed-forward, each behind its RMS norm and added to the residual stream.
func qwen35Block(m *Model, p *pass, il int) {
	if m.Config.Recurrent[il] {
		m.deltaNetBlock(p, il)
	} else {
		m.attentionBlock(p, il)
	}
	m.ffnBlock(p, il)
}
