package model

import (
	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// ropeKey is what a layer's RoPE angles depend on (layerAttention's Rope less its buffers).
type ropeKey struct {
	nRot         int
	base, scale  float32
	factors      bool
	yarn         gpu.YaRN
	vision, neox bool
}

func keyOf(r gpu.Rope) ropeKey {
	return ropeKey{r.NRot, r.FreqBase, r.FreqScale, r.Factors != nil, r.YaRN, r.Vision, r.NeoX}
}

// ropeTable is a RoPE's angles as llama.cpp takes them (gpu.Device.RoPETable).
type ropeTable struct {
	buf  *gpu.Buffer
	rows int
}

// loadRopeTables gives a device that reproduces llama.cpp's CPU arithmetic (CPUMath) each
// distinct RoPE of the model's layers as a table of llama.cpp's own cos and sin, for the
// positions of the trained context (as many as gpu.RoPETableMaxBytes holds; later ones are
// computed): its C library's sinf and cosf are what no kernel reproduces.
func (m *Model) loadRopeTables(l *loader) error {
	var factors []float32
	if l.hasTensor("rope_freqs.weight") {
		var err error
		if _, factors, err = l.floats("rope_freqs.weight", m.Config.NRot/2); err != nil {
			return err
		}
	}
	m.ropeTables = map[ropeKey]ropeTable{}
	for il := range m.Config.NLayer {
		rope, _ := m.layerAttention(il)
		k := keyOf(rope)
		if _, ok := m.ropeTables[k]; ok || rope.Vision || rope.NRot < 2 {
			continue
		}
		var f []float32
		if rope.Factors != nil {
			if len(factors) != rope.NRot/2 {
				continue // the factors are for another rotation width: computed angles
			}
			f = factors
		}
		rows := min(m.Config.NCtxTrain, gpu.RoPETableMaxBytes/(rope.NRot/2*8))
		b, err := m.dev.RoPETable(rope, f, rows)
		if err != nil {
			return err
		}
		m.ropeTables[k] = ropeTable{b, rows}
	}
	return nil
}

// withTable sets rope's table where the model has one for it.
func (m *Model) withTable(rope gpu.Rope) gpu.Rope {
	if t, ok := m.ropeTables[keyOf(rope)]; ok {
		rope.Table, rope.TableRows = t.buf, t.rows
	}
	return rope
}

// releaseRopeTables frees the tables.
func (m *Model) releaseRopeTables() {
	for _, t := range m.ropeTables {
		t.buf.Release()
	}
	m.ropeTables = nil
}
