package canvas

import (
	"errors"
	"image"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"

	"github.com/go-gl/glfw/v3.4/glfw"

	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// GLFW must be called from the main OS thread: init locks the main goroutine to it, and
// TestMain keeps that goroutine serving onMain while the tests run on others.
func init() { runtime.LockOSThread() }

var mainCalls = make(chan func())

func TestMain(m *testing.M) {
	done := make(chan int)
	go func() { done <- m.Run() }()
	for {
		select {
		case f := <-mainCalls:
			f()
		case code := <-done:
			os.Exit(code)
		}
	}
}

// onMain runs f on the main OS thread and waits for it.
func onMain(f func()) {
	done := make(chan struct{})
	mainCalls <- func() { defer close(done); f() }
	<-done
}

// skipOrFail skips when there is no adapter (fails under gputest.RequireEnv, as CI sets it).
func skipOrFail(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, ErrNoAdapter) && os.Getenv(gputest.RequireEnv) == "" {
		t.Skipf("no WebGPU adapter: %v", err)
	}
	t.Fatal(err)
}

func offscreen(t *testing.T, w, h int) *Canvas {
	t.Helper()
	c, err := NewOffscreen(w, h)
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(c.Close)
	t.Logf("adapter: %s", c.AdapterName())
	return c
}

// to8 is the unorm8 a colour component is stored as.
func to8(v float32) uint8 { return uint8(math.Round(float64(v) * 255)) }

// randColor is an opaque colour whose components are exact in unorm8.
func randColor(r *rand.Rand) Color {
	return Color{float32(r.IntN(256)) / 255, float32(r.IntN(256)) / 255, float32(r.IntN(256)) / 255, 1}
}

// fillRef is the reference rasteriser for opaque quads at integer bounds: a quad covers the
// pixels whose centres lie inside it, i.e. [x0,x1) x [y0,y1), clipped to the image.
func fillRef(img *image.RGBA, q Quad) {
	b := img.Bounds()
	x0, x1 := max(int(q.X0), b.Min.X), min(int(q.X1), b.Max.X)
	y0, y1 := max(int(q.Y0), b.Min.Y), min(int(q.Y1), b.Max.Y)
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			o := img.PixOffset(x, y)
			img.Pix[o], img.Pix[o+1], img.Pix[o+2], img.Pix[o+3] = to8(q.Color.R), to8(q.Color.G), to8(q.Color.B), to8(q.Color.A)
		}
	}
}

