package model

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// kvReadBlock is the size of the aligned blocks KV rows are read back in. Reading whole blocks
// (and the buffer's tail) keeps the device's cache of readback buffers to two sizes per cache,
// whatever ranges are asked for.
const kvReadBlock = 1 << 20

// KVRows is the size of one cache row (one token's keys, or its values) of each layer with a
// cache of its own (KVLayers of them, in order).
func (m *Model) KVRows() []int {
	var out []int
	for _, il := range m.attnLayers() {
		out = append(out, m.kvRowBytes(il))
	}
	return out
}

// KVF16 reports whether the cache holds f16 rows (else f32).
func (m *Model) KVF16() bool { return m.kvF16 }

// KVTokenBytes is one token's keys and values over every layer with a cache of its own.
func (m *Model) KVTokenBytes() int {
	n := 0
	for _, r := range m.KVRows() {
		n += 2 * r
	}
	return n
}

// kvRowBytes is the size of one cache row of layer il.
func (m *Model) kvRowBytes(il int) int {
	n := m.Config.NKVHead * m.Config.attnShape(il).headDim * 4
	if m.kvF16 {
		n /= 2
	}
	return n
}

// KVLayers is the number of layers with a KV cache of their own (each has one K and one V
// buffer): all but a hybrid model's recurrent layers and those reading an earlier layer's.
func (m *Model) KVLayers() int { return len(m.attnLayers()) }

// attnLayers are the indices of the layers with a KV cache of their own, in order.
func (m *Model) attnLayers() []int {
	var out []int
	c := m.Config
	for il := range m.layers {
		if (c.Recurrent == nil || !c.Recurrent[il]) && c.kvSource(il) == il {
			out = append(out, il)
		}
	}
	return out
}

// checkKVRows validates the rows [r0, r1) of kv for a copy in or out.
func (m *Model) checkKVRows(kv *KVCache, r0, r1 int) error {
	for _, row := range m.KVRows() {
		if row%4 != 0 {
			return fmt.Errorf("model: KV rows of %d bytes cannot be copied (not a multiple of 4)", row)
		}
	}
	if r0 < 0 || r1 < r0 || r1 > kv.NCtx {
		return fmt.Errorf("model: KV rows [%d, %d) outside the cache of %d", r0, r1, kv.NCtx)
	}
	if len(kv.k) != len(m.layers) {
		return fmt.Errorf("model: the KV cache has %d layers, the model %d", len(kv.k), len(m.layers))
	}
	return nil
}

// ReadKVRows reads rows [r0, r1) of the keys and values of every layer with a cache of its own:
// k[l] and v[l] hold the l-th such layer's rows (KVLayers of them), KVRows()[l] bytes each, in
// row order. It waits for all submitted work.
func (m *Model) ReadKVRows(kv *KVCache, r0, r1 int) (k, v [][]byte, err error) {
	if err := m.checkKVRows(kv, r0, r1); err != nil {
		return nil, nil, err
	}
	for _, l := range m.cacheLayers(kv) {
		row := l.kv.rows[l.il]
		kb, err := readRange(l.dev, l.kv.k[l.il], uint64(r0)*row, uint64(r1)*row)
		if err != nil {
			return nil, nil, err
		}
		vb, err := readRange(l.dev, l.kv.v[l.il], uint64(r0)*row, uint64(r1)*row)
		if err != nil {
			return nil, nil, err
		}
		k, v = append(k, kb), append(v, vb)
	}
	return k, v, nil
}

// cacheLayer is a layer with a cache of its own, with the stage's cache and device holding it.
type cacheLayer struct {
	il  int
	kv  *KVCache
	dev *gpu.Device
}

// cacheLayers lists attnLayers with where each one's cache is, over every stage.
func (m *Model) cacheLayers(kv *KVCache) []cacheLayer {
	var out []cacheLayer
	st, skv := m, kv
	for _, il := range m.attnLayers() {
		for il >= st.hi && st.next != nil {
			st, skv = st.next, skv.next
		}
		out = append(out, cacheLayer{il, skv, st.dev})
	}
	return out
}

// readRange reads bytes [from, to) of b on dev in whole aligned blocks (see kvReadBlock).
func readRange(dev *gpu.Device, b *gpu.Buffer, from, to uint64) ([]byte, error) {
	out := make([]byte, 0, to-from)
	for blk := from / kvReadBlock * kvReadBlock; blk < to; blk += kvReadBlock {
		size := min(uint64(kvReadBlock), b.Size()-blk)
		data, err := dev.Read(b, blk, size)
		if err != nil {
			return nil, err
		}
		lo, hi := max(from, blk)-blk, min(to, blk+size)-blk
		out = append(out, data[lo:hi]...)
	}
	return out, nil
}

// WriteKVRows writes rows starting at r0 of every layer's keys and values, k[l] and v[l] as
// ReadKVRows returns them; the write is ordered before the next submit.
func (m *Model) WriteKVRows(kv *KVCache, r0 int, k, v [][]byte) error {
	layers := m.attnLayers()
	if len(k) != len(layers) || len(v) != len(layers) || len(layers) == 0 {
		return fmt.Errorf("model: KV rows for %d and %d layers, the model has %d", len(k), len(v), len(layers))
	}
	n := len(k[0]) / m.kvRowBytes(layers[0])
	if err := m.checkKVRows(kv, r0, r0+n); err != nil {
		return err
	}
	for i, l := range m.cacheLayers(kv) {
		row := m.kvRowBytes(l.il)
		if len(k[i]) != n*row || len(v[i]) != n*row {
			return fmt.Errorf("model: layer %d: %d key and %d value bytes, want %d rows of %d", l.il, len(k[i]), len(v[i]), n, row)
		}
		if err := l.dev.Write(l.kv.k[l.il], uint64(r0*row), k[i]); err != nil {
			return err
		}
		if err := l.dev.Write(l.kv.v[l.il], uint64(r0*row), v[i]); err != nil {
			return err
		}
	}
	return nil
}
