// Package iqgrid holds the lookup tables of ggml's IQ quantization types (IQ1_S, IQ1_M,
// IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S): each quant index names a point of a fixed grid of
// 8 (IQ1, IQ2) or 4 (IQ3) small magnitudes, which a block's scale then multiplies. The grids
// are ggml-common.h's (llama.cpp b10587), byte for byte; byte j of an entry (the entry read
// as a little-endian integer, byte 0 lowest) is element j of the point.
//
// It is a leaf package so that both the Go reference decoders (package gguf) and the GPU
// kernels' weight packer (package gpu, which appends the grids to each weight buffer) read the
// same tables. The tables are read through functions, so no caller can change them.
package iqgrid

import "math/bits"

// Grid lengths: the number of points of each grid (the range of its quant index).
const (
	IQ2XXSLen = len(iq2xxsGrid) // 256: 8-bit index
	IQ2XSLen  = len(iq2xsGrid)  // 512: 9-bit index
	IQ2SLen   = len(iq2sGrid)   // 1024: 10-bit index
	IQ3XXSLen = len(iq3xxsGrid) // 256: 8-bit index
	IQ3SLen   = len(iq3sGrid)   // 512: 9-bit index
	IQ1SLen   = len(iq1sGrid)   // 2048: 11-bit index, shared by IQ1_S and IQ1_M
)

// IQ2XXS is point i of IQ2_XXS's grid (ggml's iq2xxs_grid): 8 magnitudes, bytes 8, 25 or 43.
func IQ2XXS(i int) uint64 { return iq2xxsGrid[i] }

// IQ2XS is point i of IQ2_XS's grid (ggml's iq2xs_grid): 8 magnitudes, bytes 8, 25 or 43.
func IQ2XS(i int) uint64 { return iq2xsGrid[i] }

// IQ2S is point i of IQ2_S's grid (ggml's iq2s_grid): 8 magnitudes, bytes 8, 25 or 43.
func IQ2S(i int) uint64 { return iq2sGrid[i] }

// IQ3XXS is point i of IQ3_XXS's grid (ggml's iq3xxs_grid): 4 magnitudes, one byte each.
func IQ3XXS(i int) uint32 { return iq3xxsGrid[i] }

// IQ3S is point i of IQ3_S's grid (ggml's iq3s_grid): 4 magnitudes, one byte each.
func IQ3S(i int) uint32 { return iq3sGrid[i] }

// IQ1S is point i of IQ1_S's and IQ1_M's grid (ggml's iq1s_grid): 8 int8 values, each -1, 0
// or 1 (bytes 0xff, 0x00, 0x01).
func IQ1S(i int) uint64 { return iq1sGrid[i] }

// KSigns is ggml's ksigns_iq2xs[i] for i < 128: the sign mask of 8 grid elements coded in 7
// bits (bit j set: element j negated), the eighth sign making the count of negated elements
// even, so it is the parity of the seven.
func KSigns(i int) uint8 {
	b := uint8(i & 127)
	return b | uint8(bits.OnesCount8(b)&1)<<7
}
