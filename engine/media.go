package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// Images in prompts. The vision encoder (Config.MMProjPath) turns an image into embeddings on
// the engine goroutine (EncodeImage); the image then stands in a prompt as a run of placeholder
// tokens (a MediaChunk) at or above model.MediaToken, allocated once per distinct image: the
// same image (by content hash) gets the same tokens, so prefix reuse works as for text, and a
// different image never shares them, so their cache rows are never confused. A batch takes an
// image's embeddings for its placeholders and decodes its rows in one pass, seeing one another
// both ways (model.Batch.AttnEnds).

// mediaKeep and mediaKeepBytes bound the images' embeddings the engine keeps (a real Gemma 3
// image is 256 x 2560 floats, 2.6 MB), the least recently used going first; a prompt whose
// image was dropped before it ran fails, asking for it again.
const (
	mediaKeep      = 256
	mediaKeepBytes = 256 << 20
)

// ErrNoVision is the error of image input to a server without a projector (--mmproj).
var ErrNoVision = errors.New("image input is not supported - hint: if this is unexpected, you may need to provide the mmproj")

// MediaChunk is an image's place in a prompt: N placeholder tokens from Base on.
type MediaChunk struct {
	Base int32
	N    int
}

// Tokens are the chunk's placeholder tokens, in order.
func (c MediaChunk) Tokens() []int32 {
	out := make([]int32, c.N)
	for i := range out {
		out[i] = c.Base + int32(i)
	}
	return out
}

// MediaImage is an image's place in prompts: the chunks of its encoder inputs in the
// projector's order (vision.Prepared: a tiled image's overview, then its tiles row by row)
// and its tile grid (0 x 0 for an image that is not tiled).
type MediaImage struct {
	Chunks     []MediaChunk
	Cols, Rows int
}

// mediaStore holds the embeddings of the images prompts hold, one entry per encoder input.
type mediaStore struct {
	mu      sync.Mutex
	next    int32 // the next free placeholder
	entries []*mediaEntry
	bytes   int // of the entries' embeddings
	clock   uint64
}

type mediaEntry struct {
	hash        [32]byte // the image file's
	part, parts int      // which of the image's inputs this is, of how many
	cols, rows  int      // the image's tile grid
	base        int32
	n           int
	gw, gh      int       // the input's token grid: n = gw x gh, row by row (M-RoPE positions)
	embd        []float32 // n rows of the text model's width
	used        uint64
}

// mediaPart is one encoded input: its embeddings, gw x gh rows of the text model's width.
type mediaPart struct {
	embd   []float32
	gw, gh int
}

// byHash returns an image already encoded, all its inputs held, marking it used.
func (st *mediaStore) byHash(h [32]byte) (MediaImage, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var img MediaImage
	found := 0
	for _, e := range st.entries {
		if e.hash != h {
			continue
		}
		if img.Chunks == nil {
			img = MediaImage{Chunks: make([]MediaChunk, e.parts), Cols: e.cols, Rows: e.rows}
		}
		img.Chunks[e.part] = MediaChunk{Base: e.base, N: e.n}
		found++
	}
	if found == 0 || found != len(img.Chunks) {
		return MediaImage{}, false
	}
	st.clock++
	for _, e := range st.entries {
		if e.hash == h {
			e.used = st.clock
		}
	}
	return img, true
}

// add keeps an image's encoded inputs under fresh placeholders, replacing what is left of an
// earlier encoding of it, and drops the least recently used other images' inputs beyond the
// store's bounds.
func (st *mediaStore) add(h [32]byte, parts []mediaPart, cols, rows int) (MediaImage, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.next == 0 {
		st.next = model.MediaToken
	}
	total := 0
	for _, p := range parts {
		total += p.gw * p.gh
	}
	if int64(st.next)+int64(total) > math.MaxInt32 {
		return MediaImage{}, fmt.Errorf("engine: image placeholders exhausted after %d images: restart the server", st.clock)
	}
	st.drop(func(e *mediaEntry) bool { return e.hash == h })
	st.clock++
	img := MediaImage{Cols: cols, Rows: rows}
	for i, p := range parts {
		n := p.gw * p.gh
		e := &mediaEntry{hash: h, part: i, parts: len(parts), cols: cols, rows: rows, base: st.next, n: n, gw: p.gw, gh: p.gh, embd: p.embd, used: st.clock}
		st.next += int32(n)
		st.entries = append(st.entries, e)
		st.bytes += 4 * len(p.embd)
		img.Chunks = append(img.Chunks, MediaChunk{Base: e.base, N: e.n})
	}
	for len(st.entries) > len(parts) && (len(st.entries) > mediaKeep || st.bytes > mediaKeepBytes) {
		var oldest *mediaEntry
		for _, x := range st.entries {
			if x.hash != h && (oldest == nil || x.used < oldest.used) {
				oldest = x
			}
		}
		// an image goes whole: a part alone is no use
		st.drop(func(e *mediaEntry) bool { return e.hash == oldest.hash })
	}
	return img, nil
}

