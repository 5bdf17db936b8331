package engine_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/reference"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// synthVision writes gen-model's tiny llama and its tiny projector of the type.
func synthVision(t *testing.T, typ string) (text, proj string) {
	t.Helper()
	dir := t.TempDir()
	text, proj = filepath.Join(dir, "text.gguf"), filepath.Join(dir, "mmproj-"+typ+".gguf")
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if synth.TinyProjector(typ).WindowPattern > 0 || typ == "qwen2vl_merger" {
		cfg.Arch = "qwen2vl" // Qwen's projectors go with its M-RoPE text model
	}
	if _, err := synth.WriteFile(text, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteProjectorFile(proj, synth.TinyProjector(typ)); err != nil {
		t.Fatal(err)
	}
	return text, proj
}

// noise is a w x h image of random pixels.
func noise(w, h int, seed uint64) *vision.RGB {
	rng := rand.New(rand.NewPCG(seed, 3))
	img := &vision.RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	for i := range img.Pix {
		img.Pix[i] = uint8(rng.IntN(256))
	}
	return img
}

// An image through the engine, with the mlp (one input), idefics3 (an overview and tiles,
// each its own run of rows with text between) and Qwen projectors (an input of the image's
// own shape, its rows turned by their place in its grid and the text after it by positions
// that advanced by the grid's longer side: M-RoPE), gives the greedy tokens of the text model
// fed the plain-Go reference encoder's embeddings at the same rows and positions; the image's
// prompt is decoded causally, as llama.cpp decodes these projectors' images. The first
// token's probability matches too, and another image would move it.
func TestImagePromptsProjectors(t *testing.T) {
	for _, typ := range synth.ProjectorTypes() {
		text, proj := synthVision(t, typ)
		e := enginetest.LoadConfig(t, engine.Config{ModelPath: text, MMProjPath: proj, CtxSize: 512})
		h, ok := e.Vision()
		if !ok || h.Projector != typ {
			t.Fatalf("%s: vision %v %+v", typ, ok, h)
		}
		w, hh := 50, 30
		if h.Qwen() {
			w, hh = 150, 80 // 140 x 84: 5 x 3 tokens, in two of Qwen2.5-VL's windows
		}
		prep := vision.Prepare(noise(w, hh, 1), h)
		img, err := e.EncodeImage(context.Background(), [32]byte{1}, func() (vision.Prepared, error) { return prep, nil })
		if err != nil {
			t.Fatal(err)
		}
		if len(img.Chunks) != len(prep.Inputs) || img.Cols != prep.Cols || img.Rows != prep.Rows {
			t.Fatalf("%s: %d chunks, grid %dx%d for %d inputs, grid %dx%d", typ, len(img.Chunks), img.Cols, img.Rows, len(prep.Inputs), prep.Cols, prep.Rows)
		}
		if typ == "idefics3" && (img.Cols != 2 || img.Rows != 2) {
			t.Errorf("idefics3: a 50x30 image in a 72-pixel edge is 2x2 tiles, not %dx%d", img.Cols, img.Rows)
		}
		// <s> text, then each input's rows and a text token after it
		prompt := []int32{1, 300, 301}
		for i, c := range img.Chunks {
			if gw, gh := h.Grid(prep.Inputs[i]); c.N != gw*gh || h.Qwen() && (gw != 5 || gh != 3) {
				t.Fatalf("%s: input %d takes %d rows, its grid is %dx%d", typ, i, c.N, gw, gh)
			}
			prompt = append(prompt, c.Tokens()...)
			prompt = append(prompt, int32(310+i))
		}
		params := greedy(16)
		params.NProbs = 1
		got, probs := generateIDs(t, e, prompt, params)
		want, wantProb := referenceGreedy(t, text, proj, prompt, img, prep, len(got))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: the engine generates %v, the text model on the reference's embeddings %v", typ, got, want)
		}
		// The probabilities tell images apart where the random model's tokens may not: another
		// image moves the first one by 1.5%. The engine is within 2.1e-5 of the reference
		// (idefics3; Qwen's 5e-6 and 1e-7), and plain positions in place of M-RoPE's would be
		// 5e-4 (Qwen2-VL) and 4e-5 (Qwen2.5-VL) off.
		_, otherProb := referenceGreedy(t, text, proj, prompt, img, vision.Prepare(noise(w, hh, 2), h), 1)
		rel := func(a, b float32) float64 { return math.Abs(float64(a-b)) / float64(b) }
		tol := 1e-4
		if h.Qwen() {
			tol = 2e-5
		}
		if d := rel(probs[0].Prob, wantProb); d > tol {
			t.Errorf("%s: first token's probability %v, the reference's %v (%.2g apart)", typ, probs[0].Prob, wantProb, d)
		}
		if d := rel(otherProb, wantProb); d < 5e-3 {
			t.Errorf("%s: another image moves the first token's probability by only %.2g: the test cannot tell images apart", typ, d)
		}
		// these images are decoded causally: an image larger than a pass is split across
		// passes, with the same result
		small := enginetest.LoadConfig(t, engine.Config{ModelPath: text, MMProjPath: proj, CtxSize: 512, BatchSize: 8})
		img2, err := small.EncodeImage(context.Background(), [32]byte{1}, func() (vision.Prepared, error) { return prep, nil })
		if err != nil || fmt.Sprint(img2) != fmt.Sprint(img) {
			t.Fatalf("%s: %v, %+v", typ, err, img2)
		}
		got2, probs2 := generateIDs(t, small, prompt, params)
		if fmt.Sprint(got2) != fmt.Sprint(got) || rel(probs2[0].Prob, probs[0].Prob) > 1e-5 {
			t.Errorf("%s: in passes of 8 rows: %v (%v), in one: %v (%v)", typ, got2, probs2[0].Prob, got, probs[0].Prob)
		}
	}
}

