// Package vision is image input: the hyperparameters of a multimodal projector (an mmproj
// GGUF, llama.cpp's "clip" architecture), decoding image files, preprocessing them into the
// pixels a vision encoder takes, and an image's place in a prompt, exactly as llama.cpp's
// tools/mtmd does.
package vision

import (
	"fmt"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// Projector types (clip.projector_type) this package reads.
const (
	// ProjectorGemma3 is Gemma 3's: a SigLIP ViT, 2D average pooling, a soft-embedding RMS
	// norm and one projection; its images are decoded both ways.
	ProjectorGemma3 = "gemma3"
	// ProjectorMLP is LLaVA's: a CLIP ViT (class token, pre-norm) run to its last layer but
	// one, and a two-layer GELU MLP.
	ProjectorMLP = "mlp"
	// ProjectorIdefics3 is SmolVLM's: a SigLIP ViT, a pixel shuffle and one projection, with
	// an image cut into tiles plus an overview.
	ProjectorIdefics3 = "idefics3"
	// ProjectorQwen2VL is Qwen2-VL's: a ViT of any input size with 2D rotary positions, and a
	// merger of 2 x 2 patches through a two-layer GELU MLP; its text model turns by M-RoPE.
	ProjectorQwen2VL = "qwen2vl_merger"
	// ProjectorQwen25VL is Qwen2.5-VL's: Qwen2-VL's with RMS norms, a SiLU-gated
	// feed-forward and attention within windows but in every WindowPattern-th layer.
	ProjectorQwen25VL = "qwen2.5vl_merger"
)

// Projectors lists the supported projector types.
var Projectors = []string{ProjectorGemma3, ProjectorMLP, ProjectorIdefics3, ProjectorQwen2VL, ProjectorQwen25VL}

// Act is a vision FFN's activation.
type Act int

const (
	// ActGELU is ggml's tanh-approximated GELU (clip.use_gelu).
	ActGELU Act = iota
	// ActGELUQuick is x * sigmoid(1.702 x), llama.cpp's default (CLIP's quick_gelu).
	ActGELUQuick
	// ActSiLU is a SiLU-gated feed-forward (clip.use_silu; Qwen2.5-VL's ffn_gate).
	ActSiLU
)

// Hparams are a projector file's vision hyperparameters.
type Hparams struct {
	Projector string // clip.projector_type
	// ImageSize is the square input the encoder takes; PatchSize its patches' side.
	ImageSize, PatchSize int
	// NEmbd, NFF, NLayer and NHead shape the encoder's transformer.
	NEmbd, NFF, NLayer, NHead int
	Eps                       float32
	// Act is the FFN's activation.
	Act Act
	// ProjDim is the width of the projected embeddings: the text model's n_embd.
	ProjDim int
	// Mean and Std normalise each channel of a pixel in [0, 1].
	Mean, Std [3]float32
	// ScaleFactor is gemma3's pooling kernel (and stride) over the patch grid, and idefics3's
	// pixel shuffle: ScaleFactor x ScaleFactor patches become one token.
	ScaleFactor int
	// LongestEdge is idefics3's clip.vision.preproc_image_size: an image is scaled (keeping its
	// aspect) to fit it, then cut into ImageSize tiles; 0 means no tiles, the overview only.
	LongestEdge int
	// Merge is Qwen's spatial_merge_size: Merge x Merge patches become one token.
	Merge int
	// WindowPattern is Qwen2.5-VL's n_wa_pattern: layer il attends over the whole image when
	// (il+1) % WindowPattern == 0, within windows of WindowTokens x WindowTokens tokens
	// otherwise; 0: always the whole image.
	WindowPattern int
	// ImageMinTokens and ImageMaxTokens bound the tokens of a variable-size image (Qwen;
	// llama.cpp's 8 and 4096, --image-min-tokens and --image-max-tokens); 0 for fixed-size
	// projectors.
	ImageMinTokens, ImageMaxTokens int
	// RMSNorm: the ViT's norms are RMS norms (Qwen2.5-VL), not LayerNorms.
	RMSNorm bool
}

// WindowTokens is Qwen2.5-VL's window side in tokens: llama.cpp's 112 pixels over merged
// patches.
func (h Hparams) WindowTokens() int { return max(1, 112/(h.PatchSize*h.Merge)) }

// Qwen reports whether the projector is Qwen2-VL's or Qwen2.5-VL's: inputs of any size,
// 2D rotary positions, M-RoPE in the text model.
func (h Hparams) Qwen() bool {
	return h.Projector == ProjectorQwen2VL || h.Projector == ProjectorQwen25VL
}

// ReadHparams reads a projector's hyperparameters, refusing files that are not a vision
// projector of a supported type or whose sizes do not fit together.
func ReadHparams(f *gguf.File) (Hparams, error) {
	if a := f.Architecture(); a != "clip" {
		return Hparams{}, fmt.Errorf("vision: general.architecture is %q, not clip: not a multimodal projector", a)
	}
	if v, ok := f.Bool("clip.has_vision_encoder"); ok && !v {
		return Hparams{}, fmt.Errorf("vision: the projector has no vision encoder")
	}
	var h Hparams
	h.Projector, _ = f.String("clip.projector_type")
	switch h.Projector {
	case ProjectorGemma3:
		h.ScaleFactor = 4 // llama.cpp's default, real Gemma 3's value
	case ProjectorMLP, ProjectorIdefics3:
	case "qwen2.5o": // llama.cpp reads Qwen2.5-Omni's vision side as Qwen2.5-VL's
		h.Projector = ProjectorQwen25VL
	case ProjectorQwen2VL, ProjectorQwen25VL:
	default:
		return Hparams{}, fmt.Errorf("vision: projector type %q is not supported (supported: %s)", h.Projector, strings.Join(Projectors, ", "))
	}
	ints := []struct {
		key string
		p   *int
	}{
		{"clip.vision.image_size", &h.ImageSize}, {"clip.vision.patch_size", &h.PatchSize},
		{"clip.vision.embedding_length", &h.NEmbd}, {"clip.vision.feed_forward_length", &h.NFF},
		{"clip.vision.block_count", &h.NLayer}, {"clip.vision.attention.head_count", &h.NHead},
		{"clip.vision.projection_dim", &h.ProjDim},
	}
	for _, k := range ints {
		v, ok := f.Uint(k.key)
		if !ok || v == 0 || v > 1<<16 {
			return Hparams{}, fmt.Errorf("vision: %s missing or out of range", k.key)
		}
		*k.p = int(v)
	}
	if v, ok := f.Uint("clip.vision.projector.scale_factor"); ok {
		h.ScaleFactor = int(v)
	}
	if v, ok := f.Uint("clip.vision.preproc_image_size"); ok && h.Projector == ProjectorIdefics3 {
		if v > 1<<14 {
			return Hparams{}, fmt.Errorf("vision: clip.vision.preproc_image_size %d out of range", v)
		}
		h.LongestEdge = int(v)
	}
	eps, ok := f.Float("clip.vision.attention.layer_norm_epsilon")
	if !ok {
		return Hparams{}, fmt.Errorf("vision: clip.vision.attention.layer_norm_epsilon missing")
	}
	h.Eps = float32(eps)
	// llama.cpp: GELU with clip.use_gelu, quick GELU without (clip.use_silu is Qwen's)
	h.Act = ActGELUQuick
	if v, _ := f.Bool("clip.use_gelu"); v {
		h.Act = ActGELU
	}
	if v, _ := f.Bool("clip.use_silu"); v {
		if h.Act == ActGELU {
			return Hparams{}, fmt.Errorf("vision: clip.use_gelu and clip.use_silu are both set")
		}
		if h.Projector != ProjectorQwen25VL {
			return Hparams{}, fmt.Errorf("vision: clip.use_silu: a SiLU feed-forward is not supported for projector %q", h.Projector)
		}
		h.Act = ActSiLU
	}
	for _, c := range []struct {
		key string
		out *[3]float32
	}{{"clip.vision.image_mean", &h.Mean}, {"clip.vision.image_std", &h.Std}} {
		v, ok := f.Float32s(c.key)
		if !ok || len(v) != 3 {
			return Hparams{}, fmt.Errorf("vision: %s must hold 3 values", c.key)
		}
		copy(c.out[:], v)
	}
	if err := h.projectorSpecific(f); err != nil {
		return Hparams{}, err
	}
	grid := h.ImageSize / h.PatchSize
	switch {
	case h.Qwen():
		if h.NEmbd/h.NHead%4 != 0 {
			return Hparams{}, fmt.Errorf("vision: head size %d is not a multiple of 4 (2D rotary positions)", h.NEmbd/h.NHead)
		}
	case h.ImageSize%h.PatchSize != 0:
		return Hparams{}, fmt.Errorf("vision: image_size %d is not a multiple of patch_size %d", h.ImageSize, h.PatchSize)
	case h.Projector != ProjectorMLP && (h.ScaleFactor < 1 || grid%h.ScaleFactor != 0):
		return Hparams{}, fmt.Errorf("vision: the %dx%d patch grid does not pool by scale_factor %d", grid, grid, h.ScaleFactor)
	case h.NEmbd%h.NHead != 0:
		return Hparams{}, fmt.Errorf("vision: embedding_length %d is not a multiple of head_count %d", h.NEmbd, h.NHead)
	}
	for i := range 3 {
		if h.Std[i] == 0 {
			return Hparams{}, fmt.Errorf("vision: clip.vision.image_std has a zero")
		}
	}
	return h, nil
}

// projectorSpecific checks what only one projector type has. An mlp projector's output width
// is its last matrix's (clip.vision.projection_dim is not used); the variants llama.cpp reads
// as other types or through other graphs (mm.3: MLP_NORM; grid pinpoints: LLaVA-1.6's tiles;
// feature layers: Granite's concatenation) are refused by name.
func (h *Hparams) projectorSpecific(f *gguf.File) error {
	var err error
	switch h.Projector {
	case ProjectorMLP:
		if _, ok := f.Tensor("mm.3.weight"); ok {
			return fmt.Errorf("vision: an mlp projector with mm.3 (llama.cpp's mlp_norm) is not supported")
		}
		for _, k := range []string{"clip.vision.image_grid_pinpoints", "clip.vision.feature_layer"} {
			if _, ok := f.Lookup(k); ok {
				return fmt.Errorf("vision: %s (LLaVA-1.6 tiles, Granite feature layers) is not supported", k)
			}
		}
		if h.ProjDim, err = outputWidth(f, "an mlp projector", "mm.2.weight"); err != nil {
			return err
		}
		if h.NLayer < 2 {
			return fmt.Errorf("vision: an mlp projector runs block_count-1 layers: block_count %d is too few", h.NLayer)
		}
	case ProjectorQwen2VL, ProjectorQwen25VL:
		h.Merge, h.ImageMinTokens, h.ImageMaxTokens = 2, 8, 4096
		if v, ok := f.Uint("clip.vision.spatial_merge_size"); ok {
			h.Merge = int(v)
		}
		if h.Merge != 2 {
			return fmt.Errorf("vision: spatial_merge_size %d is not supported (llama.cpp's Qwen graph merges 2 x 2)", h.Merge)
		}
		if v, ok := f.Uint("clip.vision.n_wa_pattern"); ok {
			h.WindowPattern = int(v)
		} else if h.Projector == ProjectorQwen25VL {
			return fmt.Errorf("vision: clip.vision.n_wa_pattern missing (Qwen2.5-VL's window attention)")
		}
		if h.WindowPattern > h.NLayer {
			return fmt.Errorf("vision: n_wa_pattern %d is over the %d layers", h.WindowPattern, h.NLayer)
		}
		h.RMSNorm = h.Projector == ProjectorQwen25VL
		if _, ok := f.Tensor("v.patch_embd.bias"); ok {
			return fmt.Errorf("vision: a Qwen projector's patch embedding has no bias")
		}
		if h.ProjDim, err = outputWidth(f, "a Qwen projector", "mm.2.weight"); err != nil {
			return err
		}
	case ProjectorIdefics3:
		if h.ScaleFactor < 2 {
			return fmt.Errorf("vision: idefics3 needs clip.vision.projector.scale_factor above 1, not %d", h.ScaleFactor)
		}
		if h.ProjDim, err = outputWidth(f, "an idefics3 projector", "mm.model.fc.weight"); err != nil {
			return err
		}
	}
	return nil
}

// outputWidth is the width of the embeddings a projector's last matrix (named name) makes:
// its rows (clip.vision.projection_dim is not what llama.cpp uses for these projectors).
func outputWidth(f *gguf.File, kind, name string) (int, error) {
	t, ok := f.Tensor(name)
	if !ok || len(t.Shape) != 2 || t.Shape[1] == 0 || t.Shape[1] > 1<<16 {
		return 0, fmt.Errorf("vision: %s needs a 2-D %s", kind, name)
	}
	return int(t.Shape[1]), nil
}

// Patches is the number of patches an ImageSize x ImageSize input is cut into.
func (h Hparams) Patches() int { g := h.ImageSize / h.PatchSize; return g * g }

// Layers is the number of ViT blocks the encoder runs: LLaVA's stops one short of the file's,
// as llama.cpp does (its features are the last layer but one's).
func (h Hparams) Layers() int {
	if h.Projector == ProjectorMLP {
		return h.NLayer - 1
	}
	return h.NLayer
}

// Grid is the token grid an encoder input becomes: its embeddings are gw x gh, row by row.
func (h Hparams) Grid(in Input) (gw, gh int) {
	if h.Qwen() {
		return in.W / (h.PatchSize * h.Merge), in.H / (h.PatchSize * h.Merge)
	}
	g := h.ImageSize / h.PatchSize
	if h.Projector == ProjectorMLP {
		return g, g
	}
	return g / h.ScaleFactor, g / h.ScaleFactor
}

// MaxTokens is the most embeddings one encoder input becomes.
func (h Hparams) MaxTokens() int {
	if h.Qwen() {
		return h.ImageMaxTokens
	}
	return h.Tokens()
}

// Tokens is the number of embeddings (text positions) an ImageSize x ImageSize input becomes.
func (h Hparams) Tokens() int {
	switch {
	case h.Projector == ProjectorMLP:
		return h.Patches()
	case h.Qwen():
		return h.Patches() / (h.Merge * h.Merge)
	}
	return h.Patches() / (h.ScaleFactor * h.ScaleFactor)
}
