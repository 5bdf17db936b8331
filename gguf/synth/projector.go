package synth

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
)

// Projector describes a synthetic multimodal projector: an mmproj GGUF (general.architecture
// "clip") with the tensors and keys llama.cpp's converters write for the projector type, and
// seeded random weights, so image input can be tested for projectors of which no real file is
// at hand.
type Projector struct {
	// Type is clip.projector_type: one of ProjectorTypes().
	Type string
	// ImageSize is the encoder's square input and PatchSize its patches' side.
	ImageSize, PatchSize int
	// Dim, Layers, Heads and FF shape the ViT.
	Dim, Layers, Heads, FF int
	// ProjDim is the projected embeddings' width: the text model's n_embd.
	ProjDim int
	// Hidden is mlp's mm.0 width (0: ProjDim).
	Hidden int
	// ScaleFactor is idefics3's pixel shuffle (clip.vision.projector.scale_factor).
	ScaleFactor int
	// LongestEdge is idefics3's clip.vision.preproc_image_size (0: no tiles).
	LongestEdge int
	// WindowPattern is Qwen2.5-VL's n_wa_pattern (every WindowPattern-th layer attends
	// over the whole image).
	WindowPattern int
	// Seed selects the weights.
	Seed uint64
}

// ProjectorTypes lists the projector types WriteProjector writes.
func ProjectorTypes() []string {
	return []string{"mlp", "idefics3", "qwen2vl_merger", "qwen2.5vl_merger"}
}

// qwen reports whether the projector is Qwen2-VL's or Qwen2.5-VL's.
func (p Projector) qwen() bool { return strings.HasPrefix(p.Type, "qwen2") }

// TinyProjector is a small projector of the type for the tiny preset's width (64): a 5 x 5
// patch grid (mlp) or 6 x 6 pooled by 2 (idefics3, tiles of an image fit into 72 x 72), sizes
// no kernel tile divides; Qwen's take 14-pixel patches (their windows are 4 x 4 tokens), and
// Qwen2.5-VL's layers alternate windowed and full attention (n_wa_pattern 2).
func TinyProjector(typ string) Projector {
	p := Projector{Type: typ, ImageSize: 30, PatchSize: 6, Dim: 48, Layers: 3, Heads: 4, FF: 100, ProjDim: 64, Hidden: 80, Seed: 1}
	switch typ {
	case "idefics3":
		p.ImageSize, p.ScaleFactor, p.LongestEdge = 36, 2, 72
	case "qwen2vl_merger", "qwen2.5vl_merger":
		p.ImageSize, p.PatchSize = 112, 14
		if typ == "qwen2.5vl_merger" {
			p.WindowPattern = 2
		}
	}
	return p
}

// Validate checks the projector's shape.
func (p Projector) Validate() error {
	if !slices.Contains(ProjectorTypes(), p.Type) {
		return fmt.Errorf("synth: projector type %q not supported (supported: %s)", p.Type, strings.Join(ProjectorTypes(), ", "))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"image size", p.ImageSize}, {"patch size", p.PatchSize}, {"dim", p.Dim}, {"layers", p.Layers}, {"heads", p.Heads}, {"ff", p.FF}, {"projection dim", p.ProjDim}} {
		if f.v <= 0 {
			return fmt.Errorf("synth: projector %s must be positive, not %d", f.name, f.v)
		}
	}
	g := p.ImageSize / p.PatchSize
	switch {
	case p.ImageSize%p.PatchSize != 0:
		return fmt.Errorf("synth: image size %d is not a multiple of patch size %d", p.ImageSize, p.PatchSize)
	case p.Dim%p.Heads != 0:
		return fmt.Errorf("synth: projector dim %d is not a multiple of heads %d", p.Dim, p.Heads)
	case p.Type == "mlp" && p.Layers < 2:
		return fmt.Errorf("synth: an mlp projector runs all layers but the last: it needs 2 or more")
	case p.Type == "mlp" && p.Dim == p.FF:
		return fmt.Errorf("synth: an mlp projector's ff must differ from its dim (its ffn_up and ffn_down are told apart by shape)")
	case p.qwen() && (p.Dim/p.Heads)%4 != 0:
		return fmt.Errorf("synth: a Qwen projector's head size %d must be a multiple of 4 (2D rotary positions)", p.Dim/p.Heads)
	case p.Type == "qwen2.5vl_merger" && (p.WindowPattern < 1 || p.WindowPattern > p.Layers):
		return fmt.Errorf("synth: Qwen2.5-VL needs a window pattern of 1 to %d layers, not %d", p.Layers, p.WindowPattern)
	case p.Type == "idefics3" && (p.ScaleFactor < 2 || g%p.ScaleFactor != 0):
		return fmt.Errorf("synth: idefics3 needs a scale factor above 1 that divides the %dx%d patch grid, not %d", g, g, p.ScaleFactor)
	}
	return nil
}

