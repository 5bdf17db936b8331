package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// Images in chat requests, as llama-server takes them with a projector (--mmproj): each
// image_url part becomes the server's media marker in the rendered prompt; the prompt is
// tokenized piece by piece around the markers and each marker replaced by its image's
// placeholder tokens, laid out as the projector's (vision.Hparams.Layout: gemma3's
// <start_of_image> and <end_of_image> around them, idefics3's tiles with their row and column
// tokens), as llama.cpp's mtmd_tokenize does.

// VisionBackend is a Backend that takes images: the engine with a projector.
type VisionBackend interface {
	// Vision returns the projector's hyperparameters, and false without one.
	Vision() (vision.Hparams, bool)
	// EncodeImage returns an image's placeholder tokens (engine.EncodeImage).
	EncodeImage(ctx context.Context, hash [32]byte, prepare func() (vision.Prepared, error)) (engine.MediaImage, error)
}

// visionOf returns the backend's vision side and its hyperparameters, or nil without one.
func (l *loaded) visionOf() (VisionBackend, vision.Hparams) {
	vb, ok := l.backend.(VisionBackend)
	if !ok {
		return nil, vision.Hparams{}
	}
	h, ok := vb.Vision()
	if !ok {
		return nil, vision.Hparams{}
	}
	return vb, h
}

// imageURLs lists the image parts of a conversation's messages, in order.
func imageURLs(msgs []gen.ChatMessage) []string {
	var out []string
	for _, m := range msgs {
		c, ok := m.Content.Get()
		if !ok {
			continue
		}
		for _, p := range c.ChatContentPartArray {
			if p.Type == "image_url" {
				u, _ := p.ImageURL.Get()
				out = append(out, u.URL)
			}
		}
	}
	return out
}

// encodeImages reads, decodes, preprocesses and encodes images (by URL) in order.
func (s *Server) encodeImages(ctx context.Context, l *loaded, urls []string) ([]engine.MediaImage, error) {
	if len(urls) == 0 {
		return nil, nil
	}
	vb, h := l.visionOf()
	if vb == nil {
		return nil, errNoVision
	}
	out := make([]engine.MediaImage, len(urls))
	for i, u := range urls {
		data, err := s.imageBytes(ctx, u)
		if err != nil { // every way of reading the URL fails on the request's account
			return nil, invalidRequest("image %d: %v", i+1, err)
		}
		if out[i], err = encodeImage(ctx, vb, h, data); err != nil {
			return nil, imageError(err, "image %d", i+1)
		}
	}
	return out, nil
}

// encodeImage encodes an image file, decoding and preprocessing it only when the engine does
// not hold it already (a conversation sends its images again every turn); a file that is not
// an image is an error of kind badImage.
func encodeImage(ctx context.Context, vb VisionBackend, h vision.Hparams, data []byte) (engine.MediaImage, error) {
	return vb.EncodeImage(ctx, sha256.Sum256(data), func() (vision.Prepared, error) {
		img, err := vision.Decode(data)
		if err != nil {
			return vision.Prepared{}, badImage{err}
		}
		return vision.Prepare(img, h), nil
	})
}

// badImage is an image the request got wrong (unreadable, undecodable): a 400.
type badImage struct{ error }

// imageError is a failure to take an image: the request's fault (400, its message after the
// image's place) or the engine's, passed on.
func imageError(err error, where string, args ...any) error {
	var bad badImage
	if errors.As(err, &bad) {
		return invalidRequest("%s: %v", fmt.Sprintf(where, args...), bad.error)
	}
	return err
}

// base64Image decodes a base64 image payload, refusing one over the image size limit before
// decoding it.
func base64Image(payload string) ([]byte, error) {
	if base64.StdEncoding.DecodedLen(len(payload)) > vision.MaxBytes {
		return nil, badImage{fmt.Errorf("over the %d-byte image limit", vision.MaxBytes)}
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return nil, badImage{fmt.Errorf("invalid base64: %v", err)}
	}
	return data, nil
}

// imageBytes reads an image URL: a base64 data: URI of an image type, a file:// URL inside
// Config.MediaPath, or with Config.MediaFetch an http(s) URL (reaching other hosts is off by
// default).
func (s *Server) imageBytes(ctx context.Context, raw string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(raw, "data:"); ok {
		meta, payload, ok := strings.Cut(rest, ",")
		if !ok {
			return nil, errors.New("a data: URI without a comma")
		}
		mime, _, _ := strings.Cut(meta, ";")
		if !strings.HasPrefix(mime, "image/") {
			return nil, fmt.Errorf("a data: URI of type %q, not an image", mime)
		}
		if !strings.HasSuffix(meta, ";base64") {
			return nil, errors.New("a data: URI that is not base64")
		}
		return base64Image(payload)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return nil, errors.New("image_url.url must be a data: URI (data:image/png;base64,...)")
	}
	switch {
	case u.Scheme == "file":
		return s.mediaFile(u.Path)
	case (u.Scheme == "http" || u.Scheme == "https") && s.cfg.MediaFetch:
		return s.fetchMedia(ctx, u.String())
	case u.Scheme == "http" || u.Scheme == "https":
		return nil, fmt.Errorf("%s URLs are not fetched (start the server with --media-fetch to allow it): send the image as a data: URI", u.Scheme)
	}
	return nil, fmt.Errorf("%s URLs are not supported: send the image as a data: URI", u.Scheme)
}

