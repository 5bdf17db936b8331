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

// An image through the engine, with the mlp (one input) and idefics3 (an overview and tiles,
// each its own run of rows with text between) projectors, gives the greedy tokens of the text
// model fed the plain-Go reference encoder's embeddings at the same rows; the image's prompt
// is decoded causally, as llama.cpp decodes these projectors' images. The first token's
// probability matches too, and another image would move it.
func TestImagePromptsProjectors(t *testing.T) {
	for _, typ := range synth.ProjectorTypes() {
		text, proj := synthVision(t, typ)
		e := enginetest.LoadConfig(t, engine.Config{ModelPath: text, MMProjPath: proj, CtxSize: 512})
		h, ok := e.Vision()
		if !ok || h.Projector != typ {
			t.Fatalf("%s: vision %v %+v", typ, ok, h)
		}
		prep := vision.Prepare(noise(50, 30, 1), h)
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
			if c.N != h.Tokens() {
				t.Fatalf("%s: input %d takes %d rows, want %d", typ, i, c.N, h.Tokens())
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
		// the probabilities tell images apart where the random model's tokens may not: another
		// image moves the first one by 1.5%, the engine is within 3e-5 of the reference
		_, otherProb := referenceGreedy(t, text, proj, prompt, img, vision.Prepare(noise(50, 30, 2), h), 1)
		rel := func(a, b float32) float64 { return math.Abs(float64(a-b)) / float64(b) }
		if d := rel(probs[0].Prob, wantProb); d > 1e-3 {
			t.Errorf("%s: first token's probability %v, the reference's %v", typ, probs[0].Prob, wantProb)
		}
		if d := rel(otherProb, wantProb); d < 5e-3 {
			t.Errorf("%s: another image moves the first token's probability by only %.2g: the test cannot tell images apart", typ, d)
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
	rows := map[int32][]float32{}
	for i, c := range img.Chunks {
		embd, err := reference.EncodeImage(pf, prep.Inputs[i])
		if err != nil {
			t.Fatal(err)
		}
		w := len(embd) / c.N
		for k, id := range c.Tokens() {
			rows[id] = embd[k*w : (k+1)*w]
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
	for i, tok := range prompt {
		b.Tokens, b.Pos, b.Base = append(b.Tokens, tok), append(b.Pos, int32(i)), append(b.Base, 0)
		b.Embeds = append(b.Embeds, rows[tok])
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
