package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"github.com/go-gl/glfw/v3.4/glfw"

	"github.com/wgpu-llama/wgpu-llama/cmd/internal/cli"
	"github.com/wgpu-llama/wgpu-llama/debugview"
	"github.com/wgpu-llama/wgpu-llama/debugview/glyphs"
	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gpu/canvas"
)

// frameInterval caps redraws at 60 a second; between changes the loop sleeps in GLFW's event
// wait, so an idle window costs next to nothing.
const frameInterval = time.Second / 60

// busyShare bounds the share of time frames take while the engine works: the view must not
// slow it (by more than 2%), and on a software adapter the window's frames run on the same
// cores as the engine's kernels. A frame that costs 1 ms allows 60 a second; one that costs
// 40 ms (lavapipe) one every 8 seconds, until the engine is idle again.
const busyShare = 0.005

// profileEvery is how often the kernels panel's pass is profiled: a profiled pass stamps every
// dispatch and runs slower, so seldom enough to cost the engine little.
const profileEvery = 3 * time.Second

// passesEvery is how often the view takes the engine's pass records between frames: the feed
// keeps the last engine.PassHistory, a few seconds' worth at the busiest.
const passesEvery = 250 * time.Millisecond

// fontSize is the text size in logical pixels.
const fontSize = 13

// app is the window, its canvas and the view, owned by the main thread.
type app struct {
	opts          desktopOptions
	win           *glfw.Window
	cv            *canvas.Canvas
	font          *glyphs.Atlas
	scale         float32
	view          *debugview.View
	feed          *engine.Feed
	url           string
	dirty         bool
	logger        *log.Logger
	glfw          bool // initialised
	wake          waker
	serverDone    bool // the loop took the server's result (serverErr)
	serverErr     error
	frames        int           // drawn, for the log at exit
	busyTime      time.Duration // the engine's busy time, as the view saw it
	busyDraw      time.Duration // the frames' time within it
	drawCost      time.Duration // a frame's recent cost (building and drawing it), smoothed
	router        *routerWatch  // in router mode
	routerChanged atomic.Bool
}