// drop removes the entries gone says of.
func (st *mediaStore) drop(gone func(*mediaEntry) bool) {
	kept := st.entries[:0]
	for _, e := range st.entries {
		if gone(e) {
			st.bytes -= 4 * len(e.embd)
			continue
		}
		kept = append(kept, e)
	}
	clear(st.entries[len(kept):])
	st.entries = kept
}

// grid returns the image input placeholder id belongs to: its first placeholder and its token
// grid, and whether it is held.
func (st *mediaStore) grid(id int32) (base int32, gw, gh int, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, e := range st.entries {
		if id >= e.base && id < e.base+int32(e.n) {
			return e.base, e.gw, e.gh, true
		}
	}
	return 0, 0, 0, false
}

// row returns the embedding of placeholder id, the last position of its image relative to id,
// and whether the image is held.
func (st *mediaStore) row(id int32) (embd []float32, toEnd int32, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, e := range st.entries {
		if id >= e.base && id < e.base+int32(e.n) {
			w := len(e.embd) / e.n
			i := int(id - e.base)
			return e.embd[i*w : (i+1)*w], e.base + int32(e.n) - 1 - id, true
		}
	}
	return nil, 0, false
}

// loadVision loads the projector of Config.MMProjPath onto dev, checking that it fits the
// model: its embeddings as wide as the model's, M-RoPE in the model exactly for Qwen's, and a
// gemma3 image (decoded both ways) within one forward pass.
func loadVision(dev *gpu.Device, cfg Config, nEmbd, batch int, mrope bool) (*model.VisionEncoder, error) {
	path := cfg.MMProjPath
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mmproj: %w", err)
	}
	defer f.Close()
	enc, err := model.LoadVisionEncoder(dev, f)
	if err != nil {
		return nil, fmt.Errorf("mmproj %s: %w", path, err)
	}
	if enc.H.Qwen() { // --image-min-tokens, --image-max-tokens
		if cfg.ImageMinTokens > 0 {
			enc.H.ImageMinTokens = cfg.ImageMinTokens
		}
		if cfg.ImageMaxTokens > 0 {
			enc.H.ImageMaxTokens = cfg.ImageMaxTokens
		}
		enc.H.ImageMinTokens = min(enc.H.ImageMinTokens, enc.H.ImageMaxTokens)
	}
	h := enc.H
	switch {
	case h.ProjDim != nEmbd:
		enc.Close()
		return nil, fmt.Errorf("mmproj %s: its embeddings are %d wide, the model's %d: not this model's projector", path, h.ProjDim, nEmbd)
	case h.Qwen() != mrope:
		enc.Close()
		return nil, fmt.Errorf("mmproj %s: a %s projector needs a text model with M-RoPE (qwen2vl) and only it: not this model's projector", path, h.Projector)
	case h.Projector == vision.ProjectorGemma3 && h.Tokens() > batch:
		enc.Close()
		return nil, fmt.Errorf("mmproj %s: an image takes %d positions, more than the batch size %d (-ub): images are decoded in one pass", path, h.Tokens(), batch)
	}
	return enc, nil
}

// Vision returns the projector's hyperparameters, and false without one.
func (e *Engine) Vision() (vision.Hparams, bool) {
	if e.visionH == nil {
		return vision.Hparams{}, false
	}
	return *e.visionH, true
}

