// Package debugview draws the desktop app's live view of the engine: eight panels (slots,
// batch timeline, kernels, KV cache, throughput, next-token candidates, memory, attention)
// from the engine's snapshot feed, as quads for gpu/canvas. It keeps the little history the
// panels plot (pass records, throughput per second) and the user's selection; it never waits
// on the engine.
package debugview

import (
	"time"

	"github.com/wgpu-llama/wgpu-llama/debugview/glyphs"
	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gpu/canvas"
)

// Source is where the view reads the engine's state: engine.Feed, or a fake in tests.
type Source interface {
	Latest() (engine.Snapshot, bool)
	Passes(after uint64) []engine.PassRecord
	// Select names the slot whose candidates and attention the view shows; layer and head
	// pick the attention probe's (-1: the probe off, as when the attention strip is hidden).
	Select(slot, layer, head int)
}

// timelinePasses is how many passes the batch timeline shows.
const timelinePasses = 200

// throughputSpan is how long the throughput panel looks back, in one-second buckets.
const throughputSpan = 180

// View is the debug view's state between frames.
type View struct {
	src    Source
	snap   engine.Snapshot
	have   bool
	passes []engine.PassRecord // the newest timelinePasses
	last   uint64              // the newest pass taken from src

	// buckets are tokens per second of wall time, the newest last; bucketAt is the second the
	// newest covers.
	buckets  []bucket
	bucketAt int64

	selected      int // the slot the candidates and attention panels show
	layer, head   int // the attention panel's
	showAttention bool
	paused        bool

	slotRows []rect // where each slot's row was drawn, for clicks
	uiButton rect   // where the web UI button was drawn
	drawn    Drawn
}

// bucket is one second's tokens and the longest queue seen in it.
type bucket struct {
	prompt, gen int
	queue       int
}

// New returns a view of src.
func New(src Source) *View {
	v := &View{src: src, showAttention: true}
	v.reselect()
	return v
}

// Update takes the source's newest state unless the view is paused, and reports whether
// anything changed.
func (v *View) Update(now time.Time) bool {
	passes := v.TakePasses()
	return v.TakeSnapshot(now) || passes
}

// TakePasses takes the pass records since the last call (the timeline's and throughput's
// data), unless the view is paused, and reports whether there were any. The source keeps
// engine.PassHistory records: a caller that draws seldom still calls this often enough.
func (v *View) TakePasses() bool {
	if v.paused {
		return false
	}
	changed := false
	for _, r := range v.src.Passes(v.last) {
		v.last = r.Pass
		v.passes = append(v.passes, r)
		v.count(r)
		changed = true
	}
	if n := len(v.passes) - timelinePasses; n > 0 {
		v.passes = append(v.passes[:0], v.passes[n:]...)
	}
	return changed
}

// TakeSnapshot takes the source's newest snapshot unless the view is paused, and reports
// whether it is new. Snapshots cost their first reader (the slots' text, the candidates), so
// a caller takes one only when it will draw.
func (v *View) TakeSnapshot(now time.Time) bool {
	if v.paused {
		return false
	}
	changed := false
	if s, ok := v.src.Latest(); ok && (!v.have || s.Pass != v.snap.Pass || s.Time != v.snap.Time) {
		v.snap, v.have, changed = s, true, true
		v.noteQueue(s.Queue, now)
	}
	v.advance(now.Unix())
	return changed
}

// count adds a pass's tokens to its second's bucket.
func (v *View) count(r engine.PassRecord) {
	b := v.bucketFor(r.End.Unix())
	if b == nil {
		return
	}
	for _, s := range r.Shares {
		if s.Prompt {
			b.prompt += s.Tokens
		} else {
			b.gen += s.Tokens
		}
	}
}

// noteQueue records the queue length at now.
func (v *View) noteQueue(q int, now time.Time) {
	if b := v.bucketFor(now.Unix()); b != nil {
		b.queue = max(b.queue, q)
	}
}

// bucketFor returns second sec's bucket, adding empty ones up to it; nil when sec is older
// than the span kept.
func (v *View) bucketFor(sec int64) *bucket {
	v.advance(sec)
	i := len(v.buckets) - 1 - int(v.bucketAt-sec)
	if i < 0 || i >= len(v.buckets) {
		return nil
	}
	return &v.buckets[i]
}

// advance adds empty buckets up to second sec.
func (v *View) advance(sec int64) {
	if len(v.buckets) == 0 {
		v.buckets, v.bucketAt = append(v.buckets, bucket{}), sec
		return
	}
	for ; v.bucketAt < sec; v.bucketAt++ {
		v.buckets = append(v.buckets, bucket{})
	}
	if n := len(v.buckets) - throughputSpan; n > 0 {
		v.buckets = append(v.buckets[:0], v.buckets[n:]...)
	}
}

// Paused reports whether the view holds its picture (key P).
func (v *View) Paused() bool { return v.paused }

// TogglePause stops or resumes taking the engine's state.
func (v *View) TogglePause() { v.paused = !v.paused }

// ClickResult is what a click hit.
type ClickResult int