func compare(t *testing.T, got, want *image.RGBA, tol int) {
	t.Helper()
	if got.Bounds() != want.Bounds() {
		t.Fatalf("capture is %v, want %v", got.Bounds(), want.Bounds())
	}
	bad := 0
	for y := want.Rect.Min.Y; y < want.Rect.Max.Y; y++ {
		for x := want.Rect.Min.X; x < want.Rect.Max.X; x++ {
			g, w := got.Pix[got.PixOffset(x, y):][:4], want.Pix[want.PixOffset(x, y):][:4]
			for i := range 4 {
				if d := int(g[i]) - int(w[i]); d > tol || d < -tol {
					if bad < 5 {
						t.Errorf("pixel (%d,%d): got %v want %v", x, y, g, w)
					}
					bad++
					break
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d pixels differ", bad)
	}
}

func TestOpaqueQuadsMatchReference(t *testing.T) {
	const w, h = 203, 117
	c := offscreen(t, w, h)
	r := rand.New(rand.NewPCG(1, 2))
	for frame := range 3 {
		clear := randColor(r)
		n := []int{1, 40, 700}[frame] // the last grows the instance buffer
		quads := make([]Quad, n)
		for i := range quads {
			x0, x1 := r.IntN(w+20)-10, r.IntN(w+20)-10
			y0, y1 := r.IntN(h+20)-10, r.IntN(h+20)-10
			quads[i] = Quad{
				X0: float32(min(x0, x1)), X1: float32(max(x0, x1)),
				Y0: float32(min(y0, y1)), Y1: float32(max(y0, y1)),
				Color: randColor(r),
			}
		}
		if err := c.Draw(clear, quads); err != nil {
			t.Fatal(err)
		}
		got, err := c.Capture()
		if err != nil {
			t.Fatal(err)
		}
		want := image.NewRGBA(image.Rect(0, 0, w, h))
		fillRef(want, Quad{X0: 0, Y0: 0, X1: w, Y1: h, Color: clear})
		for _, q := range quads {
			fillRef(want, q)
		}
		compare(t, got, want, 0)
	}
}

func blend(src, dst, a float32) uint8 { return to8(src*a + dst*(1-a)) }

func TestHalfAlphaBlends(t *testing.T) {
	const w, h = 31, 17
	c := offscreen(t, w, h)
	clear := Color{0.2, 0.6, 1, 1}
	q := Quad{X0: 5, Y0: 3, X1: 20, Y1: 11, Color: Color{1, 0.4, 0, 0.5}}
	if err := c.Draw(clear, []Quad{q}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Capture()
	if err != nil {
		t.Fatal(err)
	}
	want := image.NewRGBA(image.Rect(0, 0, w, h))
	fillRef(want, Quad{X1: w, Y1: h, Color: clear})
	mixed := Color{R: float32(blend(1, 0.2, 0.5)) / 255, G: float32(blend(0.4, 0.6, 0.5)) / 255, B: float32(blend(0, 1, 0.5)) / 255, A: 1}
	fillRef(want, Quad{X0: q.X0, Y0: q.Y0, X1: q.X1, Y1: q.Y1, Color: mixed})
	compare(t, got, want, 1)
}

func TestTexturedQuadUsesCoverage(t *testing.T) {
	const w, h = 97, 61
	c := offscreen(t, w, h)
	r := rand.New(rand.NewPCG(3, 4))
	// A sub-image with an offset origin and a stride wider than its width: SetAtlas must
	// upload from its own bounds.
	big := image.NewAlpha(image.Rect(0, 0, 60, 50))
	for i := range big.Pix {
		big.Pix[i] = uint8(r.IntN(256))
	}
	atlas := big.SubImage(image.Rect(7, 5, 52, 44)).(*image.Alpha) // 45x39, atlas (0,0) = big (7,5)
	if err := c.SetAtlas(image.NewAlpha(image.Rect(0, 0, 3, 3))); err != nil {
		t.Fatal(err)
	}
	if err := c.SetAtlas(atlas); err != nil { // a different size: a new texture
		t.Fatal(err)
	}
	clear := Color{0.1, 0.2, 0.3, 1}
	col := Color{1, 0.8, 0.4, 1}
	const qx, qy, u0, v0, qw, qh = 9, 6, 4, 3, 40, 33
	q := Quad{X0: qx, Y0: qy, X1: qx + qw, Y1: qy + qh, U0: u0, V0: v0, U1: u0 + qw, V1: v0 + qh, Color: col, Textured: true}
	// A non-textured quad after it checks the flag is per quad.
	solid := Quad{X0: 0, Y0: 50, X1: 10, Y1: 61, Color: Color{0, 1, 0, 1}}
	if err := c.Draw(clear, []Quad{q, solid}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Capture()
	if err != nil {
		t.Fatal(err)
	}
	want := image.NewRGBA(image.Rect(0, 0, w, h))
	fillRef(want, Quad{X1: w, Y1: h, Color: clear})
	for y := range qh {
		for x := range qw {
			cov := float32(big.AlphaAt(7+u0+x, 5+v0+y).A) / 255
			o := want.PixOffset(qx+x, qy+y)
			want.Pix[o] = blend(col.R, clear.R, cov)
			want.Pix[o+1] = blend(col.G, clear.G, cov)
			want.Pix[o+2] = blend(col.B, clear.B, cov)
			want.Pix[o+3] = 255
		}
	}
	fillRef(want, solid)
	compare(t, got, want, 1)
}

func TestResize(t *testing.T) {
	c := offscreen(t, 20, 10)
	for _, sz := range [][2]int{{64, 48}, {1, 1}, {0, 0}, {33, 7}} {
		if err := c.Resize(sz[0], sz[1]); err != nil {
			t.Fatal(err)
		}
		if w, h := c.Size(); w != sz[0] || h != sz[1] {
			t.Fatalf("Size() = %dx%d after Resize(%d, %d)", w, h, sz[0], sz[1])
		}
		clear := Color{1, 0, 0.5, 1}
		if err := c.Draw(clear, []Quad{{X0: 0, Y0: 0, X1: 1, Y1: 1, Color: Color{0, 0, 1, 1}}}); err != nil {
			t.Fatal(err)
		}
		got, err := c.Capture()
		if err != nil {
			t.Fatal(err)
		}
		want := image.NewRGBA(image.Rect(0, 0, sz[0], sz[1]))
		fillRef(want, Quad{X1: float32(sz[0]), Y1: float32(sz[1]), Color: clear})
		fillRef(want, Quad{X1: 1, Y1: 1, Color: Color{0, 0, 1, 1}})
		compare(t, got, want, 0)
	}
	if err := c.Resize(-1, 5); err == nil {
		t.Error("Resize(-1, 5): expected an error")
	}
}

// TestWindow draws into a hidden GLFW window (needs an X11 or Wayland display, e.g. xvfb-run).
func TestWindow(t *testing.T) {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		t.Skip("no display (DISPLAY unset); run under xvfb-run")
	}
	var err error
	onMain(func() { err = glfw.Init() })
	if err != nil {
		t.Skipf("glfw.Init: %v", err)
	}
	defer onMain(glfw.Terminate)

	var win *glfw.Window
	onMain(func() {
		glfw.WindowHint(glfw.ClientAPI, glfw.NoAPI)
		glfw.WindowHint(glfw.Visible, glfw.False)
		win, err = glfw.CreateWindow(203, 117, "canvas test", nil, nil)
	})
	if err != nil {
		t.Fatalf("create window: %v", err)
	}
	defer onMain(win.Destroy)

	var c *Canvas
	onMain(func() {
		fw, fh := win.GetFramebufferSize()
		c, err = NewWindow(win, fw, fh)
	})
	if err != nil {
		skipOrFail(t, err)
	}
	defer onMain(c.Close)
	t.Logf("adapter: %s, surface format %v", c.AdapterName(), c.win.config.Format)

	w, h := c.Size()
	clear := Color{0, 0, 0, 1}
	quads := []Quad{{X0: 10, Y0: 10, X1: 50, Y1: 40, Color: Color{1, 1, 0, 1}}}
	for range 3 { // a few frames through the swapchain
		onMain(func() {
			glfw.PollEvents()
			err = c.Draw(clear, quads)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if c.win.presented == 0 {
		t.Error("no frame was presented to the window")
	}
	var got *image.RGBA
	onMain(func() { got, err = c.Capture() })
	if err != nil {
		t.Fatal(err)
	}
	want := image.NewRGBA(image.Rect(0, 0, w, h))
	fillRef(want, Quad{X1: float32(w), Y1: float32(h), Color: clear})
	fillRef(want, quads[0])
	compare(t, got, want, 0)

	onMain(func() { err = c.Resize(120, 80) })
	if err != nil {
		t.Fatal(err)
	}
	onMain(func() { err = c.Draw(clear, quads) })
	if err != nil {
		t.Fatal(err)
	}
	if w, h := c.Size(); w != 120 || h != 80 {
		t.Errorf("Size() = %dx%d after Resize(120, 80)", w, h)
	}
}
