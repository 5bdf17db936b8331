package engine_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// visionEngine serves the llama.cpp-verified tinygemma3v pair with two slots.
func visionEngine(t *testing.T) (*engine.Engine, string) {
	dir := shareddata.Path(t, "models", "vision")
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: dir + "/tinygemma3v-text-F32.gguf", MMProjPath: dir + "/tinygemma3v-mmproj-F32.gguf", CtxSize: 512, Slots: 2})
	return e, dir
}

// image encodes a reference image and returns its placeholder tokens.
func image(t *testing.T, e *engine.Engine, dir, name string) engine.MediaChunk {
	t.Helper()
	data, err := os.ReadFile(dir + "/img-" + name + ".png")
	if err != nil {
		t.Fatal(err)
	}
	img, err := vision.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	h, ok := e.Vision()
	if !ok {
		t.Fatal("no projector")
	}
	c, err := e.EncodeImage(context.Background(), sha256.Sum256(data), func() (vision.Prepared, error) { return vision.Prepare(img, h), nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Chunks) != 1 {
		t.Fatalf("%d chunks for a gemma3 image", len(c.Chunks))
	}
	return c.Chunks[0]
}

// describe is the reference's describe prompt around an image.
func describe(c engine.MediaChunk) []int32 {
	p := []int32{2, 4, 558, 264, 6}
	p = append(p, c.Tokens()...)
	return append(p, 7, 731, 5, 264, 4, 627, 264)
}

func genTokens(t *testing.T, e *engine.Engine, prompt []int32) ([]int32, engine.Result) {
	t.Helper()
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(16)})
	if err != nil {
		t.Fatal(err)
	}
	var toks []int32
	var last engine.Result
	for r := range ch {
		toks = append(toks, r.Tokens...)
		last = r
	}
	if last.Err != nil {
		t.Fatal(last.Err)
	}
	return toks, last
}

// An image in a prompt gives llama.cpp's greedy tokens; the same image again is the same
// placeholders and reuses its cached rows, a different image with the same text never does.
func TestImagePrompts(t *testing.T) {
	e, dir := visionEngine(t)
	if e.Info().ImageTokens != 16 {
		t.Fatalf("image tokens %d", e.Info().ImageTokens)
	}
	sq, rect := image(t, e, dir, "sq64"), image(t, e, dir, "rect150x100")
	if again := image(t, e, dir, "sq64"); again != sq || rect.Base == sq.Base {
		t.Fatalf("placeholders: sq64 %v then %v, rect %v", sq, again, rect)
	}
	// An image the engine holds is not preprocessed again.
	data, err := os.ReadFile(dir + "/img-sq64.png")
	if err != nil {
		t.Fatal(err)
	}
	held, err := e.EncodeImage(context.Background(), sha256.Sum256(data), func() (vision.Prepared, error) {
		return vision.Prepared{}, errors.New("the pixels of a held image were asked for")
	})
	if err != nil || len(held.Chunks) != 1 || held.Chunks[0] != sq {
		t.Fatalf("sq64 held: %v, %v (want %v)", held, err, sq)
	}
	want := map[string]string{
		"sq64": "[653 539 539 539 539 539 539 539 539 539 539 539 539 539 539 539]",
		"rect": "[583 696 696 696 696 696 696 696 696 696 696 696 696 696 696 696]",
	}
	toks, final := genTokens(t, e, describe(sq))
	if fmt.Sprint(toks) != want["sq64"] || final.TokensEvaluated != 28 {
		t.Errorf("sq64: %v, %d evaluated", toks, final.TokensEvaluated)
	}
	toks, final = genTokens(t, e, describe(rect))
	if fmt.Sprint(toks) != want["rect"] || final.Timings.CacheN > 5 {
		t.Errorf("rect: %v, %d cached (the image rows of sq64 must not be reused)", toks, final.Timings.CacheN)
	}
	toks, final = genTokens(t, e, describe(sq))
	if fmt.Sprint(toks) != want["sq64"] || final.Timings.CacheN < 21 {
		t.Errorf("sq64 again: %v, %d cached (its image rows should be reused)", toks, final.Timings.CacheN)
	}
}

func TestImagePromptRefused(t *testing.T) {
	e, dir := visionEngine(t)
	sq := image(t, e, dir, "sq64")
	for name, prompt := range map[string][]int32{
		"cut":     append([]int32{2, 6}, sq.Tokens()[:10]...),
		"unknown": {2, 6, sq.Base + 1000, 7},
	} {
		if _, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(4)}); !errors.Is(err, engine.ErrBadMedia) {
			t.Errorf("%s: %v", name, err)
		}
	}
	plain := enginetest.Load(t, "models", "stories260K.gguf")
	if _, err := plain.EncodeImage(context.Background(), [32]byte{}, nil); !errors.Is(err, engine.ErrNoVision) {
		t.Errorf("no projector: %v", err)
	}
}

// With a draft model, a prompt holding an image is generated without drafting (the draft model
// cannot read the image's rows), and gives the same tokens; n-gram drafting still applies.
func TestImagePromptSpeculative(t *testing.T) {
	dir := shareddata.Path(t, "models", "vision")
	text := dir + "/tinygemma3v-text-F32.gguf"
	for _, spec := range []engine.SpecConfig{{DraftModel: text, NMax: 4}, {Type: engine.SpecNgram, NMax: 4, NgramN: 2, NgramM: 4}} {
		e := enginetest.LoadConfig(t, engine.Config{ModelPath: text, MMProjPath: dir + "/tinygemma3v-mmproj-F32.gguf", CtxSize: 512, Speculative: spec})
		toks, _ := genTokens(t, e, describe(image(t, e, dir, "sq64")))
		if fmt.Sprint(toks) != "[653 539 539 539 539 539 539 539 539 539 539 539 539 539 539 539]" {
			t.Errorf("%+v: %v", spec, toks)
		}
	}
}

// A slot holding an image saves and restores; the restored prefix stops before the image (its
// placeholders name images only within the process that made them), so the same request after
// the restore recomputes the image and still gives the reference tokens.
func TestImageSlotSaveRestore(t *testing.T) {
	e, dir := visionEngine(t)
	sq := image(t, e, dir, "sq64")
	prompt := describe(sq)
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(4), Slot: new(int)})
	if err != nil {
		t.Fatal(err)
	}
	for range ch {
	}
	path := t.TempDir() + "/slot.bin"
	saved, err := e.SaveSlot(context.Background(), 0, path)
	if err != nil || saved.Tokens < len(prompt) {
		t.Fatalf("save: %+v %v", saved, err)
	}
	restored, err := e.RestoreSlot(context.Background(), 0, path)
	if err != nil || restored.Tokens != 5 {
		t.Fatalf("restore: %+v %v, want the 5 tokens before the image", restored, err)
	}
	ch, err = e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(16), Slot: new(int)})
	if err != nil {
		t.Fatal(err)
	}
	var toks []int32
	var last engine.Result
	for r := range ch {
		toks, last = append(toks, r.Tokens...), r
	}
	if fmt.Sprint(toks) != "[653 539 539 539 539 539 539 539 539 539 539 539 539 539 539 539]" || last.Timings.CacheN != 5 {
		t.Errorf("after the restore: %v, %d cached (want the 5 tokens before the image)", toks, last.Timings.CacheN)
	}
}
