package debugview

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gpu/canvas"
)

// header draws the line above the panels: the model, the pass, the keys.
func (v *View) header(p *painter, r rect) {
	s := v.snap
	left := fmt.Sprintf("wgpu-llama · %s · pass %d · queue %d", s.Model.Name, s.Pass, s.Queue)
	if v.paused {
		left += " · PAUSED"
	}
	p.text(r.x, r.y, r.w/2, left, textMain)
	label := "Open web UI (O)"
	bw := p.font.Width(label) + 12*p.u
	v.uiButton = rect{r.x + r.w - bw, r.y, bw, p.lineH() + 2*p.u}
	p.fill(v.uiButton, canvas.Color{R: 0.20, G: 0.30, B: 0.48, A: 1})
	p.text(v.uiButton.x+6*p.u, r.y+p.u, 0, label, textMain)
	p.textRight(v.uiButton.x-10*p.u, r.y+p.u, "click or Tab: slot · arrows: layer, head · A attention · P pause · F12 PNG", textDim)
}

// slotsPanel (1): each slot's state, tokens, context use, text tail and adapters.
func (v *View) slotsPanel(p *painter, r rect) {
	area := p.frame(r, "Slots", fmt.Sprintf("%d slots", len(v.snap.Slots)))
	v.slotRows = v.slotRows[:0]
	n := len(v.snap.Slots)
	if n == 0 {
		p.text(area.x, area.y, area.w, "no slots yet", textDim)
		return
	}
	rowH := min(area.h/float32(n), 4*p.lineH()+6*p.u)
	for i, sl := range v.snap.Slots {
		row := rect{area.x, area.y + float32(i)*rowH, area.w, rowH - 2*p.u}
		v.slotRows = append(v.slotRows, row)
		if i == v.selected {
			p.fill(row, canvas.Color{R: 0.17, G: 0.18, B: 0.22, A: 1})
		}
		p.fill(rect{row.x, row.y, 4 * p.u, row.h}, slotColor(sl.ID))
		x, y := row.x+8*p.u, row.y+p.u
		state := sl.State.String()
		if sl.Embedding {
			state = "embedding"
		}
		task := "no task"
		if sl.Task >= 0 {
			task = fmt.Sprintf("task %d", sl.Task)
		}
		p.text(x, y, row.w-8*p.u, fmt.Sprintf("slot %d  %s  %s", sl.ID, state, task), textMain)
		y += p.lineH()
		p.text(x, y, row.w-8*p.u, fmt.Sprintf("%d / %d tokens  prompt %d  generated %d", sl.Tokens, sl.Context, sl.Prompt, sl.Decoded), textDim)
		y += p.lineH()
		bar := rect{x, y + p.u, row.w - 10*p.u, 3 * p.u}
		p.fill(bar, freeCell)
		if sl.Context > 0 {
			p.fill(rect{bar.x, bar.y, bar.w * min(1, float32(sl.Tokens)/float32(sl.Context)), bar.h}, slotColor(sl.ID))
		}
		y += 5 * p.u
		tail := strings.Map(func(r rune) rune {
			if r == '\n' || r == '\t' || r == '\r' {
				return ' '
			}
			return r
		}, sl.Tail)
		if len(sl.Lora) > 0 {
			tail = "lora " + formatScales(sl.Lora) + " | " + tail
		}
		if row.y+row.h-y >= p.lineH() {
			p.text(x, y, row.w-10*p.u, tail, textDim)
		}
		v.drawn.Slots = append(v.drawn.Slots, DrawnSlot{ID: sl.ID, State: state, Task: sl.Task, Tokens: sl.Tokens, Context: sl.Context, Decoded: sl.Decoded})
	}
}

func formatScales(s []float32) string {
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ",")
}

