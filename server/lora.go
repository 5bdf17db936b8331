package server

import (
	"context"
	"encoding/json"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// LoRA adapters over HTTP, as llama-server: GET /lora-adapters lists them with their global
// scales, POST sets those, and a request's lora field sets its own.

// LoraBackend is a Backend with LoRA adapters (the engine).
type LoraBackend interface {
	// Adapters lists the loaded adapters with their global scales.
	Adapters() []engine.Adapter
	// SetAdapterScales sets the global scales: each id listed, 0 for the others.
	SetAdapterScales(map[int]float32)
}

// maxLoraID bounds the ids a lora list may name: larger ones name no adapter and are ignored
// without sizing anything by them.
const maxLoraID = 1 << 12

// parseLoraList reads a lora list as llama-server's parse_lora_request: an array whose entries
// give "id" (another type, or none, reads as -1) and "scale" (another type, or none, as 0).
// what names the field in the error of anything else.
func parseLoraList(raw []byte, what string) ([]engine.AdapterScale, error) {
	var entries []json.RawMessage
	if jx.DecodeBytes(raw).Next() != jx.Array || json.Unmarshal(raw, &entries) != nil {
		return nil, invalidRequest("%s", what)
	}
	out := make([]engine.AdapterScale, 0, len(entries))
	for _, e := range entries {
		var f struct {
			ID    json.RawMessage `json:"id"`
			Scale json.RawMessage `json:"scale"`
		}
		_ = json.Unmarshal(e, &f) // not an object: the defaults
		entry := engine.AdapterScale{ID: -1}
		var id int
		if json.Unmarshal(f.ID, &id) == nil {
			entry.ID = id
		}
		var scale float64
		if json.Unmarshal(f.Scale, &scale) == nil {
			entry.Scale = float32(scale)
		}
		out = append(out, entry)
	}
	return out, nil
}

// loraParams turns a request's lora field into the engine's: nil scales (the global ones) when
// it is absent or empty, else a scale per id it names (the engine gives the others 0).
func loraParams(raw jx.Raw) (scales []float32, listed []engine.AdapterScale, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	listed, err = parseLoraList(raw, "Field 'lora': Error: 'lora' must be an array of objects with 'id' and 'scale' fields")
	if err != nil || len(listed) == 0 {
		return nil, listed, err
	}
	scales = []float32{}
	for _, e := range listed {
		if e.ID < 0 || e.ID >= maxLoraID {
			continue
		}
		for len(scales) <= e.ID {
			scales = append(scales, 0)
		}
		scales[e.ID] = e.Scale
	}
	return scales, listed, nil
}

// loraOf returns the backend's adapter side, nil when it has none.
func (s *Server) loraOf() LoraBackend {
	if m := s.model(); m != nil {
		if lb, ok := m.backend.(LoraBackend); ok {
			return lb
		}
	}
	return nil
}

// GetLoraAdapters lists the adapters with their global scales.
func (s *Server) GetLoraAdapters(context.Context) ([]gen.LoraAdapterInfo, error) {
	out := []gen.LoraAdapterInfo{}
	if lb := s.loraOf(); lb != nil {
		for _, a := range lb.Adapters() {
			out = append(out, gen.LoraAdapterInfo{ID: a.ID, Path: a.Path, Scale: float64(a.Scale)})
		}
	}
	return out, nil
}

// SetLoraAdapters sets the global scales: each id listed, 0 for the others; unknown ids are
// ignored.
func (s *Server) SetLoraAdapters(_ context.Context, req gen.LoraScalesBody) (*gen.PropsUpdateResponse, error) {
	listed, err := parseLoraList(req, "Request body must be an array")
	if err != nil {
		return nil, err
	}
	if lb := s.loraOf(); lb != nil {
		scales := map[int]float32{}
		for _, e := range listed {
			scales[e.ID] = e.Scale
		}
		lb.SetAdapterScales(scales)
	}
	return &gen.PropsUpdateResponse{Success: true}, nil
}

// modelAdapter is a request's adapter chosen by its model field: the scales it runs with (that
// adapter's alone) and its lora list as generation_settings reports it; nil scales: none.
type modelAdapter struct {
	scales []float32
	listed []engine.AdapterScale
}

// adapterNamed resolves a request's model field to a loaded adapter (engine.AdapterName), as
// vLLM serves an adapter by its name, which is how an inference gateway routes to one. The
// adapter runs alone, at the scale it was loaded with (1 unless --lora-scaled said another,
// and even under --lora-init-without-apply); any other name leaves the scales as they are.
func (m *loaded) adapterNamed(name string) modelAdapter {
	lb, ok := m.backend.(LoraBackend)
	if !ok || name == "" || name == m.name {
		return modelAdapter{}
	}
	adapters := lb.Adapters()
	for _, a := range adapters {
		if a.Name != name {
			continue
		}
		scales := make([]float32, len(adapters))
		scales[a.ID] = a.LoadScale
		return modelAdapter{scales: scales, listed: []engine.AdapterScale{{ID: a.ID, Scale: a.LoadScale}}}
	}
	return modelAdapter{}
}
