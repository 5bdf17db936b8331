package model

import (
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestShiftKVMovesEveryLayer drops positions 5-9 of a 20-token sequence by moving 10-19 down,
// as llama.cpp's context shift does, and checks every layer's cache: positions 0-4 unchanged,
// 5-14 holding the old 10-19 with keys turned back by 5 positions and values copied, in a
// contiguous region and in pages. (The kernel's rotation is checked against the Go reference
// in gpu; this checks the wiring: every layer, its RoPE settings, the sequence's rows.)
func TestShiftKVMovesEveryLayer(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	dev := gputest.Device(t)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := Load(dev, f, Options{MaxBatch: 64, KVF32: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Config
	tokens := []int32{1, 403, 407, 261, 378, 432, 383, 286, 261, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310}
	rowF := c.NKVHead * c.HeadDim
	for _, paged := range []bool{false, true} {
		kv, err := m.NewKVCache(64)
		if err != nil {
			t.Fatal(err)
		}
		base, bits, pages := int32(7), 0, []int32(nil)
		row := func(j int) int { return 7 + j }
		if paged {
			base, bits, pages = 0, 3, []int32{6, 1, 4}
			row = func(j int) int { return int(pages[j>>3])<<3 | j&7 }
		}
		b := Batch{Tokens: tokens, PageBits: bits, Pages: pages}
		for p := range tokens {
			b.Pos = append(b.Pos, int32(p))
			b.Base = append(b.Base, base)
		}
		if _, err := m.ForwardBatch(kv, b); err != nil {
			t.Fatal(err)
		}
		read := func(buf *gpu.Buffer) []float32 {
			raw, err := dev.Read(buf, 0, buf.Size())
			if err != nil {
				t.Fatal(err)
			}
			return gpu.Float32s(raw)
		}
		var before [][2][]float32
		for i := range kv.k {
			before = append(before, [2][]float32{read(kv.k[i]), read(kv.v[i])})
		}
		if err := m.ShiftKV(kv, bits, base, pages, nil, []Shift{{Src: 10, Dst: 5, N: 10}}); err != nil {
			t.Fatal(err)
		}
		for i := range kv.k {
			k, v := read(kv.k[i]), read(kv.v[i])
			var gotK, wantK, gotV, wantV []float32
			for j := 0; j < 15; j++ {
				src := j
				if j >= 5 {
					src = j + 5
				}
				old := append([]float32(nil), before[i][0][row(src)*rowF:(row(src)+1)*rowF]...)
				if j >= 5 {
					cpuref.RoPE(old, []int32{-5}, c.NKVHead, c.HeadDim, c.NRot, c.RopeBase)
				}
				wantK = append(wantK, old...)
				wantV = append(wantV, before[i][1][row(src)*rowF:(row(src)+1)*rowF]...)
				gotK = append(gotK, k[row(j)*rowF:(row(j)+1)*rowF]...)
				gotV = append(gotV, v[row(j)*rowF:(row(j)+1)*rowF]...)
			}
			if e := cpuref.RelErr(gotK, wantK); e > 1e-5 {
				t.Errorf("paged=%v layer %d: keys after the shift: relative error %.3g", paged, i, e)
			}
			if e := cpuref.RelErr(gotV, wantV); e != 0 {
				t.Errorf("paged=%v layer %d: values after the shift: relative error %.3g", paged, i, e)
			}
		}
		if err := m.ShiftKV(kv, bits, base, pages, nil, []Shift{{Src: 5, Dst: 10, N: 3}}); err == nil {
			t.Error("a shift to later positions was accepted")
		}
		kv.Release()
	}
}