// runDesktop serves in the background and runs the window on this (the main) thread until
// the window closes, ctx ends, the server stops or a --screenshot is taken; then it shuts the
// server down and waits for it.
func runDesktop(ctx context.Context, opts desktopOptions, serveArgs []string) error {
	a := &app{opts: opts, logger: log.NewWithOptions(os.Stderr, log.Options{Prefix: "desktop", ReportTimestamp: true})}
	if err := a.open(); err != nil {
		a.close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	urls, feeds, routed := make(chan string, 1), make(chan *engine.Feed, 1), make(chan struct{}, 1)
	served := make(chan error, 1)
	go func() {
		served <- cli.Serve(ctx, serveArgs, os.Stderr, cli.ServeHooks{
			Listening: func(url string) { urls <- url; a.wake.post() },
			Engine: func(e *engine.Engine) {
				// the feed starts here, before the first request, so that the view sees every pass
				f := e.Feed()
				f.ProfileEvery(profileEvery)
				feedSource{f}.Select(0, 0, 0) // the view's first selection
				feeds <- f
				a.wake.post()
			},
			Router: func() { routed <- struct{}{} },
		})
	}()
	started := time.Now()
	err := a.loop(ctx, urls, feeds, routed, served)
	share := 0.0
	if a.busyTime > 0 {
		share = 100 * float64(a.busyDraw) / float64(a.busyTime)
	}
	// what the view took while the engine worked: on a software adapter, time the engine's
	// kernels did not get
	a.logger.Info("window closed", "frames", a.frames, "fps", fmt.Sprintf("%.1f", float64(a.frames)/time.Since(started).Seconds()),
		"frame_cost", a.drawCost.Round(time.Microsecond), "engine_busy", a.busyTime.Round(time.Millisecond), "busy_draw_share", fmt.Sprintf("%.2f%%", share))
	a.close()
	cancel()
	if !a.serverDone {
		a.serverErr = <-served
	}
	if serr := a.serverErr; serr != nil && !errors.Is(serr, context.Canceled) && err == nil {
		err = serr
	}
	return err
}

// waker wakes the main thread's event wait from other goroutines, and stops doing so before
// GLFW is terminated (posting then would fail).
type waker struct {
	mu   sync.RWMutex
	live bool
}

func (w *waker) post() {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.live {
		glfw.PostEmptyEvent()
	}
}

func (w *waker) set(live bool) {
	w.mu.Lock()
	w.live = live
	w.mu.Unlock()
}

// open creates the window and its canvas.
func (a *app) open() error {
	if err := glfw.Init(); err != nil {
		return fmt.Errorf("desktop: opening a window: %w", err)
	}
	a.glfw = true
	a.wake.set(true)
	glfw.WindowHint(glfw.ClientAPI, glfw.NoAPI) // wgpu draws, not OpenGL
	glfw.WindowHint(glfw.ScaleToMonitor, glfw.True)
	win, err := glfw.CreateWindow(a.opts.width, a.opts.height, "wgpu-llama", nil, nil)
	if err != nil {
		return fmt.Errorf("desktop: creating the window: %w", err)
	}
	a.win = win
	fw, fh := win.GetFramebufferSize()
	if a.cv, err = canvas.NewWindow(win, fw, fh); err != nil {
		return fmt.Errorf("desktop: drawing on the window: %w", err)
	}
	if err := a.setScale(); err != nil {
		return err
	}
	win.SetFramebufferSizeCallback(func(_ *glfw.Window, w, h int) {
		if w > 0 && h > 0 {
			if err := a.cv.Resize(w, h); err != nil {
				a.logger.Error("resize", "err", err)
			}
			a.dirty = true
		}
	})
	win.SetContentScaleCallback(func(*glfw.Window, float32, float32) {
		if err := a.setScale(); err != nil {
			a.logger.Error("content scale", "err", err)
		}
	})
	win.SetKeyCallback(a.key)
	win.SetMouseButtonCallback(a.mouse)
	win.SetRefreshCallback(func(*glfw.Window) { a.dirty = true })
	a.dirty = true
	return nil
}

// setScale rebuilds the font for the window's content scale (HiDPI).
func (a *app) setScale() error {
	sx, _ := a.win.GetContentScale()
	a.scale = max(sx, 1)
	font, err := glyphs.New(fontSize * float64(a.scale))
	if err != nil {
		return err
	}
	a.font, a.dirty = font, true
	return a.cv.SetAtlas(font.Image)
}

// loop draws on change until the window closes or the app is done.
func (a *app) loop(ctx context.Context, urls <-chan string, feeds <-chan *engine.Feed, routed <-chan struct{}, served <-chan error) error {
	var lastDraw, lastPasses, lastLoop time.Time
	for !a.win.ShouldClose() {
		select {
		case <-ctx.Done():
			return nil
		case err := <-served:
			a.serverDone = true
			if ctx.Err() != nil { // it stopped for the same reason as the window
				a.serverErr = err
				return nil
			}
			// the server stopped on its own (a bad flag, a failed load): show nothing more
			if err == nil {
				err = errors.New("the server stopped")
			}
			return err
		case a.url = <-urls:
			a.dirty = true
			a.watchRouter(ctx)
		case <-routed:
			a.router = &routerWatch{}
			a.watchRouter(ctx)
		case f := <-feeds:
			a.attach(f)
		default:
		}
		now := time.Now()
		busy := a.busy()
		if busy && !lastLoop.IsZero() {
			a.busyTime += now.Sub(lastLoop)
		}
		lastLoop = now
		due := now.Sub(lastDraw) >= a.interval()
		if a.view != nil {
			// Records are taken often enough that none is lost, the snapshot only for a frame.
			if (due || now.Sub(lastPasses) >= passesEvery) && a.view.TakePasses() {
				a.dirty, lastPasses = true, now
			}
			if due && a.view.TakeSnapshot(now) {
				a.dirty = true
			}
		}
		if a.routerChanged.Swap(false) {
			a.dirty = true
		}
		if a.dirty && due {
			if err := a.draw(); err != nil {
				return err
			}
			cost := time.Since(now)
			a.drawCost = (3*a.drawCost + cost) / 4
			if busy {
				a.busyDraw += cost
			}
			lastDraw, a.dirty = now, false
			a.frames++
			if done, err := a.screenshotDue(); done || err != nil {
				return err
			}
		}
		wait := time.Second // the throughput panel moves on every second
		if a.dirty {
			wait = max(a.interval()-time.Since(lastDraw), time.Millisecond)
		}
		glfw.WaitEventsTimeout(wait.Seconds())
	}
	return nil
}

// interval is the least time between frames: frameInterval, or while the engine works as
// long as busyShare allows for the frames' cost.
func (a *app) interval() time.Duration {
	if !a.busy() {
		return frameInterval
	}
	return max(frameInterval, time.Duration(float64(a.drawCost)/busyShare))
}

// busy reports whether the view's last snapshot showed the engine working.
func (a *app) busy() bool { return a.view != nil && a.view.Busy() }

// watchRouter starts polling the router's models once both router mode and the address are
// known (the server reports them in that order, but the loop may take them in either).
func (a *app) watchRouter(ctx context.Context) {
	if a.router == nil || a.url == "" || a.router.started {
		return
	}
	a.router.started = true
	go a.router.run(ctx, a.url, func() { a.routerChanged.Store(true); a.wake.post() })
}

// attach starts showing the engine's feed, which wakes the window's event wait on every
// snapshot.
func (a *app) attach(f *engine.Feed) {
	a.feed = f
	a.view = debugview.New(feedSource{a.feed})
	changed := a.feed.Changed()
	go func() {
		for range changed {
			a.wake.post()
		}
	}()
	a.dirty = true
}

// draw renders one frame.
func (a *app) draw() error {
	w, h := a.cv.Size()
	if a.router != nil && a.url != "" {
		var models []debugview.RouterModel
		if m := a.router.models.Load(); m != nil {
			models = *m
		}
		return a.cv.Draw(debugview.Background, debugview.RouterFrame(a.font, w, h, a.scale, a.url, models))
	}
	if a.view == nil {
		return a.cv.Draw(debugview.Background, debugview.Loading(a.font, w, h, a.scale, a.url))
	}
	return a.cv.Draw(debugview.Background, a.view.Frame(a.font, w, h, a.scale))
}

// key handles the keyboard.
func (a *app) key(_ *glfw.Window, key glfw.Key, _ int, action glfw.Action, _ glfw.ModifierKey) {
	if action == glfw.Release {
		return
	}
	switch key {
	case glfw.KeyP:
		if a.view != nil && action == glfw.Press {
			a.view.TogglePause()
			a.dirty = true
		}
	case glfw.KeyF12:
		if action == glfw.Press {
			name := "wgpu-llama-" + time.Now().Format("20060102-150405") + ".png"
			if err := a.savePNG(name); err != nil {
				a.logger.Error("screenshot", "err", err)
			} else {
				a.logger.Info("screenshot saved", "file", name)
			}
		}
	case glfw.KeyO:
		if action == glfw.Press {
			a.openUI()
		}
	case glfw.KeyEscape:
		a.win.SetShouldClose(true)
	default:
		k, ok := map[glfw.Key]debugview.Key{
			glfw.KeyTab: debugview.KeyNextSlot, glfw.KeyUp: debugview.KeyLayerUp, glfw.KeyDown: debugview.KeyLayerDown,
			glfw.KeyRight: debugview.KeyHeadUp, glfw.KeyLeft: debugview.KeyHeadDown, glfw.KeyA: debugview.KeyAttention,
		}[key]
		if ok && a.view != nil && a.view.Press(k) {
			a.dirty = true
		}
	}
}

// mouse selects the slot clicked, or opens the web UI from the header's button.
func (a *app) mouse(w *glfw.Window, button glfw.MouseButton, action glfw.Action, _ glfw.ModifierKey) {
	if button != glfw.MouseButtonLeft || action != glfw.Press || a.view == nil {
		return
	}
	cx, cy := w.GetCursorPos()
	ww, _ := w.GetSize()
	fw, _ := w.GetFramebufferSize()
	f := float32(fw) / float32(max(ww, 1)) // cursor positions are in window coordinates
	switch a.view.Click(float32(cx)*f, float32(cy)*f) {
	case debugview.ClickOpenUI:
		a.openUI()
	case debugview.ClickSlot:
		a.dirty = true
	}
}

// openUI opens the server's web UI in the system's browser.
func (a *app) openUI() {
	if a.url == "" {
		return
	}
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", a.url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", a.url)
	default:
		cmd = exec.Command("xdg-open", a.url)
	}
	if err := cmd.Start(); err != nil {
		a.logger.Error("opening the web UI", "url", a.url, "err", err)
		return
	}
	go cmd.Wait()
}

