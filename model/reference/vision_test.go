package reference

import (
	"math"
	"os"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// The encoder on llama.cpp's own graph input gives its projected embeddings (16 x 160): with
// llama.cpp's f16 roundings copied, within 1e-5 (exact math would be 2.1e-4 off, the
// reference's README measures).
func TestEncodeImageMatchesLlamaCpp(t *testing.T) {
	dir := shareddata.Path(t, "models", "vision")
	f, err := gguf.Open(dir + "/tinygemma3v-mmproj-F32.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range []string{"sq64", "rect150x100"} {
		got, err := EncodeImage(f, vision.Input{W: 112, H: 112, Pix: shareddata.Float32s(t, "models", "vision", "reference", "harness-describe-"+name+"-faoff-0-inp_raw.f32")})
		if err != nil {
			t.Fatal(err)
		}
		want := shareddata.Float32s(t, "models", "vision", "reference", "harness-describe-"+name+"-faoff-0-embd.f32")
		if len(got) != 16*160 || len(want) != len(got) {
			t.Fatalf("%s: %d values, reference %d", name, len(got), len(want))
		}
		var maxDiff float64
		for i := range want {
			maxDiff = max(maxDiff, math.Abs(float64(got[i]-want[i])))
		}
		if maxDiff > 1e-5 {
			t.Errorf("%s: embeddings differ from llama.cpp's by up to %g", name, maxDiff)
		}
		t.Logf("%s: max |diff| %.2g", name, maxDiff)
	}
	// decoding and preprocessing the PNG gives the same input, so the same embeddings
	data, err := os.ReadFile(dir + "/img-sq64.png")
	if err != nil {
		t.Fatal(err)
	}
	img, err := vision.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := vision.ReadHparams(f)
	fromPNG, err := EncodeImage(f, vision.Prepare(img, h).Inputs[0])
	if err != nil {
		t.Fatal(err)
	}
	fromRef, _ := EncodeImage(f, vision.Input{W: 112, H: 112, Pix: shareddata.Float32s(t, "models", "vision", "reference", "harness-describe-sq64-faoff-0-inp_raw.f32")})
	for i := range fromRef {
		if fromPNG[i] != fromRef[i] {
			t.Fatalf("value %d: %v from the PNG, %v from llama.cpp's input", i, fromPNG[i], fromRef[i])
		}
	}
}
