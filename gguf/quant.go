package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// ErrUnsupportedType is wrapped by Dequantize and Quantize errors for tensor types this package
// cannot convert yet (the TQ types, NVFP4, Q1_0, Q2_0, Q8_1, Q8_K, integer types; the IQ types
// below IQ4 decode but do not encode), so callers can tell "convert the model to another type"
// apart from damaged input.
var ErrUnsupportedType = errors.New("not supported yet")

// blockCodec converts whole blocks: decode fills dst (a multiple of the block size) from exactly
// the matching bytes of src; encode packs src into dst likewise. Either may be nil.
type blockCodec struct {
	decode func(src []byte, dst []float32)
	encode func(src []float32, dst []byte)
}

// codecs lists the supported types in the order error messages name them.
var codecs = []struct {
	t GGMLType
	c blockCodec
}{
	{TypeF32, blockCodec{decodeF32, encodeF32}},
	{TypeF16, blockCodec{decodeF16, encodeF16}},
	{TypeBF16, blockCodec{decodeBF16, encodeBF16}},
	{TypeQ8_0, blockCodec{decodeQ8_0, encodeQ8_0}},
	{TypeQ4_0, blockCodec{decodeQ4_0, encodeQ4_0}},
	{TypeQ4_1, blockCodec{decodeQ4_1, encodeQ4_1}},
	{TypeQ5_0, blockCodec{decodeQ5_0, encodeQ5_0}},
	{TypeQ5_1, blockCodec{decodeQ5_1, encodeQ5_1}},
	{TypeQ2_K, blockCodec{decodeQ2_K, encodeQ2_K}},
	{TypeQ3_K, blockCodec{decodeQ3_K, encodeQ3_K}},
	{TypeQ4_K, blockCodec{decodeQ4_K, encodeQ4_K}},
	{TypeQ5_K, blockCodec{decodeQ5_K, encodeQ5_K}},
	{TypeQ6_K, blockCodec{decodeQ6_K, encodeQ6_K}},
	// MXFP4 and the IQ types (quant_iq*.go): IQ4_NL, IQ4_XS and MXFP4 encode too
	// (quant_iq_encode.go); the lattice types below them need an importance matrix's search.
	{TypeIQ4_NL, blockCodec{decodeIQ4_NL, encodeIQ4_NL}},
	{TypeIQ4_XS, blockCodec{decodeIQ4_XS, encodeIQ4_XS}},
	{TypeMXFP4, blockCodec{decodeMXFP4, encodeMXFP4}},
	{TypeIQ3_S, blockCodec{decodeIQ3_S, nil}},
	{TypeIQ3_XXS, blockCodec{decodeIQ3_XXS, nil}},
	{TypeIQ2_S, blockCodec{decodeIQ2_S, nil}},
	{TypeIQ2_XS, blockCodec{decodeIQ2_XS, nil}},
	{TypeIQ2_XXS, blockCodec{decodeIQ2_XXS, nil}},
	{TypeIQ1_M, blockCodec{decodeIQ1_M, nil}},
	{TypeIQ1_S, blockCodec{decodeIQ1_S, nil}},
}

func codecFor(t GGMLType) (blockCodec, bool) {
	for _, e := range codecs {
		if e.t == t {
			return e.c, true
		}
	}
	return blockCodec{}, false
}

// CanDequantize reports whether Dequantize handles the type, so loaders can reject a model
// before reading gigabytes of it.
func (t GGMLType) CanDequantize() bool {
	c, ok := codecFor(t)
	return ok && c.decode != nil
}

// CanQuantize reports whether Quantize can produce the type, for validating a requested output
// type up front.
func (t GGMLType) CanQuantize() bool {
	c, ok := codecFor(t)
	return ok && c.encode != nil
}

// unsupportedErr names the types that do support op ("dequantize" or "quantize").
func unsupportedErr(op string, t GGMLType) error {
	names := make([]string, 0, len(codecs))
	for _, e := range codecs {
		if op == "quantize" && e.c.encode != nil || op != "quantize" && e.c.decode != nil {
			names = append(names, e.t.String())
		}
	}
	return fmt.Errorf("gguf: %s: type %s %w (supported: %s)", op, t, ErrUnsupportedType, strings.Join(names, ", "))
}

// Dequantize decodes len(dst) elements of type t from data into dst, bit-exact to llama.cpp's
// dequantize_row_* (the same float32 operations in the same order), so CPU reference results
// match llama.cpp's. len(dst) must be a multiple of t.BlockSize() and data must hold exactly
// the bytes of len(dst) elements.
func Dequantize(t GGMLType, data []byte, dst []float32) error {
	c, ok := codecFor(t)
	if !ok || c.decode == nil {
		return unsupportedErr("dequantize", t)
	}
	size, err := checkLength("dequantize", t, len(dst))
	if err != nil {
		return err
	}
	if uint64(len(data)) != size {
		return fmt.Errorf("gguf: dequantize %s: data is %d bytes, want %d for %d elements", t, len(data), size, len(dst))
	}
	c.decode(data, dst)
	return nil
}

// Quantize encodes src as type t exactly as llama-quantize does without an importance matrix
// (quantize_row_*_ref; for IQ4_NL and IQ4_XS the search of quantize_iq4_nl and quantize_iq4_xs),
// returning the packed bytes. len(src) must be a multiple of t.BlockSize().
func Quantize(t GGMLType, src []float32) ([]byte, error) {
	c, ok := codecFor(t)
	if !ok || c.encode == nil {
		return nil, unsupportedErr("quantize", t)
	}
	size, err := checkLength("quantize", t, len(src))
	if err != nil {
		return nil, err
	}
	out := make([]byte, size)
	c.encode(src, out)
	return out, nil
}

func checkLength(op string, t GGMLType, n int) (uint64, error) {
	size, ok := t.RowSize(uint64(n))
	if !ok {
		return 0, fmt.Errorf("gguf: %s %s: %d elements is not a multiple of the block size %d", op, t, n, t.BlockSize())
	}
	return size, nil
}

// nearestInt is ggml's nearest_int: round half to even by adding 1.5*2^23 and reading the
// mantissa. Exact for |f| <= 4194303; beyond that it wraps exactly as ggml's does, which keeps
// the quantizers byte-identical even on degenerate inputs.
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

func f16At(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }

func decodeF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func encodeF32(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func decodeF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func encodeF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
	}
}

func decodeBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func encodeBF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
	}
}
