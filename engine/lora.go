package engine

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// LoRA adapters (llama-server's --lora): loaded with the model, each request runs with a
// scale per adapter (Params.Lora; the global scales, SetAdapterScales, when it names none).
// As llama-server, a forward pass takes only slots whose scales are equal; the others wait
// for a pass of their own, the slot that waited longest choosing the next pass's scales. Cached
// rows belong to the scales they were computed with (slot.lora): a prefix is shared only
// between holders of the same scales, so a changed adapter set never reuses rows.

// LoraSpec is an adapter to load and its initial scale.
type LoraSpec struct {
	Path  string
	Scale float32
}

// AdapterScale is one entry of a request's lora list: an adapter id and its scale.
type AdapterScale struct {
	ID    int
	Scale float32
}

// Adapter is a loaded adapter as /lora-adapters lists it.
type Adapter struct {
	ID    int
	Name  string // AdapterName(Path): what a request's model field calls it
	Path  string
	Scale float32 // the global scale
	// LoadScale is the scale it was loaded with (--lora-scaled's, else 1), which a request
	// naming it in its model field runs it at.
	LoadScale float32
}

// loadAdapters loads the adapters of specs onto m; with initZero every scale starts at 0
// (--lora-init-without-apply, as llama-server's README promises).
func loadAdapters(m *model.Model, specs []LoraSpec, initZero bool) ([]Adapter, error) {
	out := make([]Adapter, 0, len(specs))
	for i, sp := range specs {
		if _, err := m.LoadAdapterFile(sp.Path); err != nil {
			return nil, fmt.Errorf("lora %s: %w", sp.Path, err)
		}
		scale := sp.Scale
		if initZero {
			scale = 0
		}
		out = append(out, Adapter{ID: i, Name: AdapterName(sp.Path), Path: sp.Path, Scale: scale, LoadScale: sp.Scale})
	}
	return out, nil
}

// Adapters lists the loaded adapters with their global scales.
func (e *Engine) Adapters() []Adapter {
	e.loraMu.Lock()
	defer e.loraMu.Unlock()
	return append([]Adapter(nil), e.adapters...)
}

// SetAdapterScales sets the global scales (POST /lora-adapters): scales[id] for each id it
// names, 0 for the others; ids that name no adapter are ignored, as llama-server does.
func (e *Engine) SetAdapterScales(scales map[int]float32) {
	e.loraMu.Lock()
	defer e.loraMu.Unlock()
	for i := range e.adapters {
		e.adapters[i].Scale = scales[i]
	}
}

// loraScales resolves a request's scales: its own (Params.Lora), else the global ones, as
// many as there are adapters.
func (e *Engine) loraScales(p Params) []float32 {
	e.loraMu.Lock()
	defer e.loraMu.Unlock()
	out := make([]float32, len(e.adapters))
	for i := range out {
		if p.Lora != nil {
			if i < len(p.Lora) {
				out[i] = p.Lora[i]
			}
		} else {
			out[i] = e.adapters[i].Scale
		}
	}
	return out
}

// loraKey names a set of scales: "" when every scale is 0 (the base model), so equal sets,
// and only they, have equal keys.
func loraKey(scales []float32) string {
	var b strings.Builder
	for i, s := range scales {
		if s != 0 {
			fmt.Fprintf(&b, "%d:%s,", i, strconv.FormatUint(uint64(math.Float32bits(s)), 16))
		}
	}
	return b.String()
}

// prefixFor is the prefix of prompt a holder's cache shares under the scales key: none when
// its rows were computed with others.
func (o *slot) prefixFor(prompt []int32, key string) int {
	if o.lora != key {
		return 0
	}
	return commonPrefix(o.cached, prompt)
}

// passLora picks the scales of the next forward pass: those of the active slot that has
// waited the most passes (the lowest id among equals), so no set waits forever.
func (e *Engine) passLora() (key string, scales []float32) {
	var pick *generation
	for _, s := range e.slots {
		if g := s.gen; g != nil && (pick == nil || g.waited > pick.waited) {
			pick = g
		}
	}
	if pick == nil {
		return "", nil
	}
	return pick.loraKey, pick.lora
}