// timelinePanel (2): the last passes' tokens per slot as stacked bars, and each pass's
// duration as a line over them.
func (v *View) timelinePanel(p *painter, r rect) {
	area := p.frame(r, "Batch timeline", fmt.Sprintf("last %d passes", len(v.passes)))
	maxTok, maxDur := 1, time.Duration(0)
	for _, rec := range v.passes {
		n := 0
		for _, s := range rec.Shares {
			n += s.Tokens
		}
		maxTok, maxDur = max(maxTok, n), max(maxDur, rec.Duration)
	}
	yMax := niceMax(float64(maxTok))
	plot := p.axes(area, "pass", "tokens", yMax, "%.0f")
	msMax := niceMax(float64(maxDur) / 1e6)
	p.textRight(plot.x+plot.w, area.y, fmt.Sprintf("line: ms per pass (max %g)", msMax), accent)
	v.drawn.TimelinePasses = len(v.passes)
	if len(v.passes) == 0 {
		return
	}
	bw := plot.w / timelinePasses
	x0 := plot.x + plot.w - bw*float32(len(v.passes))
	for i, rec := range v.passes {
		x, y := x0+bw*float32(i), plot.y+plot.h
		for _, s := range rec.Shares {
			h := plot.h * float32(float64(s.Tokens)/yMax)
			y -= h
			c := slotColor(s.Slot)
			if !s.Prompt {
				c.A = 0.65 // generated tokens lighter than prompt chunks
			}
			p.fill(rect{x, y, max(bw-0.5*p.u, 1), h}, c)
		}
		dy := plot.y + plot.h - plot.h*float32(float64(rec.Duration)/1e6/msMax)
		p.fill(rect{x, dy - p.u, max(bw, 1), 2 * p.u}, accent)
	}
}

// kernelsPanel (3): GPU time per kernel family of the last profiled pass, with GB/s.
func (v *View) kernelsPanel(p *painter, r rect) {
	how := "CPU-timed"
	if v.snap.Memory.GPUTimestamp {
		how = "GPU timestamps"
	}
	ks := v.snap.Kernels
	note := how
	if v.snap.KernelsAt > 0 {
		note = fmt.Sprintf("pass %d, %s", v.snap.KernelsAt, how)
	}
	area := p.frame(r, "Kernels", note)
	v.drawn.Kernels = len(ks)
	if len(ks) == 0 {
		p.text(area.x, area.y, area.w, "no pass profiled yet", textDim)
		return
	}
	var total time.Duration
	for _, k := range ks {
		total += k.Time
	}
	top := float64(ks[0].Time)
	nameW := float32(0)
	for _, k := range ks {
		nameW = max(nameW, p.font.Width(k.Family))
	}
	nameW += 6 * p.u
	rowH := min((area.h-p.lineH())/float32(len(ks)), 1.4*p.lineH())
	valueW := p.font.Width("00.000 ms  0000.0 GB/s")
	for i, k := range ks {
		y := area.y + float32(i)*rowH
		if y+rowH > area.y+area.h-p.lineH() {
			break
		}
		p.text(area.x, y, nameW, k.Family, textMain)
		barW := (area.w - nameW - valueW) * float32(float64(k.Time)/top)
		p.fill(rect{area.x + nameW, y + 2*p.u, barW, rowH - 4*p.u}, slotColors[0])
		gbs := 0.0
		if k.Time > 0 {
			gbs = float64(k.Bytes) / k.Time.Seconds() / 1e9
		}
		p.textRight(area.x+area.w, y, fmt.Sprintf("%.3f ms  %.1f GB/s", float64(k.Time)/1e6, gbs), textDim)
	}
	p.text(area.x, area.y+area.h-p.lineH(), area.w, fmt.Sprintf("total %.3f ms over %d families (bar: time)", float64(total)/1e6, len(ks)), textDim)
}

// kvPanel (4): every KV cache page as a cell coloured by its slot.
func (v *View) kvPanel(p *painter, r rect) {
	kv := v.snap.KV
	pct := 0.0
	if kv.Capacity > 0 {
		pct = 100 * float64(kv.Used) / float64(kv.Capacity)
	}
	area := p.frame(r, "KV cache", fmt.Sprintf("%d / %d rows (%.1f%%)", kv.Used, kv.Capacity, pct))
	d := DrawnKV{Used: kv.Used, Capacity: kv.Capacity, Pages: len(kv.Owner), PagesBySlot: map[int]int{}}
	legend := area.y + area.h - p.lineH()
	n := len(kv.Owner)
	if n > 0 {
		// the largest square cells that fit the pages in the area above the legend
		h := legend - area.y - 2*p.u
		cell := float32(1)
		for c := min(area.w, h); c >= 1; c-- {
			perRow := int(area.w / c)
			if perRow > 0 && float32((n+perRow-1)/perRow)*c <= h {
				cell = c
				break
			}
		}
		perRow := max(1, int(area.w/cell))
		gapPx := float32(0)
		if cell >= 6*p.u {
			gapPx = p.u
		}
		for i, owner := range kv.Owner {
			c := freeCell
			switch {
			case owner >= 0:
				c = slotColor(int(owner))
				d.PagesBySlot[int(owner)]++
			case owner == -2:
				c = cachedCell
				d.CachedPages++
			default:
				d.FreePages++
			}
			x, y := area.x+float32(i%perRow)*cell, area.y+float32(i/perRow)*cell
			p.fill(rect{x, y, cell - gapPx, cell - gapPx}, c)
			if i < len(kv.Shared) && kv.Shared[i] {
				d.SharedPages++
				m := (cell - gapPx) / 3
				p.fill(rect{x + m, y + m, m, m}, textMain)
			}
		}
	}
	v.drawn.KV = d
	p.text(area.x, legend, area.w, fmt.Sprintf("%d pages of %d rows · %d free · %d shared · %d cached", n, kv.PageRows, d.FreePages, d.SharedPages, d.CachedPages), textDim)
}

