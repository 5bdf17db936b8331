package debugview

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/debugview/glyphs"
	"github.com/wgpu-llama/wgpu-llama/gpu/canvas"
)

// RouterModel is one model of a router's GET /models, as the router frame lists it.
type RouterModel struct {
	ID       string   `json:"id"`
	Status   string   `json:"status"`
	Progress *float64 `json:"progress,omitempty"` // 0..1 while loading
	Source   string   `json:"source"`
	Failed   bool     `json:"failed"`
}

// RouterFrame draws a router's models and their states. In router mode every model's engine
// runs in a child process of its own, so the engine panels, which read an in-process engine,
// are not shown; the frame says so.
func RouterFrame(font *glyphs.Atlas, width, height int, scale float32, url string, models []RouterModel) []canvas.Quad {
	p := &painter{font: font, u: max(scale, 0.5)}
	gap := 8 * p.u
	loaded := 0
	for _, m := range models {
		if m.Status == "loaded" {
			loaded++
		}
	}
	p.text(gap, 2*p.u, 0, fmt.Sprintf("wgpu-llama router · %s · %d models, %d loaded", url, len(models), loaded), textMain)
	area := p.frame(rect{gap, p.lineH() + 4*p.u + gap, float32(width) - 2*gap, float32(height) - p.lineH() - 4*p.u - 2*gap},
		"Models", "each model's engine runs in a child process: the engine panels need a single-model server (-m)")
	if len(models) == 0 {
		p.text(area.x, area.y, area.w, "no models found (see --models-dir, --models-preset and the Hugging Face cache)", textDim)
		return p.quads
	}
	idW := area.w * 0.45
	rowH := 1.5 * p.lineH()
	for i, m := range models {
		y := area.y + float32(i)*rowH
		if y+rowH > area.y+area.h {
			p.text(area.x, y, area.w, fmt.Sprintf("… and %d more", len(models)-i), textDim)
			break
		}
		c := freeCell
		switch {
		case m.Failed:
			c = slotColors[1]
		case m.Status == "loaded":
			c = slotColors[2]
		case m.Status == "loading":
			c = accent
		}
		p.fill(rect{area.x, y + 2*p.u, 4 * p.u, rowH - 4*p.u}, c)
		p.text(area.x+10*p.u, y, idW, m.ID, textMain)
		status := m.Status
		if m.Failed {
			status += " (failed)"
		}
		if m.Progress != nil && m.Status == "loading" {
			status += fmt.Sprintf(" %.0f%%", 100**m.Progress)
			bar := rect{area.x + idW + 160*p.u, y + 4*p.u, 120 * p.u, rowH - 8*p.u}
			p.fill(bar, freeCell)
			p.fill(rect{bar.x, bar.y, bar.w * float32(*m.Progress), bar.h}, accent)
		}
		p.text(area.x+idW+10*p.u, y, 150*p.u, status, textDim)
		p.textRight(area.x+area.w, y, m.Source, textDim)
	}
	return p.quads
}