// EncodeImage returns the placeholder tokens of an image, named by the hash of its file. An
// image encoded before is not encoded again, nor is it prepared: prepare (its encoder inputs,
// vision.Prepare) runs on the caller's goroutine only for a new image, and its error is
// returned as it is.
func (e *Engine) EncodeImage(ctx context.Context, hash [32]byte, prepare func() (vision.Prepared, error)) (MediaImage, error) {
	if e.visionH == nil {
		return MediaImage{}, ErrNoVision
	}
	if img, ok := e.media.byHash(hash); ok {
		return img, nil
	}
	p, err := prepare()
	if err != nil {
		return MediaImage{}, err
	}
	var img MediaImage
	err = e.do(ctx, nil, func() error {
		if got, ok := e.media.byHash(hash); ok { // encoded while this waited
			img = got
			return nil
		}
		if err := e.wakeUp(); err != nil {
			return err
		}
		parts := make([]mediaPart, len(p.Inputs))
		for i, in := range p.Inputs {
			embd, err := e.vision.Encode(in)
			if err != nil {
				return err
			}
			gw, gh := e.visionH.Grid(in)
			parts[i] = mediaPart{embd: embd, gw: gw, gh: gh}
		}
		img, err = e.media.add(hash, parts, p.Cols, p.Rows)
		return err
	})
	return img, err
}

// mediaRows checks the placeholders of a prompt: each must name a held image, and an image
// must be whole and in order.
func (e *Engine) mediaRows(prompt []int32) error {
	for i := 0; i < len(prompt); i++ {
		id := prompt[i]
		if id < model.MediaToken {
			continue
		}
		_, toEnd, ok := e.media.row(id)
		if !ok {
			return fmt.Errorf("%w: token %d names no image the server holds (send the image again)", ErrBadMedia, id)
		}
		for k := int32(1); k <= toEnd; k++ {
			if i+int(k) >= len(prompt) || prompt[i+int(k)] != id+k {
				return fmt.Errorf("%w: an image's positions are cut at prompt position %d", ErrBadMedia, i+int(k))
			}
		}
		i += int(toEnd)
	}
	return nil
}

// ErrBadMedia is the error of a prompt whose image placeholders are not whole images.
var ErrBadMedia = errors.New("engine: invalid image tokens")

// cutMedia shortens a prompt chunk (a prefix of rest) so that it does not end inside an image
// when the projector's images are decoded both ways (gemma3's), whose rows must be in one
// pass; other images are decoded causally and may be split across passes, as llama.cpp
// decodes them in batches of -ub.
func (e *Engine) cutMedia(rest, chunk []int32) []int32 {
	if !e.bidirectionalImages() {
		return chunk
	}
	return cutMedia(rest, chunk)
}

// bidirectionalImages reports whether an image's rows see one another both ways, as llama.cpp's
// mtmd_decode_use_non_causal says of gemma3's.
func (e *Engine) bidirectionalImages() bool {
	return e.visionH != nil && e.visionH.Projector == vision.ProjectorGemma3
}

// cutMedia shortens a prompt chunk (a prefix of rest) so that it does not end inside an image.
func cutMedia(rest, chunk []int32) []int32 {
	n := len(chunk)
	for n > 0 && n < len(rest) && rest[n] >= model.MediaToken && rest[n-1] == rest[n]-1 {
		n--
	}
	return chunk[:n]
}

// attachMedia gives a batch the embeddings of its image rows and, for a projector whose images
// are decoded both ways (gemma3's, as llama.cpp's mtmd_decode_use_non_causal says), their
// attention ends; a batch without images is left as it is. It reports the first row whose
// image is not held.
func (e *Engine) attachMedia(b *model.Batch) (missing int, ok bool) {
	bidirectional := e.bidirectionalImages()
	for i, id := range b.Tokens {
		if id < model.MediaToken {
			continue
		}
		if b.Embeds == nil {
			b.Embeds = make([][]float32, len(b.Tokens))
			if bidirectional {
				b.AttnEnds = append([]int32(nil), b.Pos...)
			}
		}
		embd, toEnd, held := e.media.row(id)
		if !held {
			return i, false
		}
		b.Embeds[i] = embd
		if bidirectional {
			b.AttnEnds[i] = b.Pos[i] + toEnd
		}
	}
	return 0, true
}

// holdsImages reports whether a prompt holds image placeholders.
func holdsImages(prompt []int32) bool {
	for _, id := range prompt {
		if id >= model.MediaToken {
			return true
		}
	}
	return false
}