// What a click may hit.
const (
	ClickNone   ClickResult = iota
	ClickSlot               // a slot's row: the slot is now selected
	ClickOpenUI             // the header's web UI button: the app opens the browser
)

// Click handles a click at (x, y), in framebuffer pixels.
func (v *View) Click(x, y float32) ClickResult {
	if v.uiButton.contains(x, y) {
		return ClickOpenUI
	}
	for i, r := range v.slotRows {
		if r.contains(x, y) {
			v.selectSlot(v.snap.Slots[i].ID)
			return ClickSlot
		}
	}
	return ClickNone
}

// Busy reports whether the view's snapshot shows the engine working (false before the
// first).
func (v *View) Busy() bool { return v.have && !v.Idle() }

// Idle reports whether the engine was idle at the view's snapshot: no slot busy, nothing
// queued.
func (v *View) Idle() bool {
	if !v.have || v.snap.Queue > 0 {
		return false
	}
	for _, s := range v.snap.Slots {
		if s.State != engine.SlotIdle || s.Embedding {
			return false
		}
	}
	return true
}

// Key is a key the view reacts to.
type Key int

// The keys the view takes: slot selection, the attention panel's layer and head.
const (
	KeyNextSlot Key = iota
	KeyPrevSlot
	KeyLayerUp
	KeyLayerDown
	KeyHeadUp
	KeyHeadDown
	KeyAttention // shows or hides the attention panel's strip, turning the engine's probe on or off
)

// Press handles a key and reports whether the view changed.
func (v *View) Press(k Key) bool {
	n := max(1, len(v.snap.Slots))
	layers, heads := max(1, v.snap.Model.Layers), max(1, v.snap.Model.Heads)
	switch k {
	case KeyNextSlot:
		v.selectSlot((v.selected + 1) % n)
		return true
	case KeyPrevSlot:
		v.selectSlot((v.selected + n - 1) % n)
		return true
	case KeyLayerUp:
		v.layer = (v.layer + 1) % layers
	case KeyLayerDown:
		v.layer = (v.layer + layers - 1) % layers
	case KeyHeadUp:
		v.head = (v.head + 1) % heads
	case KeyHeadDown:
		v.head = (v.head + heads - 1) % heads
	case KeyAttention:
		v.showAttention = !v.showAttention
	default:
		return false
	}
	v.reselect()
	return true
}

func (v *View) selectSlot(i int) {
	v.selected = i
	v.reselect()
}

// reselect tells the source the selection; with the attention strip hidden the probe is off,
// so the engine copies no weights back.
func (v *View) reselect() {
	if v.showAttention {
		v.src.Select(v.selected, v.layer, v.head)
	} else {
		v.src.Select(v.selected, -1, -1)
	}
}

// Frame lays the panels out over a width×height framebuffer whose content scale is scale
// (framebuffer pixels per logical pixel) and returns the quads to draw, in order, over the
// background colour Background.
func (v *View) Frame(font *glyphs.Atlas, width, height int, scale float32) []canvas.Quad {
	p := &painter{font: font, u: max(scale, 0.5)}
	v.drawn = Drawn{Pass: v.snap.Pass, Width: width, Height: height}
	gap := 8 * p.u
	cols, rows := 4, 2
	cw := (float32(width) - gap*float32(cols+1)) / float32(cols)
	ch := (float32(height) - gap*float32(rows+1) - p.lineH() - 4*p.u) / float32(rows)
	top := p.lineH() + 4*p.u
	v.header(p, rect{gap, 2 * p.u, float32(width) - 2*gap, p.lineH()})
	panels := []struct {
		title string
		draw  func(*painter, rect)
	}{
		{"Slots", v.slotsPanel}, {"Batch timeline", v.timelinePanel}, {"Kernels", v.kernelsPanel}, {"KV cache", v.kvPanel},
		{"Throughput", v.throughputPanel}, {"Next token", v.candidatesPanel}, {"Memory", v.memoryPanel}, {"Attention", v.attentionPanel},
	}
	for i, pn := range panels {
		r := rect{gap + float32(i%cols)*(cw+gap), top + gap + float32(i/cols)*(ch+gap), cw, ch}
		v.drawn.Panels = append(v.drawn.Panels, Region{Title: pn.title, X: int(r.x), Y: int(r.y), W: int(r.w), H: int(r.h)})
		pn.draw(p, r)
	}
	return p.quads
}

// Background is the colour frames are drawn over.
var Background = background

// Drawn returns what the last frame showed, in numbers (the app writes it beside a
// screenshot).
func (v *View) Drawn() Drawn { return v.drawn }

// Loading is the frame shown before the engine has loaded: the server's address once it
// listens.
func Loading(font *glyphs.Atlas, width, height int, scale float32, url string) []canvas.Quad {
	p := &painter{font: font, u: max(scale, 0.5)}
	msg := "starting the server…"
	if url != "" {
		msg = "loading the model · the server listens on " + url
	}
	w := p.font.Width(msg)
	p.text((float32(width)-w)/2, float32(height)/2-p.lineH()/2, 0, msg, textMain)
	return p.quads
}