// savePNG writes the last frame to name.
func (a *app) savePNG(name string) error {
	img, err := a.cv.Capture()
	if err != nil {
		return err
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// screenshotDue takes --screenshot once the engine has run --after passes and is idle again
// (so that the numbers drawn are the ones /slots and /metrics answer), and reports whether the
// app is done.
func (a *app) screenshotDue() (bool, error) {
	if a.opts.screenshot == "" {
		return false, nil
	}
	if a.router != nil {
		// a router runs no forward passes itself: the shot is of its model list, once drawn
		m := a.router.models.Load()
		if m == nil {
			return false, nil
		}
		return true, a.saveShot(routerShot{Router: true, Models: *m})
	}
	if a.view == nil {
		return false, nil
	}
	d := a.view.Drawn()
	if d.Pass < a.opts.after || !a.view.Idle() {
		return false, nil
	}
	out := shotRecord{Drawn: d}
	out.Server.Slots, out.Server.Metrics = a.fetch("/slots"), string(a.fetch("/metrics"))
	return true, a.saveShot(out)
}

// routerShot is the JSON beside a router mode --screenshot.
type routerShot struct {
	Router bool                    `json:"router"`
	Models []debugview.RouterModel `json:"models"`
}

// saveShot writes --screenshot's PNG and, beside it, record as JSON.
func (a *app) saveShot(record any) error {
	if err := a.savePNG(a.opts.screenshot); err != nil {
		return err
	}
	data, err := json.MarshalIndent(record, "", "  ")
	if err != nil {
		return err
	}
	name := strings.TrimSuffix(a.opts.screenshot, ".png") + ".json"
	if err := os.WriteFile(name, data, 0o644); err != nil {
		return err
	}
	a.logger.Info("screenshot saved", "file", a.opts.screenshot, "drawn", name)
	return nil
}

// shotRecord is the JSON written beside a --screenshot: what the frame drew, and what the
// server answered at that moment.
type shotRecord struct {
	debugview.Drawn
	Server struct {
		Slots   json.RawMessage `json:"slots"`
		Metrics string          `json:"metrics"`
	} `json:"server"`
}

// fetch GETs a path of the server (null when it does not answer 200).
func (a *app) fetch(path string) []byte {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(a.url + path)
	if err != nil {
		return []byte("null")
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return []byte("null")
	}
	return body
}

// close releases the canvas and the window.
func (a *app) close() {
	if a.feed != nil {
		a.feed.ProfileEvery(0)
	}
	if a.cv != nil {
		a.cv.Close()
	}
	a.wake.set(false)
	if a.win != nil {
		a.win.Destroy()
		a.win = nil
	}
	if a.glfw {
		glfw.Terminate()
		a.glfw = false
	}
}

// feedSource adapts the engine's feed to the view's Source.
type feedSource struct{ f *engine.Feed }

func (s feedSource) Latest() (engine.Snapshot, bool)         { return s.f.Latest() }
func (s feedSource) Passes(after uint64) []engine.PassRecord { return s.f.Passes(after) }
func (s feedSource) Select(slot, layer, head int) {
	s.f.Select(slot)
	if layer < 0 {
		s.f.Probe(-1, 0, 0)
		return
	}
	s.f.Probe(slot, layer, head)
}