// referenceGreedy decodes prompt with the text model on the GPU, its image rows taking the
// reference encoder's embeddings of the prepared inputs, and returns n greedy tokens and the
// first one's probability.
func referenceGreedy(t *testing.T, text, proj string, prompt []int32, img engine.MediaImage, prep vision.Prepared, n int) ([]int32, float32) {
	t.Helper()
	pf, err := gguf.Open(proj)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	h, err := vision.ReadHparams(pf)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[int32][]float32{}
	type place struct{ first, x, y, gw, gh int }
	places := map[int32]place{} // each image row's place in its input's grid
	for i, c := range img.Chunks {
		embd, err := reference.EncodeImage(pf, prep.Inputs[i])
		if err != nil {
			t.Fatal(err)
		}
		w := len(embd) / c.N
		gw, gh := h.Grid(prep.Inputs[i])
		for k, id := range c.Tokens() {
			rows[id] = embd[k*w : (k+1)*w]
			places[id] = place{first: k, x: k % gw, y: k / gw, gw: gw, gh: gh}
		}
	}
	tf, err := gguf.Open(text)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	m, err := model.Load(gputest.Device(t), tf, model.Options{MaxBatch: len(prompt)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	kv, err := m.NewKVCache(512)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	var b model.Batch
	next := int32(0) // the next M-RoPE position: an image advances it by its grid's longer side
	var p0 int32
	for i, tok := range prompt {
		b.Tokens, b.Pos, b.Base = append(b.Tokens, tok), append(b.Pos, int32(i)), append(b.Base, 0)
		b.Embeds = append(b.Embeds, rows[tok])
		pl, image := places[tok]
		switch {
		case !image:
			b.MPos = append(b.MPos, next, next, next, 0)
			next++
		default:
			if pl.first == 0 {
				p0 = next
				next += int32(max(pl.gw, pl.gh))
			}
			b.MPos = append(b.MPos, p0, p0+int32(pl.y), p0+int32(pl.x), 0)
		}
	}
	if !m.Config.MRoped() {
		b.MPos = nil
	}
	b.Logits = []int{len(prompt) - 1}
	var out []int32
	var first float32
	for step := range n {
		logits, err := m.ForwardBatch(kv, b)
		if err != nil {
			t.Fatal(err)
		}
		ids, probs := cpuref.Argmax(logits[0], len(logits[0]))
		if step == 0 {
			first = probs[0]
		}
		out = append(out, ids[0])
		b = model.Batch{Tokens: []int32{ids[0]}, Pos: []int32{int32(len(prompt) + step)}, Base: []int32{0}, Logits: []int{0}}
		if m.Config.MRoped() {
			p := next + int32(step)
			b.MPos = []int32{p, p, p, 0}
		}
	}
	return out, first
}

// generateIDs runs a prompt of ids to the end and returns its tokens and their probabilities.
func generateIDs(t *testing.T, e *engine.Engine, prompt []int32, params engine.Params) ([]int32, []engine.StepProbs) {
	t.Helper()
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	var toks []int32
	var probs []engine.StepProbs
	for r := range ch {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		toks, probs = append(toks, r.Tokens...), append(probs, r.Probs...)
	}
	return toks, probs
}