func (p Projector) hidden() int {
	if p.Hidden > 0 {
		return p.Hidden
	}
	return p.ProjDim
}

// tensors lists the projector's tensors in the converters' order. mlp's are the legacy LLaVA
// converter's: a class embedding, a convolution without bias, one more position than patches,
// a pre-norm, the feed-forward matrices under each other's names (fc1 as ffn_down; llama.cpp
// swaps them back by shape) and no post-norm; idefics3's are SigLIP's and the connector's
// matrix.
func (p Projector) tensors() []quantize.Tensor {
	d, P, n := uint64(p.Dim), uint64(p.PatchSize), uint64((p.ImageSize/p.PatchSize)*(p.ImageSize/p.PatchSize))
	ff := uint64(p.FF)
	var ts []quantize.Tensor
	add := func(name string, shape ...uint64) {
		ts = append(ts, quantize.Tensor{Name: name, Shape: shape, Type: gguf.TypeF32})
	}
	if p.qwen() {
		return p.qwenTensors()
	}
	mlp := p.Type == "mlp"
	if mlp {
		add("v.class_embd", d)
		n++
	}
	add("v.patch_embd.weight", P, P, 3, d)
	if !mlp {
		add("v.patch_embd.bias", d)
	}
	add("v.position_embd.weight", d, n)
	if mlp {
		add("v.pre_ln.weight", d)
		add("v.pre_ln.bias", d)
	}
	up, down := "ffn_up", "ffn_down"
	if mlp {
		up, down = down, up
	}
	for i := range p.Layers {
		b := fmt.Sprintf("v.blk.%d.", i)
		for _, x := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			add(b+x+".weight", d, d)
			add(b+x+".bias", d)
		}
		add(b+"ln1.weight", d)
		add(b+"ln1.bias", d)
		add(b+up+".weight", d, ff)
		add(b+up+".bias", ff)
		add(b+down+".weight", ff, d)
		add(b+down+".bias", d)
		add(b+"ln2.weight", d)
		add(b+"ln2.bias", d)
	}
	switch p.Type {
	case "mlp":
		h := uint64(p.hidden())
		add("mm.0.weight", d, h)
		add("mm.0.bias", h)
		add("mm.2.weight", h, uint64(p.ProjDim))
		add("mm.2.bias", uint64(p.ProjDim))
	case "idefics3":
		add("v.post_ln.weight", d)
		add("v.post_ln.bias", d)
		s := uint64(p.ScaleFactor)
		add("mm.model.fc.weight", d*s*s, uint64(p.ProjDim))
	}
	return ts
}

// qwenTensors are Qwen2-VL's (llama.cpp's converter's names): the 3D convolution's two frames'
// kernels, no position embeddings, LayerNorms (Qwen2.5-VL: RMS norms, without biases, and a
// gate), and the merger's two matrices over 2 x 2 patches.
func (p Projector) qwenTensors() []quantize.Tensor {
	d, P, ff := uint64(p.Dim), uint64(p.PatchSize), uint64(p.FF)
	var ts []quantize.Tensor
	add := func(name string, shape ...uint64) {
		ts = append(ts, quantize.Tensor{Name: name, Shape: shape, Type: gguf.TypeF32})
	}
	rms := p.Type == "qwen2.5vl_merger"
	norm := func(name string) {
		add(name+".weight", d)
		if !rms {
			add(name+".bias", d)
		}
	}
	add("v.patch_embd.weight", P, P, 3, d)
	add("v.patch_embd.weight.1", P, P, 3, d)
	for i := range p.Layers {
		b := fmt.Sprintf("v.blk.%d.", i)
		for _, x := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			add(b+x+".weight", d, d)
			add(b+x+".bias", d)
		}
		norm(b + "ln1")
		if rms {
			add(b+"ffn_gate.weight", d, ff)
			add(b+"ffn_gate.bias", ff)
		}
		add(b+"ffn_up.weight", d, ff)
		add(b+"ffn_up.bias", ff)
		add(b+"ffn_down.weight", ff, d)
		add(b+"ffn_down.bias", d)
		norm(b + "ln2")
	}
	norm("v.post_ln")
	add("mm.0.weight", 4*d, 4*d)
	add("mm.0.bias", 4*d)
	add("mm.2.weight", 4*d, uint64(p.ProjDim))
	add("mm.2.bias", uint64(p.ProjDim))
	return ts
}

