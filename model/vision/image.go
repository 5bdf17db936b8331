package vision

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif"  // GIF: the first frame
	_ "image/jpeg" // JPEG
	_ "image/png"  // PNG

	_ "golang.org/x/image/webp" // WebP
)

// Limits of the images Decode takes.
const (
	// MaxBytes bounds an image file.
	MaxBytes = 32 << 20
	// MaxPixels bounds width times height, checked from the header before any pixel is decoded.
	MaxPixels = 8192 * 8192
)

// RGB is an 8-bit RGB image, 3 bytes a pixel, row by row: what stb_image gives llama.cpp
// when forced to 3 channels.
type RGB struct {
	W, H int
	Pix  []uint8
}

// ErrImage is the kind of every Decode error (a bad image, not a server fault).
var ErrImage = errors.New("invalid image")

// Decode reads a PNG, JPEG, GIF (its first frame) or WebP file as RGB: alpha is dropped, grey
// becomes three equal channels, 16-bit samples keep their high byte.
func Decode(data []byte) (*RGB, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrImage, len(data), MaxBytes)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v (PNG, JPEG, GIF and WebP are supported)", ErrImage, err)
	}
	if cfg.Width < 1 || cfg.Height < 1 || int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return nil, fmt.Errorf("%w: %dx%d %s: over the %d-pixel limit", ErrImage, cfg.Width, cfg.Height, format, MaxPixels)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrImage, format, err)
	}
	// The image is the size its header gives, the size checked above. A GIF's first frame may
	// cover only part of its logical screen: as stb_image does for llama.cpp, it is drawn at
	// its place on a screen-sized canvas left black elsewhere (a frame reaching outside the
	// screen is cut to it, never allowed to grow the image past the checked size).
	out := &RGB{W: cfg.Width, H: cfg.Height, Pix: make([]uint8, 3*cfg.Width*cfg.Height)}
	b := img.Bounds().Intersect(image.Rect(0, 0, cfg.Width, cfg.Height))
	for y := b.Min.Y; y < b.Max.Y; y++ {
		i := 3 * (y*cfg.Width + b.Min.X)
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl := straightRGB(img.At(x, y))
			out.Pix[i], out.Pix[i+1], out.Pix[i+2] = r, g, bl
			i += 3
		}
	}
	return out, nil
}

// straightRGB is a pixel's stored (not alpha-premultiplied) colour, as stb_image keeps it.
func straightRGB(c color.Color) (uint8, uint8, uint8) {
	switch p := c.(type) {
	case color.NRGBA:
		return p.R, p.G, p.B
	case color.NRGBA64:
		return uint8(p.R >> 8), uint8(p.G >> 8), uint8(p.B >> 8)
	case color.Gray:
		return p.Y, p.Y, p.Y
	case color.Gray16:
		return uint8(p.Y >> 8), uint8(p.Y >> 8), uint8(p.Y >> 8)
	case color.RGBA:
		if p.A == 0xff {
			return p.R, p.G, p.B
		}
	}
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	return n.R, n.G, n.B
}
