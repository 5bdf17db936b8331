package debugview

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/debugview/glyphs"
	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gpu/canvas"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// fakeFeed is an engine stand-in: a snapshot, pass records and the selection asked for.
type fakeFeed struct {
	snap              engine.Snapshot
	passes            []engine.PassRecord
	slot, layer, head int
	selects           int
}

func (f *fakeFeed) Latest() (engine.Snapshot, bool) { return f.snap, f.snap.Pass > 0 }

func (f *fakeFeed) Passes(after uint64) []engine.PassRecord {
	var out []engine.PassRecord
	for _, r := range f.passes {
		if r.Pass > after {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeFeed) Select(slot, layer, head int) {
	f.slot, f.layer, f.head = slot, layer, head
	f.selects++
}

// busyFeed is four slots mid-generation after 120 passes at 100 a second.
func busyFeed(start time.Time) *fakeFeed {
	f := &fakeFeed{}
	for i := range 120 {
		rec := engine.PassRecord{Pass: uint64(i + 1), End: start.Add(time.Duration(i) * 10 * time.Millisecond), Duration: time.Duration(3+i%4) * time.Millisecond}
		for s := range 4 {
			rec.Shares = append(rec.Shares, engine.PassShare{Slot: s, Tokens: 1 + 6*((i+s)%7/6), Prompt: (i+s)%7 == 6})
		}
		f.passes = append(f.passes, rec)
	}
	owner := make([]int32, 64)
	for i := range owner {
		owner[i] = int32(i%6) - 1 // in turn: free, slots 0..3, and the prompt cache
		if i%6 == 5 {
			owner[i] = -2
		}
	}
	f.snap = engine.Snapshot{
		Model: engine.ModelShape{Name: "stories260K", Layers: 5, Heads: 8},
		Pass:  120, Time: start.Add(1200 * time.Millisecond), Queue: 2,
		KV:    engine.KVView{PageRows: 16, Owner: owner, Shared: make([]bool, 64), Used: 700, Capacity: 1024},
		Stats: engine.Stats{PromptTokens: 90, PredictedTokens: 310, Decodes: 120, KVTokens: 700},
		Kernels: []engine.KernelView{
			{Family: "matvec", Calls: 21, Time: 900 * time.Microsecond, Bytes: 1 << 20},
			{Family: "rms_norm", Calls: 11, Time: 200 * time.Microsecond, Bytes: 1 << 16},
		},
		KernelsAt: 118,
		Memory:    engine.MemoryView{Weights: map[string]uint64{"F32": 1 << 20}, KV: 1 << 19, Scratch: 1 << 16, MaxBuffer: 1 << 30, MaxBinding: 1 << 27, DeviceName: "fake"},
		Attention: &engine.Attention{Slot: 0, Layer: 0, Head: 0, Pass: 120, Weights: []float32{0.1, 0.5, 0.15, 0.25}},
	}
	f.snap.KV.Shared[1] = true
	for s := range 4 {
		f.snap.Slots = append(f.snap.Slots, engine.SlotView{ID: s, State: engine.SlotGenerating, Task: 10 + s, Tokens: 40 + s, Prompt: 8, Decoded: 32 + s, Context: 256,
			Tail: fmt.Sprintf("Once upon a time, slot %d\nsaw a dog", s), Top: []engine.Candidate{{Token: " the", P: 0.6}, {Token: " a", P: 0.3}}, TopToken: " the"})
	}
	return f
}

func TestViewDrawsWhatTheFeedHolds(t *testing.T) {
	font, err := glyphs.New(13)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_800_000_000, 0)
	f := busyFeed(start)
	v := New(f)
	if f.slot != 0 || f.layer != 0 || f.head != 0 || f.selects != 1 {
		t.Fatalf("New selected slot %d layer %d head %d (%d calls)", f.slot, f.layer, f.head, f.selects)
	}
	if !v.Update(start.Add(1300*time.Millisecond)) || v.Update(start.Add(1300*time.Millisecond)) {
		t.Fatal("Update reported no change with new passes, or a change without any")
	}
	if v.Idle() {
		t.Error("busy slots read as idle")
	}
	quads := v.Frame(font, 1600, 960, 1)
	d := v.Drawn()
	if len(quads) < 500 || d.Pass != 120 || len(d.Panels) != 8 {
		t.Fatalf("%d quads, pass %d, %d panels", len(quads), d.Pass, len(d.Panels))
	}
	// every quad inside the frame, every panel with quads of its own
	perPanel := make([]int, len(d.Panels))
	for _, q := range quads {
		if q.X0 < 0 || q.Y0 < 0 || q.X1 > 1600 || q.Y1 > 960 || q.X1 <= q.X0 || q.Y1 <= q.Y0 {
			t.Fatalf("quad outside the frame or empty: %+v", q)
		}
		for i, pn := range d.Panels {
			if q.X0 >= float32(pn.X) && q.X1 <= float32(pn.X+pn.W+1) && q.Y0 >= float32(pn.Y) && q.Y1 <= float32(pn.Y+pn.H+1) {
				perPanel[i]++
			}
		}
	}
	for i, n := range perPanel {
		if n < 10 {
			t.Errorf("panel %q has %d quads", d.Panels[i].Title, n)
		}
	}
	if len(d.Slots) != 4 || d.Slots[2].Tokens != 42 || d.Slots[2].State != "generating" || d.Slots[2].Task != 12 {
		t.Errorf("slots drawn %+v", d.Slots)
	}
	if d.KV.Pages != 64 || d.KV.FreePages != 11 || d.KV.CachedPages != 10 || d.KV.SharedPages != 1 || d.KV.PagesBySlot[0] != 11 || d.KV.PagesBySlot[3] != 10 || d.KV.Used != 700 {
		t.Errorf("KV drawn %+v", d.KV)
	}
	if d.TimelinePasses != 120 || d.Kernels != 2 || len(d.Candidates) != 2 || d.Candidates[0].P != 0.6 || d.Attention == nil || d.Attention.Positions != 4 {
		t.Errorf("timeline %d, kernels %d, candidates %+v, attention %+v", d.TimelinePasses, d.Kernels, d.Candidates, d.Attention)
	}
	if d.Totals != (DrawnTotals{PromptTokens: 90, PredictedTokens: 310, Decodes: 120, KVTokens: 700}) {
		t.Errorf("totals %+v", d.Totals)
	}
	// the last full second held passes 1..100: 4 slots a pass, a 7-token prompt chunk for one
	// pass in seven of each slot's
	if th := d.Throughput; th.Seconds != 1 || th.Prompt+th.Generation == 0 || th.Queue != 2 {
		t.Errorf("throughput %+v", th)
	}
	if d.MemoryBytes != 1<<20+1<<19+1<<16 {
		t.Errorf("memory %d", d.MemoryBytes)
	}
}

func TestViewInput(t *testing.T) {
	font, err := glyphs.New(13)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_800_000_000, 0)
	f := busyFeed(start)
	v := New(f)
	v.Update(start)
	v.Frame(font, 1600, 960, 1)
	r := v.slotRows[2]
	if got := v.Click(r.x+5, r.y+5); got != ClickSlot || f.slot != 2 {
		t.Errorf("click on slot 2's row: %v, selected %d", got, f.slot)
	}
	if got := v.Click(v.uiButton.x+1, v.uiButton.y+1); got != ClickOpenUI {
		t.Errorf("click on the web UI button: %v", got)
	}
	if got := v.Click(1599, 959); got != ClickNone {
		t.Errorf("click on nothing: %v", got)
	}
	v.Press(KeyNextSlot)
	v.Press(KeyNextSlot)
	if f.slot != 0 {
		t.Errorf("Tab twice from slot 2 of 4: slot %d", f.slot)
	}
	v.Press(KeyLayerDown)
	v.Press(KeyHeadDown)
	v.Press(KeyHeadDown)
	if f.layer != 4 || f.head != 6 {
		t.Errorf("layer %d head %d, want 4 and 6 (wrapping below 0)", f.layer, f.head)
	}
	// hiding the attention strip turns the probe off; showing it asks for the same again
	v.Press(KeyAttention)
	if f.layer != -1 || f.head != -1 || f.slot != 0 {
		t.Errorf("attention hidden: slot %d layer %d head %d", f.slot, f.layer, f.head)
	}
	v.Frame(font, 1600, 960, 1)
	if v.Drawn().Attention != nil {
		t.Error("a hidden strip was drawn")
	}
	v.Press(KeyAttention)
	if f.layer != 4 || f.head != 6 {
		t.Errorf("attention shown again: layer %d head %d", f.layer, f.head)
	}
	// paused, the view keeps its picture
	v.TogglePause()
	f.snap.Pass, f.snap.Queue = 121, 0
	if v.Update(start.Add(time.Second)) || v.snap.Pass != 120 {
		t.Error("a paused view took a new snapshot")
	}
	v.TogglePause()
	for i := range f.snap.Slots {
		f.snap.Slots[i].State = engine.SlotIdle
	}
	if !v.Update(start.Add(time.Second)) || !v.Idle() {
		t.Error("after resuming: no update, or idle slots not idle")
	}
}