// Limits of a fetched image, as llama-server's.
const (
	fetchMaxBytes = 10 << 20
	fetchTimeout  = 10 * time.Second
)

// fetchMedia downloads an image URL (--media-fetch).
func (s *Server) fetchMedia(ctx context.Context, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "wgpu-llama/"+s.cfg.SystemFingerprint)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("downloading %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("downloading %s: HTTP %d", u, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, fetchMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("downloading %s: %v", u, err)
	}
	if len(data) > fetchMaxBytes {
		return nil, fmt.Errorf("downloading %s: over the %d-byte limit", u, fetchMaxBytes)
	}
	return data, nil
}

// mediaFile reads a file:// image inside Config.MediaPath, refusing paths that leave it
// (.., links pointing out).
func (s *Server) mediaFile(path string) ([]byte, error) {
	if s.cfg.MediaPath == "" {
		return nil, errors.New("file:// URLs need the server started with --media-path DIR")
	}
	root, err := filepath.EvalSymlinks(s.cfg.MediaPath)
	if err != nil {
		return nil, errors.New("the --media-path directory is not readable")
	}
	full, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(path, "/"))))
	if err != nil {
		return nil, fmt.Errorf("file %s not found in --media-path", path)
	}
	if rel, err := filepath.Rel(root, full); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("file %s is outside --media-path", path)
	}
	st, err := os.Stat(full)
	if err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("file %s is not a regular file", path)
	}
	if st.Size() > vision.MaxBytes {
		return nil, fmt.Errorf("file %s is over the %d-byte image limit", path, vision.MaxBytes)
	}
	return os.ReadFile(full)
}

// errTokenizePrompt is llama-server's answer to a prompt whose media markers and images do not
// match in number.
func errTokenizePrompt(markers, images int) *apiError {
	return invalidRequest("Failed to tokenize prompt: %d media markers in the text for %d images (the marker is /props media_marker)", markers, images)
}

// mediaTokens tokenizes a prompt holding media markers: each piece between markers separately
// (special tokens parsed, BOS only on the first), each marker replaced by its image's
// placeholders in the projector's layout.
func (l *loaded) mediaTokens(text, marker string, media []engine.MediaImage) ([]int32, error) {
	pieces := strings.Split(text, marker)
	if len(pieces)-1 != len(media) {
		return nil, errTokenizePrompt(len(pieces)-1, len(media))
	}
	out := tokenize(l.tok, pieces[0])
	if len(media) == 0 {
		return out, nil
	}
	_, h := l.visionOf()
	for i, img := range media {
		for _, p := range h.Layout(img.Cols, img.Rows) {
			switch {
			case p.Input >= 0:
				out = append(out, img.Chunks[p.Input].Tokens()...)
			case p.Lookup:
				out = append(out, l.lookupToken(p.Text)...)
			default:
				out = append(out, l.tok.Encode(p.Text, false, true)...)
			}
		}
		out = append(out, l.tok.Encode(pieces[i+1], false, true)...)
	}
	return out, nil
}

// lookupToken is llama.cpp's mtmd lookup_token: the vocabulary's token whose piece is exactly
// text; where there is none (a vocabulary without the projector's tokens) the text
// tokenized.
func (l *loaded) lookupToken(text string) []int32 {
	if v, ok := l.lookups.Load(text); ok {
		return v.([]int32)
	}
	ids := l.tok.Encode(text, false, true)
	for id := range int32(l.tok.NVocab()) {
		if string(l.tok.Piece(id, true)) == text {
			ids = []int32{id}
			break
		}
	}
	l.lookups.Store(text, ids)
	return ids
}

// mediaPrompts tokenizes the prompt objects of /completion and /embeddings for a model that
// takes images.
type mediaPrompts struct {
	ctx context.Context
	l   *loaded
}

// mediaPrompts returns the media tokenizer of a request, nil when the model takes no images.
func (l *loaded) mediaPrompts(ctx context.Context) *mediaPrompts {
	if l.imageMarker == "" {
		return nil
	}
	return &mediaPrompts{ctx: ctx, l: l}
}

// tokens tokenizes {"prompt_string", "multimodal_data": [base64, ...]}: the images, in order,
// stand at the media markers of the prompt string (the server's marker, /props media_marker).
func (mp *mediaPrompts) tokens(field string, o gen.PromptObject) ([]int32, error) {
	text, ok := o.PromptString.GetString()
	if !ok {
		if len(o.MultimodalData) > 0 {
			return nil, invalidRequest("'%s.prompt_string' must be a string when multimodal_data is given", field)
		}
		return mixedTokens(mp.l.tok, field+".prompt_string", o.PromptString.PromptPieceArray, true, true)
	}
	vb, h := mp.l.visionOf()
	media := make([]engine.MediaImage, len(o.MultimodalData))
	for i, b64 := range o.MultimodalData {
		data, err := base64Image(b64)
		if err == nil {
			media[i], err = encodeImage(mp.ctx, vb, h, data)
		}
		if err != nil {
			return nil, imageError(err, "'%s.multimodal_data[%d]'", field, i)
		}
	}
	return mp.l.mediaTokens(text, mp.l.imageMarker, media)
}
