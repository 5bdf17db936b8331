package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
)

// pngOf is a w x h PNG whose pixels follow the seed.
func pngOf(t *testing.T, w, h int, seed uint8) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{R: uint8(x*7) + seed, G: uint8(y*13) ^ seed, B: uint8(x*y) + 3*seed, A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gen-model's tiny llama with an mlp (LLaVA) or idefics3 (SmolVLM) projector, and its tiny
// Qwen2-VL text model with a Qwen2-VL or Qwen2.5-VL projector, serve images in /completion
// and chat: the prompt holds the image's rows in the projector's layout (mlp's 25 alone;
// idefics3's four tiles and overview of 9 each with their row, column and global tokens;
// Qwen's 4 x 3 between <|vision_start|> and <|vision_end|>), the same image again reuses its
// cached rows, another image does not, and /props reports vision.
func TestVisionProjectorsServe(t *testing.T) {
	for _, typ := range synth.ProjectorTypes() {
		dir := t.TempDir()
		text, proj := filepath.Join(dir, "text.gguf"), filepath.Join(dir, "mmproj.gguf")
		cfg, err := synth.Preset("tiny")
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(typ, "qwen") {
			cfg.Arch = "qwen2vl"
		}
		if _, err := synth.WriteFile(text, cfg, nil); err != nil {
			t.Fatal(err)
		}
		if err := synth.WriteProjectorFile(proj, synth.TinyProjector(typ)); err != nil {
			t.Fatal(err)
		}
		e := enginetest.LoadConfig(t, engine.Config{ModelPath: text, MMProjPath: proj, CtxSize: 512})
		srv := New(Config{}, testLogger())
		srv.SetBackend(e)
		ts := httptest.NewServer(srv.Handler())
		defer ts.Close()
		defer srv.Close()

		h, _ := e.Vision()
		tok := e.Tokenizer()
		// a 50 x 30 image: mlp's 5 x 5 patches; idefics3's 2 x 2 tiles of 9 in a 72-pixel
		// edge and the overview; Qwen's 112 x 84 (scaled up to its 8-token minimum): 4 x 3
		inputs, cols, rows := []int{25}, 0, 0
		switch {
		case typ == "idefics3":
			inputs, cols, rows = []int{9, 9, 9, 9, 9}, 2, 2
		case h.Qwen():
			inputs = []int{12}
		}
		lookup := func(s string) int {
			for id := range int32(tok.NVocab()) {
				if string(tok.Piece(id, true)) == s {
					return 1
				}
			}
			return len(tok.Encode(s, false, true))
		}
		imageRows, before := 0, 1 // the image's positions, and the prompt's before its first row (BOS, ...)
		for _, p := range h.Layout(cols, rows) {
			n := 0
			switch {
			case p.Input >= 0:
				n = inputs[p.Input]
			case p.Lookup:
				n = lookup(p.Text)
			default:
				n = len(tok.Encode(p.Text, false, true))
			}
			if before == 1+imageRows && p.Input < 0 {
				before += n
			}
			imageRows += n
		}
		var props struct {
			Modalities map[string]bool `json:"modalities"`
			Marker     string          `json:"media_marker"`
		}
		_, body := get(t, ts.URL+"/props")
		if err := json.Unmarshal([]byte(body), &props); err != nil || !props.Modalities["vision"] || props.Marker == "" {
			t.Errorf("%s: /props modalities %v, marker %q, %v", typ, props.Modalities, props.Marker, err)
		}
		textOnly := len(tok.Encode("Describe", true, true))
		complete := func(img []byte) (evaluated, cached int) {
			body := fmt.Sprintf(`{"prompt":{"prompt_string":%q,"multimodal_data":[%q]},"n_predict":4,"temperature":0,"cache_prompt":true}`, props.Marker+"Describe", base64.StdEncoding.EncodeToString(img))
			status, b := postJSON(t, ts.URL+"/completion", []byte(body))
			var r struct {
				TokensEvaluated int `json:"tokens_evaluated"`
				Timings         struct {
					CacheN int `json:"cache_n"`
				} `json:"timings"`
			}
			if err := json.Unmarshal(b, &r); err != nil || status != 200 {
				t.Fatalf("%s: %d %s", typ, status, b)
			}
			return r.TokensEvaluated, r.Timings.CacheN
		}
		a, b := pngOf(t, 50, 30, 1), pngOf(t, 50, 30, 2)
		// <s> (BOS) then the image: Describe's own tokens lose their BOS
		want := textOnly + imageRows
		if n, _ := complete(a); n != want {
			t.Errorf("%s: %d prompt tokens, want %d (%d of the image)", typ, n, want, imageRows)
		}
		if n, cached := complete(a); n != want || cached < want-1 {
			t.Errorf("%s: the same image again: %d prompt tokens, %d cached", typ, n, cached)
		}
		if _, cached := complete(b); cached > before {
			t.Errorf("%s: another image reused %d cached rows, more than the %d before its rows", typ, cached, before)
		}
		chat := fmt.Sprintf(`{"max_tokens":4,"temperature":0,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,%s"}},{"type":"text","text":"Describe"}]}]}`, base64.StdEncoding.EncodeToString(a))
		if status, body := postJSON(t, ts.URL+"/v1/chat/completions", []byte(chat)); status != 200 {
			t.Errorf("%s chat: %d %s", typ, status, body)
		}
	}
}
