package vision

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// fuzzSeedImages are small images of every format Decode reads, encoded here (WebP, which the
// standard library cannot encode, comes from x/image's test images in testdata/fuzz/FuzzDecode),
// and a BMP, which Decode does not read.
func fuzzSeedImages(tb testing.TB) [][]byte {
	tb.Helper()
	nrgba := image.NewNRGBA(image.Rect(0, 0, 5, 3))
	for i := range nrgba.Pix {
		nrgba.Pix[i] = uint8(i * 37)
	}
	gray16 := image.NewGray16(image.Rect(0, 0, 3, 2))
	gray16.SetGray16(1, 1, color.Gray16{Y: 0xabcd})
	pal := image.NewPaletted(image.Rect(0, 0, 4, 4), color.Palette{color.Black, color.White, color.NRGBA{R: 255, A: 128}})
	pal.SetColorIndex(1, 2, 2)
	var out [][]byte
	enc := func(f func(*bytes.Buffer) error) {
		var buf bytes.Buffer
		if err := f(&buf); err != nil {
			tb.Fatal(err)
		}
		out = append(out, buf.Bytes())
	}
	enc(func(b *bytes.Buffer) error { return png.Encode(b, nrgba) })
	enc(func(b *bytes.Buffer) error { return png.Encode(b, gray16) })
	enc(func(b *bytes.Buffer) error { return png.Encode(b, pal) })
	enc(func(b *bytes.Buffer) error { return jpeg.Encode(b, nrgba, &jpeg.Options{Quality: 50}) })
	enc(func(b *bytes.Buffer) error { return jpeg.Encode(b, image.NewGray(image.Rect(0, 0, 9, 9)), nil) })
	enc(func(b *bytes.Buffer) error { return gif.Encode(b, pal, nil) })
	// a 2x1 24-bit BMP: file header, BITMAPINFOHEADER, one padded row
	bmp := []byte("BM")
	bmp = binary.LittleEndian.AppendUint32(bmp, 14+40+8)
	bmp = binary.LittleEndian.AppendUint32(bmp, 0)
	bmp = binary.LittleEndian.AppendUint32(bmp, 14+40)
	for _, v := range []uint32{40, 2, 1} {
		bmp = binary.LittleEndian.AppendUint32(bmp, v)
	}
	bmp = append(bmp, 1, 0, 24, 0)
	bmp = append(bmp, make([]byte, 24)...)
	out = append(out, append(bmp, 1, 2, 3, 4, 5, 6, 0, 0))
	return out
}

// hugePNG is a 1x1 PNG whose header (its checksum fixed) claims w x h pixels.
func hugePNG(tb testing.TB, w, h uint32) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1, 1))); err != nil {
		tb.Fatal(err)
	}
	b := buf.Bytes()
	binary.BigEndian.PutUint32(b[16:], w)
	binary.BigEndian.PutUint32(b[20:], h)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}

// FuzzDecode decodes arbitrary bytes as an uploaded image: never a panic, every error of kind
// ErrImage, a header over MaxPixels refused before the pixels are allocated (checked from the
// bytes allocated), and a decoded image of the size its header gives, 3 bytes a pixel.
// Seeds: the shared vision test images, where configured.
func FuzzDecode(f *testing.F) {
	for _, b := range fuzzSeedImages(f) {
		f.Add(b)
	}
	f.Add(hugePNG(f, 60000, 60000))
	f.Add(hugePNG(f, 8192, 8193))
	if dir := shareddata.Dir(); dir != "" {
		for _, p := range []string{
			"models/vision/img-sq64.png",
			"models/vision/img-rect150x100.png",
		} {
			if b, err := os.ReadFile(filepath.Join(dir, p)); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<14 { // bigger inputs find nothing more, and slow minimizing to a crawl
			return
		}
		cfg, _, cfgErr := image.DecodeConfig(bytes.NewReader(data))
		over := cfgErr == nil && int64(cfg.Width)*int64(cfg.Height) > MaxPixels
		var before runtime.MemStats
		if over {
			runtime.ReadMemStats(&before)
		}
		start := time.Now()
		img, err := Decode(data)
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("%v to decode %d bytes", d, len(data))
		}
		if over {
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Fatalf("%dx%d refused after allocating %d bytes", cfg.Width, cfg.Height, n)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrImage) || img != nil {
				t.Fatalf("error %v (image %v), want one of kind ErrImage", err, img != nil)
			}
			return
		}
		if cfgErr != nil || over {
			t.Fatalf("decoded a %dx%d image where DecodeConfig gives %dx%d, %v", img.W, img.H, cfg.Width, cfg.Height, cfgErr)
		}
		if img.W != cfg.Width || img.H != cfg.Height || img.W < 1 || img.H < 1 {
			t.Fatalf("decoded %dx%d, the header says %dx%d", img.W, img.H, cfg.Width, cfg.Height)
		}
		if len(img.Pix) != 3*img.W*img.H {
			t.Fatalf("%d bytes of pixels for %dx%d", len(img.Pix), img.W, img.H)
		}
	})
}

// TestDecodeGIFFrame checks a GIF whose first frame covers part of its logical screen (the
// case FuzzDecode found decoding to the frame's size, not the checked header's): the image is
// the screen, the frame drawn at its place, black elsewhere, as stb_image gives llama.cpp.
func TestDecodeGIFFrame(t *testing.T) {
	frame := image.NewPaletted(image.Rect(1, 1, 3, 2), color.Palette{color.Black, color.White})
	frame.SetColorIndex(1, 1, 1)
	frame.SetColorIndex(2, 1, 1)
	var buf bytes.Buffer
	err := gif.EncodeAll(&buf, &gif.GIF{Image: []*image.Paletted{frame}, Delay: []int{0},
		Config: image.Config{ColorModel: frame.Palette, Width: 4, Height: 3}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := make([]uint8, 3*4*3)
	for _, x := range []int{1, 2} {
		i := 3 * (1*4 + x)
		want[i], want[i+1], want[i+2] = 255, 255, 255
	}
	if img.W != 4 || img.H != 3 || !bytes.Equal(img.Pix, want) {
		t.Errorf("%dx%d %v, want 4x3 %v", img.W, img.H, img.Pix, want)
	}
}