// kvs is the projector's metadata. mlp and Qwen have CLIP's mean and std and quick GELU (no
// clip.use_gelu; Qwen2.5-VL clip.use_silu); idefics3 SigLIP's 0.5s and GELU.
func (p Projector) kvs() []gguf.KV {
	u32 := func(k string, v int) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeUint32, Value: uint32(v)} }
	f32 := func(k string, v float32) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeFloat32, Value: v} }
	str := func(k, v string) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeString, Value: v} }
	boolean := func(k string, v bool) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeBool, Value: v} }
	f32s := func(k string, v ...float32) gguf.KV {
		return gguf.KV{Key: k, Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeFloat32, Values: v}}
	}
	kvs := []gguf.KV{
		str("general.architecture", "clip"),
		str("general.type", "mmproj"),
		str("general.name", "synth-"+p.Type),
		u32("general.alignment", gguf.DefaultAlignment),
		u32("general.file_type", 0),
		str("clip.projector_type", p.Type),
		boolean("clip.has_vision_encoder", true),
		u32("clip.vision.projection_dim", p.ProjDim),
		u32("clip.vision.image_size", p.ImageSize),
		u32("clip.vision.patch_size", p.PatchSize),
		u32("clip.vision.embedding_length", p.Dim),
		u32("clip.vision.feed_forward_length", p.FF),
		u32("clip.vision.block_count", p.Layers),
		u32("clip.vision.attention.head_count", p.Heads),
	}
	switch p.Type {
	case "mlp":
		return append(kvs,
			f32s("clip.vision.image_mean", 0.48145466, 0.4578275, 0.40821073),
			f32s("clip.vision.image_std", 0.26862954, 0.26130258, 0.27577711),
			f32("clip.vision.attention.layer_norm_epsilon", 1e-5))
	case "qwen2vl_merger", "qwen2.5vl_merger":
		kvs = append(kvs,
			f32s("clip.vision.image_mean", 0.48145466, 0.4578275, 0.40821073),
			f32s("clip.vision.image_std", 0.26862954, 0.26130258, 0.27577711),
			f32("clip.vision.attention.layer_norm_epsilon", 1e-6),
			u32("clip.vision.spatial_merge_size", 2))
		if p.Type == "qwen2.5vl_merger" {
			kvs = append(kvs, boolean("clip.use_silu", true), u32("clip.vision.n_wa_pattern", p.WindowPattern))
		}
		return kvs
	default:
		kvs = append(kvs,
			f32s("clip.vision.image_mean", 0.5, 0.5, 0.5),
			f32s("clip.vision.image_std", 0.5, 0.5, 0.5),
			f32("clip.vision.attention.layer_norm_epsilon", 1e-6),
			boolean("clip.use_gelu", true),
			u32("clip.vision.projector.scale_factor", p.ScaleFactor))
		if p.LongestEdge > 0 {
			kvs = append(kvs, u32("clip.vision.preproc_image_size", p.LongestEdge))
		}
		return kvs
	}
}

// WriteProjector writes the projector to w as GGUF (F32). Matrices are normal(0,
// 1/sqrt(columns)), so activations keep their scale through the layers and an image's pixels
// reach its embeddings; norm weights 1 + normal(0, 0.1); biases, the class and position
// embeddings normal(0, 0.1); all rounded to float16.
func WriteProjector(w io.Writer, p Projector) error {
	if err := p.Validate(); err != nil {
		return err
	}
	kvs, srcs := p.sources()
	return gguf.WriteStream(w, kvs, srcs)
}

// sources are the projector's metadata and tensor generators.
func (p Projector) sources() ([]gguf.KV, []gguf.TensorSource) {
	ts := p.tensors()
	srcs := make([]gguf.TensorSource, len(ts))
	for i, t := range ts {
		srcs[i] = gguf.TensorSource{Name: t.Name, Shape: t.Shape, Type: gguf.TypeF32, Write: func(w io.Writer) error {
			rowLen, elems := t.Shape[0], uint64(1)
			for _, d := range t.Shape {
				elems *= d
			}
			return quantize.Rows(w, gguf.TypeF32, rowLen, elems/rowLen, projectorFill(p.Seed, i, rowLen, t.Name, len(t.Shape)))
		}}
	}
	return p.kvs(), srcs
}

// WriteProjectorFile writes the projector to path, through a temporary file renamed into place.
func WriteProjectorFile(path string, p Projector) error {
	if err := p.Validate(); err != nil {
		return err
	}
	kvs, srcs := p.sources()
	return gguf.WriteFileStream(path, kvs, srcs)
}

// projectorFill returns the row generator of a projector tensor (see WriteProjector).
func projectorFill(seed uint64, index int, rowLen uint64, name string, dims int) func([]float32, uint64) error {
	mean, scale := 0.0, 0.1
	switch {
	case strings.Contains(name, "ln") && strings.HasSuffix(name, ".weight"):
		mean = 1
	case strings.HasSuffix(name, ".weight") && name != "v.position_embd.weight":
		fanIn := float64(rowLen)
		if dims == 4 { // the convolution: P x P x 3 inputs
			fanIn *= float64(rowLen) * 3
		}
		scale = 1 / math.Sqrt(fanIn)
	}
	return fill(seed, index, rowLen, mean, scale)
}