// throughputPanel (5): prompt and generation tokens per second, and the queue, per second
// over the last minutes.
func (v *View) throughputPanel(p *painter, r rect) {
	bs := v.buckets
	if len(bs) > 0 {
		bs = bs[:len(bs)-1] // the current second is still filling
	}
	last := bucket{}
	if len(bs) > 0 {
		last = bs[len(bs)-1]
	}
	area := p.frame(r, "Throughput", fmt.Sprintf("prompt %d t/s · gen %d t/s · queue %d", last.prompt, last.gen, v.snap.Queue))
	peak := 1
	for _, b := range bs {
		peak = max(peak, b.prompt, b.gen, b.queue)
	}
	yMax := niceMax(float64(peak))
	plot := p.axes(rect{area.x, area.y, area.w, area.h - p.lineH()}, fmt.Sprintf("last %d s", throughputSpan), "tokens/s", yMax, "%.0f")
	series := []struct {
		c   canvas.Color
		get func(bucket) int
	}{
		{slotColors[1], func(b bucket) int { return b.prompt }},
		{slotColors[2], func(b bucket) int { return b.gen }},
		{accent, func(b bucket) int { return b.queue }},
	}
	bw := plot.w / throughputSpan
	x0 := plot.x + plot.w - bw*float32(len(bs))
	for _, s := range series {
		for i, b := range bs {
			y := plot.y + plot.h - plot.h*float32(float64(s.get(b))/yMax)
			p.fill(rect{x0 + bw*float32(i), y - p.u, max(bw, 1), 2 * p.u}, s.c)
		}
	}
	lx := plot.x + 4*p.u
	for i, name := range []string{"prompt", "generation", "queue"} {
		p.fill(rect{lx, plot.y + 4*p.u + p.lineH()/2, 8 * p.u, 2 * p.u}, series[i].c)
		lx += 10*p.u + p.text(lx+10*p.u, plot.y+4*p.u, 0, name, textDim) + 8*p.u
	}
	v.drawn.Throughput = DrawnRates{Prompt: last.prompt, Generation: last.gen, Queue: v.snap.Queue, Seconds: len(bs)}
	st := v.snap.Stats
	p.text(area.x, area.y+area.h-p.lineH(), area.w, fmt.Sprintf("totals: prompt %d · generated %d · passes %d", st.PromptTokens, st.PredictedTokens, st.Decodes), textDim)
	v.drawn.Totals = DrawnTotals{PromptTokens: st.PromptTokens, PredictedTokens: st.PredictedTokens, Decodes: st.Decodes, KVTokens: st.KVTokens}
}

// candidatesPanel (6): the selected slot's top candidates at its last step.
func (v *View) candidatesPanel(p *painter, r rect) {
	var sl *engine.SlotView
	for i := range v.snap.Slots {
		if v.snap.Slots[i].ID == v.selected {
			sl = &v.snap.Slots[i]
		}
	}
	area := p.frame(r, "Next token", fmt.Sprintf("slot %d", v.selected))
	if sl == nil || len(sl.Top) == 0 {
		p.text(area.x, area.y, area.w, "no sampling step yet in this slot", textDim)
		return
	}
	p.text(area.x, area.y, area.w, fmt.Sprintf("sampled %q", sl.TopToken), textMain)
	top := slices.Clone(sl.Top)
	rowH := min((area.h-2*p.lineH())/float32(len(top)), 1.5*p.lineH())
	labelW := area.w * 0.35
	for i, c := range top {
		y := area.y + p.lineH() + 4*p.u + float32(i)*rowH
		p.text(area.x, y, labelW, fmt.Sprintf("%q", c.Token), textMain)
		w := (area.w - labelW - p.font.Width("100.0%  ")) * c.P
		p.fill(rect{area.x + labelW, y + 2*p.u, w, rowH - 4*p.u}, slotColor(sl.ID))
		p.textRight(area.x+area.w, y, fmt.Sprintf("%.1f%%", 100*c.P), textDim)
		v.drawn.Candidates = append(v.drawn.Candidates, DrawnCandidate{Token: c.Token, P: c.P})
	}
	p.text(area.x, area.y+area.h-p.lineH(), area.w, "probability", textDim)
}

