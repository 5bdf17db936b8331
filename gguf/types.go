package gguf

import (
	"fmt"
	"math/bits"
)

// GGMLType is a tensor's storage type as numbered by ggml (enum ggml_type). The numbering is
// part of the file format: ids are never reused, and retired ids (4, 5, 31-33, 36-38) stay gaps.
type GGMLType uint32

// The ggml tensor types, with ggml's numbering.
const (
	TypeF32     GGMLType = 0
	TypeF16     GGMLType = 1
	TypeQ4_0    GGMLType = 2
	TypeQ4_1    GGMLType = 3
	TypeQ5_0    GGMLType = 6
	TypeQ5_1    GGMLType = 7
	TypeQ8_0    GGMLType = 8
	TypeQ8_1    GGMLType = 9
	TypeQ2_K    GGMLType = 10
	TypeQ3_K    GGMLType = 11
	TypeQ4_K    GGMLType = 12
	TypeQ5_K    GGMLType = 13
	TypeQ6_K    GGMLType = 14
	TypeQ8_K    GGMLType = 15
	TypeIQ2_XXS GGMLType = 16
	TypeIQ2_XS  GGMLType = 17
	TypeIQ3_XXS GGMLType = 18
	TypeIQ1_S   GGMLType = 19
	TypeIQ4_NL  GGMLType = 20
	TypeIQ3_S   GGMLType = 21
	TypeIQ2_S   GGMLType = 22
	TypeIQ4_XS  GGMLType = 23
	TypeI8      GGMLType = 24
	TypeI16     GGMLType = 25
	TypeI32     GGMLType = 26
	TypeI64     GGMLType = 27
	TypeF64     GGMLType = 28
	TypeIQ1_M   GGMLType = 29
	TypeBF16    GGMLType = 30
	TypeTQ1_0   GGMLType = 34
	TypeTQ2_0   GGMLType = 35
	TypeMXFP4   GGMLType = 39
	TypeNVFP4   GGMLType = 40
	TypeQ1_0    GGMLType = 41
	TypeQ2_0    GGMLType = 42
)

// qk is ggml's QK_K, the super-block length of the K-quants and most IQ types.
const qk = 256

type typeTraits struct {
	name      string
	blockSize uint64 // elements per block
	typeSize  uint64 // bytes per block
}

// typeTable mirrors ggml's type_traits (block size, bytes per block), as gguf-py's
// GGML_QUANT_SIZES lists them. A zero entry is an unknown or retired id.
var typeTable = [...]typeTraits{
	TypeF32:     {"F32", 1, 4},
	TypeF16:     {"F16", 1, 2},
	TypeQ4_0:    {"Q4_0", 32, 2 + 16},
	TypeQ4_1:    {"Q4_1", 32, 2 + 2 + 16},
	TypeQ5_0:    {"Q5_0", 32, 2 + 4 + 16},
	TypeQ5_1:    {"Q5_1", 32, 2 + 2 + 4 + 16},
	TypeQ8_0:    {"Q8_0", 32, 2 + 32},
	TypeQ8_1:    {"Q8_1", 32, 4 + 4 + 32},
	TypeQ2_K:    {"Q2_K", qk, 2 + 2 + qk/16 + qk/4},
	TypeQ3_K:    {"Q3_K", qk, 2 + qk/4 + qk/8 + 12},
	TypeQ4_K:    {"Q4_K", qk, 2 + 2 + qk/2 + 12},
	TypeQ5_K:    {"Q5_K", qk, 2 + 2 + qk/2 + qk/8 + 12},
	TypeQ6_K:    {"Q6_K", qk, 2 + qk/2 + qk/4 + qk/16},
	TypeQ8_K:    {"Q8_K", qk, 4 + qk + qk/8},
	TypeIQ2_XXS: {"IQ2_XXS", qk, 2 + qk/4},
	TypeIQ2_XS:  {"IQ2_XS", qk, 2 + qk/4 + qk/32},
	TypeIQ3_XXS: {"IQ3_XXS", qk, 2 + qk/4 + qk/8},
	TypeIQ1_S:   {"IQ1_S", qk, 2 + qk/8 + qk/16},
	TypeIQ4_NL:  {"IQ4_NL", 32, 2 + 16},
	TypeIQ3_S:   {"IQ3_S", qk, 2 + qk/4 + qk/8 + qk/32 + 4},
	TypeIQ2_S:   {"IQ2_S", qk, 2 + qk/4 + qk/16},
	TypeIQ4_XS:  {"IQ4_XS", qk, 2 + 2 + qk/2 + qk/64},
	TypeI8:      {"I8", 1, 1},
	TypeI16:     {"I16", 1, 2},
	TypeI32:     {"I32", 1, 4},
	TypeI64:     {"I64", 1, 8},
	TypeF64:     {"F64", 1, 8},
	TypeIQ1_M:   {"IQ1_M", qk, qk/8 + qk/16 + qk/32},
	TypeBF16:    {"BF16", 1, 2},
	TypeTQ1_0:   {"TQ1_0", qk, 2 + 4*13},
	TypeTQ2_0:   {"TQ2_0", qk, 2 + 64},
	TypeMXFP4:   {"MXFP4", 32, 1 + 16},
	TypeNVFP4:   {"NVFP4", 64, 4 + 32},
	TypeQ1_0:    {"Q1_0", 128, 2 + 16},
	TypeQ2_0:    {"Q2_0", 64, 2 + 16},
}

func (t GGMLType) traits() typeTraits {
	if uint64(t) < uint64(len(typeTable)) {
		return typeTable[t]
	}
	return typeTraits{}
}

// String returns llama.cpp's name for the type ("F32", "Q4_K", "BF16"), the spelling users
// see in llama-quantize and gguf-dump output.
func (t GGMLType) String() string {
	if n := t.traits().name; n != "" {
		return n
	}
	return fmt.Sprintf("GGMLType(%d)", uint32(t))
}

// Known reports whether the type's block layout is known, i.e. whether tensor sizes can be
// computed; it says nothing about whether this project can compute with the type.
func (t GGMLType) Known() bool { return t.traits().typeSize != 0 }

// BlockSize is the number of elements one block encodes (1 for plain float/int types); a row's
// length must be a multiple of it. Zero for unknown types.
func (t GGMLType) BlockSize() uint64 { return t.traits().blockSize }

// TypeSize is the number of bytes one block occupies. Zero for unknown types.
func (t GGMLType) TypeSize() uint64 { return t.traits().typeSize }

// RowSize returns the bytes taken by n elements, and false when the type is unknown, n is not
// a whole number of blocks, or the size overflows.
func (t GGMLType) RowSize(n uint64) (uint64, bool) {
	tr := t.traits()
	if tr.typeSize == 0 || n%tr.blockSize != 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(n/tr.blockSize, tr.typeSize)
	return lo, hi == 0
}

// ParseGGMLType maps a name as String spells it (case-insensitively) back to the type, for
// command-line flags and tests.
func ParseGGMLType(name string) (GGMLType, bool) {
	for i, tr := range typeTable {
		if tr.name != "" && equalFoldASCII(tr.name, name) {
			return GGMLType(i), true
		}
	}
	return 0, false
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
