package model

import (
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/reference"
)

func readF32Ref(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// The GPU encoder gives the plain-Go reference's embeddings (within float32 rounding) and so
// llama.cpp's, for both reference images.
func TestVisionEncoder(t *testing.T) {
	dev := gputest.Device(t)
	dir := shareddata.Path(t, "models", "vision")
	f, err := gguf.Open(dir + "/tinygemma3v-mmproj-F32.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc, err := LoadVisionEncoder(dev, f)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	for _, name := range []string{"sq64", "rect150x100"} {
		prefix := dir + "/reference/harness-describe-" + name + "-faoff-0-"
		pixels := readF32Ref(t, prefix+"inp_raw.f32")
		got, err := enc.Encode(pixels)
		if err != nil {
			t.Fatal(err)
		}
		want, err := reference.EncodeImage(f, pixels)
		if err != nil {
			t.Fatal(err)
		}
		if e := cpuref.RelErr(got, want); e > 1e-4 {
			t.Errorf("%s: relative error %.2g against the reference", name, e)
		}
		llama := readF32Ref(t, prefix+"embd.f32")
		var maxDiff float64
		for i := range llama {
			maxDiff = max(maxDiff, math.Abs(float64(got[i]-llama[i])))
		}
		if maxDiff > 5e-4 {
			t.Errorf("%s: up to %g from llama.cpp's embeddings", name, maxDiff)
		}
	}
}