// TestViewRendersEveryPanel draws a frame on an offscreen canvas and checks that every panel's
// region holds drawn pixels besides its fill.
func TestViewRendersEveryPanel(t *testing.T) {
	cv, err := canvas.NewOffscreen(1280, 800)
	if errors.Is(err, canvas.ErrNoAdapter) && os.Getenv(gputest.RequireEnv) == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer cv.Close()
	font, err := glyphs.New(12)
	if err != nil {
		t.Fatal(err)
	}
	if err := cv.SetAtlas(font.Image); err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_800_000_000, 0)
	v := New(busyFeed(start))
	v.Update(start.Add(1300 * time.Millisecond))
	if err := cv.Draw(Background, v.Frame(font, 1280, 800, 1)); err != nil {
		t.Fatal(err)
	}
	img, err := cv.Capture()
	if err != nil {
		t.Fatal(err)
	}
	for _, pn := range v.Drawn().Panels {
		fill, other := 0, 0
		for y := pn.Y + 2; y < pn.Y+pn.H-2; y++ {
			for x := pn.X + 2; x < pn.X+pn.W-2; x++ {
				c := img.RGBAAt(x, y)
				if c.R == to8(panelFill.R) && c.G == to8(panelFill.G) && c.B == to8(panelFill.B) {
					fill++
				} else {
					other++
				}
			}
		}
		if fill == 0 || float64(other)/float64(fill+other) < 0.02 {
			t.Errorf("panel %q: %d fill pixels, %d drawn", pn.Title, fill, other)
		}
	}
}

func to8(v float32) uint8 { return uint8(v*255 + 0.5) }
