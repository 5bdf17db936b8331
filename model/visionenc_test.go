package model

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/reference"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// openVisionEncoder opens the shared tiny gemma3 projector and loads its encoder, both closed
// when the test ends.
func openVisionEncoder(t *testing.T, dev *gpu.Device) (*gguf.File, *VisionEncoder) {
	t.Helper()
	f, err := gguf.Open(shareddata.Path(t, "models", "vision") + "/tinygemma3v-mmproj-F32.gguf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	enc, err := LoadVisionEncoder(dev, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enc.Close() })
	return f, enc
}

// refInput is llama.cpp's graph input for a reference image (112 x 112).
func refInput(t *testing.T, name string) vision.Input {
	return vision.Input{W: 112, H: 112, Pix: shareddata.Float32s(t, "models", "vision", "reference", "harness-describe-"+name+"-faoff-0-inp_raw.f32")}
}

// The GPU encoder gives the plain-Go reference's embeddings (within float32 rounding) and
// llama.cpp's within 1e-4 relative (3e-6 measured), for both reference images.
func TestVisionEncoder(t *testing.T) {
	f, enc := openVisionEncoder(t, gputest.Device(t))
	for _, name := range []string{"sq64", "rect150x100"} {
		pixels := refInput(t, name)
		got, err := enc.Encode(pixels)
		if err != nil {
			t.Fatal(err)
		}
		want, err := reference.EncodeImage(f, pixels)
		if err != nil {
			t.Fatal(err)
		}
		if e := cpuref.RelErr(got, want); e > 1e-5 {
			t.Errorf("%s: relative error %.2g against the reference", name, e)
		}
		llama := shareddata.Float32s(t, "models", "vision", "reference", "harness-describe-"+name+"-faoff-0-embd.f32")
		if e := cpuref.RelErr(got, llama); e > 1e-4 {
			t.Errorf("%s: relative error %.2g against llama.cpp's embeddings", name, e)
		}
	}
}

// The text model decodes an image's embeddings as llama.cpp does (its rows see one another
// both ways, and are not scaled by sqrt(n_embd)): greedy on the reference's describe prompts
// gives its tokens, and decoding the image causally would not.
func TestImagePromptGreedy(t *testing.T) {
	dev := gputest.Device(t)
	_, enc := openVisionEncoder(t, dev)
	tf, err := gguf.Open(shareddata.Path(t, "models", "vision") + "/tinygemma3v-text-F32.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	m, err := Load(dev, tf, Options{MaxBatch: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sq64 := []int32{653, 539, 539, 539, 539, 539, 539, 539, 539, 539, 539, 539, 539, 539, 539, 539}
	for _, c := range []struct {
		image  string
		causal bool
		want   []int32
	}{
		{"sq64", false, sq64},
		{"rect150x100", false, []int32{583, 696, 696, 696, 696, 696, 696, 696, 696, 696, 696, 696, 696, 696, 696, 696}},
		{"sq64", true, nil}, // anything but sq64's tokens
	} {
		embd, err := enc.Encode(refInput(t, c.image))
		if err != nil {
			t.Fatal(err)
		}
		kv, err := m.NewKVCache(64)
		if err != nil {
			t.Fatal(err)
		}
		// <bos><start_of_turn>user\n<start_of_image> [16 image rows] <end_of_image>Describe<end_of_turn>\n<start_of_turn>model\n
		before, after := []int32{2, 4, 558, 264, 6}, []int32{7, 731, 5, 264, 4, 627, 264}
		var b Batch
		add := func(tok int32, e []float32, end int32) {
			p := int32(len(b.Tokens))
			b.Tokens, b.Pos, b.Base = append(b.Tokens, tok), append(b.Pos, p), append(b.Base, 0)
			b.Embeds, b.AttnEnds = append(b.Embeds, e), append(b.AttnEnds, max(end, p))
		}
		for _, tok := range before {
			add(tok, nil, 0)
		}
		end := int32(len(before) + 15)
		if c.causal {
			end = 0
		}
		for i := range 16 {
			add(MediaToken+int32(i), embd[i*160:(i+1)*160], end)
		}
		for _, tok := range after {
			add(tok, nil, 0)
		}
		b.Logits = []int{len(b.Tokens) - 1}
		var got []int32
		for step := range 16 {
			logits, err := m.ForwardBatch(kv, b)
			if err != nil {
				t.Fatal(err)
			}
			ids, _ := cpuref.Argmax(logits[0], len(logits[0]))
			got = append(got, ids[0])
			b = Batch{Tokens: []int32{ids[0]}, Pos: []int32{int32(28 + step)}, Base: []int32{0}, Logits: []int{0}}
		}
		kv.Release()
		if c.causal && fmt.Sprint(got) == fmt.Sprint(sq64) {
			t.Errorf("%s decoded causally still gives llama.cpp's tokens: the test cannot tell", c.image)
		}
		if !c.causal && fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: greedy %v, llama.cpp %v", c.image, got, c.want)
		}
	}
}

// genProjector writes gen-model's tiny projector of the type and opens it.
func genProjector(t *testing.T, p synth.Projector) *gguf.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mmproj-"+p.Type+".gguf")
	if err := synth.WriteProjectorFile(path, p); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// randomInput is an input of fresh random normalised pixels: ImageSize square, or for Qwen
// 140 x 84 (5 x 3 tokens: Qwen2.5-VL's 4-token windows split it in two).
func randomInput(h vision.Hparams, rng *rand.Rand) vision.Input {
	w, hh := h.ImageSize, h.ImageSize
	if h.Qwen() {
		w, hh = 140, 84
	}
	in := vision.Input{W: w, H: hh, Pix: make([]float32, 3*w*hh)}
	for i := range in.Pix {
		in.Pix[i] = float32(rng.NormFloat64())
	}
	return in
}

// gpuTrunk runs the encoder's ViT through layers layers and returns its rows in the
// reference's order (reference.VisionTrunk's).
func gpuTrunk(t *testing.T, enc *VisionEncoder, in vision.Input, layers int) []float32 {
	t.Helper()
	d := enc.H.NEmbd
	var r *gpu.Recorder
	var x *gpu.Buffer
	var err error
	rows, gpuOrder, refOrder := enc.nSeq, enc.order, []int(nil)
	if enc.qwen != nil {
		r, x, _, err = enc.qwen.trunk(in, layers)
		gw, gh := in.W/enc.H.PatchSize, in.H/enc.H.PatchSize
		rows = gw * gh
		win := 0
		if enc.H.WindowPattern > 0 {
			win = enc.H.WindowTokens()
		}
		gpuOrder, _, _ = vision.WindowOrder(gw, gh, win)
		refOrder = vision.PatchOrder(gw, gh, 2)
	} else {
		r, x, err = enc.trunk(in, layers)
	}
	if err != nil {
		t.Fatal(err)
	}
	raw, err := r.SubmitAndRead(x, 0, uint64(4*rows*d))
	if err != nil {
		t.Fatal(err)
	}
	got := gpu.Float32s(raw)
	if gpuOrder == nil {
		return got
	}
	out := make([]float32, len(got))
	for i, j := range gpuOrder {
		k := i
		if refOrder != nil {
			k = refOrder[i]
		}
		copy(out[k*d:(k+1)*d], got[j*d:(j+1)*d])
	}
	return out
}

// The mlp (LLaVA), idefics3 (SmolVLM), Qwen2-VL and Qwen2.5-VL encoders, on gen-model's
// projectors and random inputs, give the plain-Go reference's rows after every layer and its
// embeddings within 1e-4 (4e-5 measured: the GELU tables' f16 roundings flip by one step where
// the driver's exp or tanh and Go's differ in their last bit); two inputs give different
// embeddings (the pixels reach them).
func TestVisionEncoderProjectors(t *testing.T) {
	dev := gputest.Device(t)
	rng := rand.New(rand.NewPCG(7, 11))
	for _, typ := range synth.ProjectorTypes() {
		f := genProjector(t, synth.TinyProjector(typ))
		enc, err := LoadVisionEncoder(dev, f)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		h := enc.H
		in := randomInput(h, rng)
		layers := h.Layers()
		if h.Qwen() {
			layers = h.NLayer
		}
		for l := 0; l <= layers; l++ {
			got := gpuTrunk(t, enc, in, l)
			want, err := reference.VisionTrunk(f, in, l)
			if err != nil {
				t.Fatal(err)
			}
			if e := cpuref.RelErr(got, want); e > 1e-4 {
				t.Errorf("%s after %d layers: relative error %.2g", typ, l, e)
			}
		}
		got, err := enc.Encode(in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := reference.EncodeImage(f, in)
		if err != nil {
			t.Fatal(err)
		}
		gw, gh := h.Grid(in)
		if len(got) != gw*gh*64 || len(want) != len(got) {
			t.Fatalf("%s: %d values, reference %d, want %dx%d tokens of 64", typ, len(got), len(want), gw, gh)
		}
		if e := cpuref.RelErr(got, want); e > 1e-4 {
			t.Errorf("%s: embeddings' relative error %.2g", typ, e)
		}
		other, err := enc.Encode(randomInput(h, rng))
		if err != nil {
			t.Fatal(err)
		}
		if e := cpuref.RelErr(other, got); e < 0.1 {
			t.Errorf("%s: two random inputs give embeddings %.2g apart", typ, e)
		}
	}
}