// memoryPanel (7): GPU bytes by use, and the adapter's limits.
func (v *View) memoryPanel(p *painter, r rect) {
	m := v.snap.Memory
	type part struct {
		name  string
		bytes uint64
	}
	var parts []part
	for _, t := range slices.Sorted(maps.Keys(m.Weights)) {
		parts = append(parts, part{"weights " + t, m.Weights[t]})
	}
	parts = append(parts, part{"KV cache", m.KV}, part{"scratch", m.Scratch})
	if m.Adapters > 0 {
		parts = append(parts, part{"LoRA adapters", m.Adapters})
	}
	var total uint64
	for _, pt := range parts {
		total += pt.bytes
	}
	area := p.frame(r, "Memory", fmt.Sprintf("%s total", bytesText(total)))
	v.drawn.MemoryBytes = total
	biggest := uint64(1)
	for _, pt := range parts {
		biggest = max(biggest, pt.bytes)
	}
	nameW := area.w * 0.38
	rowH := 1.4 * p.lineH()
	y := area.y
	for i, pt := range parts {
		p.text(area.x, y, nameW, pt.name, textMain)
		w := (area.w - nameW - p.font.Width("0000.0 MiB ")) * float32(float64(pt.bytes)/float64(biggest))
		p.fill(rect{area.x + nameW, y + 2*p.u, w, rowH - 4*p.u}, slotColor(i))
		p.textRight(area.x+area.w, y, bytesText(pt.bytes), textDim)
		y += rowH
	}
	y += p.lineH() / 2
	for _, line := range []string{
		m.DeviceName,
		"largest buffer " + bytesText(m.MaxBuffer),
		"largest storage binding " + bytesText(m.MaxBinding),
	} {
		if y+p.lineH() > area.y+area.h {
			break
		}
		p.text(area.x, y, area.w, line, textDim)
		y += p.lineH()
	}
}

// bytesText writes n bytes in binary units.
func bytesText(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// attentionPanel (8): the selected slot's attention weights at its last step, for the chosen
// layer and head, as a heat strip over its positions.
func (v *View) attentionPanel(p *painter, r rect) {
	area := p.frame(r, "Attention", fmt.Sprintf("slot %d · layer %d · head %d", v.selected, v.layer, v.head))
	if !v.showAttention {
		p.text(area.x, area.y, area.w, "hidden: the engine computes no weights (A shows them)", textDim)
		return
	}
	a := v.snap.Attention
	if a == nil || a.Slot != v.selected || a.Layer != v.layer || a.Head != v.head || len(a.Weights) == 0 {
		p.text(area.x, area.y, area.w, "waiting for a step of this slot", textDim)
		return
	}
	peak := float32(0)
	for _, w := range a.Weights {
		peak = max(peak, w)
	}
	n := len(a.Weights)
	p.text(area.x, area.y, area.w, fmt.Sprintf("pass %d · %d positions · peak %.3f", a.Pass, n, peak), textMain)
	// rows of up to 64 positions, each a cell of colour weight/peak
	perRow := min(n, 64)
	rows := (n + perRow - 1) / perRow
	strip := rect{area.x, area.y + 1.5*p.lineH(), area.w, area.h - 3*p.lineH()}
	cw, chh := strip.w/float32(perRow), min(strip.h/float32(rows), strip.w/float32(perRow)*4)
	for i, w := range a.Weights {
		p.fill(rect{strip.x + float32(i%perRow)*cw, strip.y + float32(i/perRow)*chh, max(cw, 1), max(chh-p.u/2, 1)}, heat(w/max(peak, 1e-9)))
	}
	p.text(area.x, strip.y+float32(rows)*chh+2*p.u, area.w, fmt.Sprintf("positions 0 … %d, colour = weight / peak", n-1), textDim)
	v.drawn.Attention = &DrawnAttention{Slot: a.Slot, Layer: a.Layer, Head: a.Head, Positions: n}
}
