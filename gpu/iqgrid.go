package gpu

import (
	"encoding/binary"
	"sync"

	"github.com/wgpu-llama/wgpu-llama/gguf/iqgrid"
)

// The IQ types' lookup grids on the device. Each weight buffer of such a type ends with its
// type's grid, so the kernels need no binding of their own for it: dequant.inc.wgsl reads it
// at arrayLength(&w) - GRID_WORDS (weightDefines sets GRID and GRID_WORDS). Layouts, in u32
// words:
//
//	IQ2_XXS, IQ2_XS, IQ2_S: two words a point, elements 0-3 (one byte each) then 4-7
//	IQ3_XXS, IQ3_S:         one word a point, its 4 bytes
//	IQ1_S, IQ1_M:           two points a word, 16 bits each (the first point low), element e
//	                        in bits 2e, 2e+1 as its value plus one (0, 1 or 2 for -1, 0, 1)
//
// The 16-level tables of IQ4_NL, IQ4_XS and MXFP4 are WGSL constants instead.

var grids = sync.OnceValue(func() map[WeightType][]uint32 {
	pairs := func(n int, at func(int) uint64) []uint32 {
		out := make([]uint32, 0, 2*n)
		for i := range n {
			out = append(out, uint32(at(i)), uint32(at(i)>>32))
		}
		return out
	}
	words := func(n int, at func(int) uint32) []uint32 {
		out := make([]uint32, n)
		for i := range out {
			out[i] = at(i)
		}
		return out
	}
	iq1 := make([]uint32, iqgrid.IQ1SLen/2)
	for i := range iqgrid.IQ1SLen {
		g := iqgrid.IQ1S(i)
		var bits uint32
		for e := range 8 {
			bits |= uint32(int8(g>>(8*e))+1) << (2 * e)
		}
		iq1[i/2] |= bits << (16 * (i % 2))
	}
	return map[WeightType][]uint32{
		IQ2_XXS: pairs(iqgrid.IQ2XXSLen, iqgrid.IQ2XXS),
		IQ2_XS:  pairs(iqgrid.IQ2XSLen, iqgrid.IQ2XS),
		IQ2_S:   pairs(iqgrid.IQ2SLen, iqgrid.IQ2S),
		IQ3_XXS: words(iqgrid.IQ3XXSLen, iqgrid.IQ3XXS),
		IQ3_S:   words(iqgrid.IQ3SLen, iqgrid.IQ3S),
		IQ1_S:   iq1,
		IQ1_M:   iq1,
	}
})

// gridWords is the lookup grid every buffer of a type-t weight ends with (nil for types
// without one). Callers must not modify it.
func gridWords(t WeightType) []uint32 { return grids()[t] }

// GridBytes is the size of the lookup grid at the end of every buffer of a type-t weight: 0,
// or 1 to 8 KiB for the IQ types with a grid. Memory estimates from a file's tensor sizes
// leave it out (a few KiB a tensor).
func GridBytes(t WeightType) int { return 4 * len(gridWords(t)) }

// appendGrid appends the grid's words to b, little-endian.
func appendGrid(b []byte, grid []uint32) []byte {
	for _, v := range grid {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

// uploadRows uploads packed rows with the grid after them (none: nil) as one buffer, without
// joining them in host memory (the rows may be a mapped file's).
func (d *Device) uploadRows(label string, rows []byte, grid []uint32) (*Buffer, error) {
	if len(grid) == 0 {
		return d.Upload(label, rows)
	}
	b, err := d.NewBuffer(label, uint64(len(rows)+4*len(grid)))
	if err != nil {
		return nil, err
	}
	if err := d.Write(b, 0, rows); err != nil {
		b.Release()
		return nil, err
	}
	if err := d.Write(b, uint64(len(rows)), appendGrid(nil, grid)); err != nil {
		b.Release()
		return nil, err
	}
	return b, nil
}
