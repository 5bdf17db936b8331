package vision

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// refDir is the llama.cpp-verified vision reference (../shared/models/vision).
func refDir(t *testing.T) string { return shareddata.Path(t, "models", "vision") }

func tinyHparams(t *testing.T) Hparams {
	t.Helper()
	f, err := gguf.Open(refDir(t) + "/tinygemma3v-mmproj-F32.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := ReadHparams(f)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestReadHparams(t *testing.T) {
	h := tinyHparams(t)
	want := Hparams{Projector: "gemma3", ImageSize: 112, PatchSize: 14, NEmbd: 128, NFF: 256, NLayer: 2, NHead: 4, Eps: 1e-6, Act: ActGELU, ProjDim: 160,
		Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}, ScaleFactor: 2}
	if h != want {
		t.Errorf("hparams %+v\nwant     %+v", h, want)
	}
	if h.Patches() != 64 || h.Tokens() != 16 {
		t.Errorf("%d patches, %d tokens; want 64 and 16", h.Patches(), h.Tokens())
	}
}

// Decoding and preprocessing give llama.cpp's graph input bit for bit: a square image scaled up,
// and a wide one scaled down and centred on black.
func TestPreprocessMatchesLlamaCpp(t *testing.T) {
	h := tinyHparams(t)
	for _, name := range []string{"sq64", "rect150x100"} {
		data, err := os.ReadFile(refDir(t) + "/img-" + name + ".png")
		if err != nil {
			t.Fatal(err)
		}
		img, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		got := Prepare(img, h).Inputs[0].Pix
		want := shareddata.Float32s(t, "models", "vision", "reference", "harness-describe-"+name+"-faoff-0-inp_raw.f32")
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: value %d (channel %d, y %d, x %d) = %v, llama.cpp has %v", name, i, i/(112*112), i/112%112, i%112, got[i], want[i])
			}
		}
	}
}

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecodeColours(t *testing.T) {
	// stored colour, not premultiplied; alpha dropped
	nrgba := image.NewNRGBA(image.Rect(0, 0, 2, 1))
	nrgba.SetNRGBA(0, 0, color.NRGBA{R: 200, G: 100, B: 50, A: 128})
	nrgba.SetNRGBA(1, 0, color.NRGBA{R: 1, G: 2, B: 3, A: 255})
	img, err := Decode(encodePNG(t, nrgba))
	if err != nil || img.W != 2 || img.H != 1 || string(img.Pix) != string([]byte{200, 100, 50, 1, 2, 3}) {
		t.Errorf("RGBA: %+v %v", img, err)
	}
	gray := image.NewGray16(image.Rect(0, 0, 1, 1))
	gray.SetGray16(0, 0, color.Gray16{Y: 0xabcd})
	if img, err := Decode(encodePNG(t, gray)); err != nil || string(img.Pix) != string([]byte{0xab, 0xab, 0xab}) {
		t.Errorf("16-bit grey: %+v %v", img, err)
	}
}

// Bad images are errors of kind ErrImage that say what is wrong; a huge one is refused from its
// header, before any pixel is allocated.
func TestDecodeRefuses(t *testing.T) {
	good := encodePNG(t, image.NewRGBA(image.Rect(0, 0, 4, 4)))
	huge := encodePNG(t, image.NewGray(image.Rect(0, 0, 1, 1)))
	// rewrite the IHDR's width and height (bytes 16..23) to 20000 x 20000
	binary.BigEndian.PutUint32(huge[16:], 20000)
	binary.BigEndian.PutUint32(huge[20:], 20000)
	binary.BigEndian.PutUint32(huge[29:], crc32.ChecksumIEEE(huge[12:29])) // the IHDR's checksum
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"truncated":      {good[:len(good)/2], "invalid image: png: "},
		"not an image":   {[]byte("GIF89a but not really"), "invalid image: "},
		"text":           {[]byte("hello"), "invalid image: image: unknown format (PNG, JPEG, GIF and WebP are supported)"},
		"huge":           {huge, "invalid image: 20000x20000 png: over the 67108864-pixel limit"},
		"too many bytes": {make([]byte, MaxBytes+1), "invalid image: 33554433 bytes, over the 33554432-byte limit"},
	} {
		_, err := Decode(c.data)
		if err == nil || !errors.Is(err, ErrImage) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}
