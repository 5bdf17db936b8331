// Package vision is image input: the hyperparameters of a multimodal projector (an mmproj
// GGUF, llama.cpp's "clip" architecture), decoding image files, and preprocessing them into the
// pixels a vision encoder takes, exactly as llama.cpp's tools/mtmd does.
package vision

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// Projector types (clip.projector_type) this package reads.
const (
	ProjectorGemma3 = "gemma3" // SigLIP ViT, 2D average pool, soft-embedding RMS norm, one projection
)

// Hparams are a projector file's vision hyperparameters.
type Hparams struct {
	Projector string // clip.projector_type
	// ImageSize is the square input the encoder takes; PatchSize its patches' side.
	ImageSize, PatchSize int
	// NEmbd, NFF, NLayer and NHead shape the encoder's transformer.
	NEmbd, NFF, NLayer, NHead int
	Eps                       float32
	// ProjDim is the width of the projected embeddings: the text model's n_embd.
	ProjDim int
	// Mean and Std normalise each channel of a pixel in [0, 1].
	Mean, Std [3]float32
	// ScaleFactor is gemma3's pooling kernel (and stride) over the patch grid.
	ScaleFactor int
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
	h := Hparams{ScaleFactor: 4} // llama.cpp's default for gemma3, real Gemma 3's value
	h.Projector, _ = f.String("clip.projector_type")
	if h.Projector != ProjectorGemma3 {
		return Hparams{}, fmt.Errorf("vision: projector type %q is not supported (supported: %s)", h.Projector, ProjectorGemma3)
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
	eps, ok := f.Float("clip.vision.attention.layer_norm_epsilon")
	if !ok {
		return Hparams{}, fmt.Errorf("vision: clip.vision.attention.layer_norm_epsilon missing")
	}
	h.Eps = float32(eps)
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
	grid := h.ImageSize / h.PatchSize
	switch {
	case h.ImageSize%h.PatchSize != 0:
		return Hparams{}, fmt.Errorf("vision: image_size %d is not a multiple of patch_size %d", h.ImageSize, h.PatchSize)
	case h.ScaleFactor < 1 || grid%h.ScaleFactor != 0:
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

// Patches is the number of patches an image is cut into: the encoder's sequence length.
func (h Hparams) Patches() int { g := h.ImageSize / h.PatchSize; return g * g }

// Tokens is the number of embeddings (text positions) one image becomes.
func (h Hparams) Tokens() int { return h.Patches() / (h.ScaleFactor * h.ScaleFactor) }
