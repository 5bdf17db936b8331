package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// decoder reads little-endian GGUF fields, bounds-checking every read.
type decoder struct {
	buf []byte
	off uint64
}

func (d *decoder) left() uint64 { return uint64(len(d.buf)) - d.off }

// take returns the next n bytes, or false (consuming nothing) when fewer remain.
func (d *decoder) take(n uint64) ([]byte, bool) {
	if n > d.left() {
		return nil, false
	}
	b := d.buf[d.off : d.off+n : d.off+n]
	d.off += n
	return b, true
}

func (d *decoder) u32(field func() string) (uint32, error) {
	b, ok := d.take(4)
	if !ok {
		return 0, truncatedErr(d.off, field(), 4, d.left())
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64(field func() string) (uint64, error) {
	b, ok := d.take(8)
	if !ok {
		return 0, truncatedErr(d.off, field(), 8, d.left())
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a u64 length and that many bytes; invalid UTF-8 is kept as is, like llama.cpp.
func (d *decoder) str(field func() string) (string, error) {
	n, err := d.u64(field)
	if err != nil {
		return "", err
	}
	b, ok := d.take(n)
	if !ok {
		return "", formatErr(d.off, field(), fmt.Errorf("%w: string of %d bytes, only %d left", ErrTruncated, n, d.left()))
	}
	return string(b), nil
}

// count reads an element count and checks that n elements of at least minSize bytes each fit
// in what is left, so that a corrupt count fails here instead of in make().
func (d *decoder) count(field func() string, what string, minSize uint64) (uint64, error) {
	start := d.off
	n, err := d.u64(field)
	if err != nil {
		return 0, err
	}
	hi, need := bits.Mul64(n, minSize)
	if hi != 0 {
		return 0, formatErr(start, field(), fmt.Errorf("%w: %d %s cannot fit in the %d bytes left",
			ErrTruncated, n, what, d.left()))
	}
	if need > d.left() {
		return 0, formatErr(start, field(), fmt.Errorf("%w: %d %s need at least %d bytes, only %d left",
			ErrTruncated, n, what, need, d.left()))
	}
	return n, nil
}

func constField(s string) func() string { return func() string { return s } }

// capHint bounds preallocation for counts whose elements decode into larger Go values than
// they occupy in the file (strings, arrays, KVs, tensor infos): a corrupt count inside a large
// file then costs memory only for elements actually read.
func capHint(n uint64) int { return int(min(n, 1<<16)) }

// value decodes one value of type t; depth counts enclosing arrays.
func (d *decoder) value(t ValueType, field func() string, depth int) (any, error) {
	switch t {
	case TypeString:
		return d.str(field)
	case TypeArray:
		return d.array(field, depth)
	}
	size := t.fixedSize()
	b, ok := d.take(size)
	if !ok {
		return nil, truncatedErr(d.off, field(), size, d.left())
	}
	return scalar(t, b), nil
}

func scalar(t ValueType, b []byte) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0]
	case TypeInt8:
		return int8(b[0])
	case TypeUint16:
		return le.Uint16(b)
	case TypeInt16:
		return int16(le.Uint16(b))
	case TypeUint32:
		return le.Uint32(b)
	case TypeInt32:
		return int32(le.Uint32(b))
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b))
	case TypeBool:
		return b[0] != 0
	case TypeUint64:
		return le.Uint64(b)
	case TypeInt64:
		return int64(le.Uint64(b))
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(b))
	}
	return nil
}

func (d *decoder) array(field func() string, depth int) (Array, error) {
	if depth >= maxArrayDepth {
		return Array{}, invalidErr(d.off, field(), "arrays nested deeper than %d levels", maxArrayDepth)
	}
	typeAt := d.off
	et, err := d.u32(field)
	if err != nil {
		return Array{}, err
	}
	elem := ValueType(et)
	if !elem.Valid() {
		return Array{}, formatErr(typeAt, field(), fmt.Errorf("%w %d (array element)", ErrUnknownValueType, et))
	}
	n, err := d.count(field, elem.String()+" array elements", elem.minSize())
	if err != nil {
		return Array{}, err
	}
	a := Array{Elem: elem}
	elemField := func(i uint64) func() string {
		return func() string { return fmt.Sprintf("%s[%d]", field(), i) }
	}
	switch elem {
	case TypeString:
		s := make([]string, 0, capHint(n))
		for i := range n {
			v, err := d.str(elemField(i))
			if err != nil {
				return Array{}, err
			}
			s = append(s, v)
		}
		a.Values = s
	case TypeArray:
		s := make([]Array, 0, capHint(n))
		for i := range n {
			v, err := d.array(elemField(i), depth+1)
			if err != nil {
				return Array{}, err
			}
			s = append(s, v)
		}
		a.Values = s
	default:
		b, _ := d.take(n * elem.fixedSize()) // count checked that it fits
		a.Values = fixedArray(elem, b, int(n))
	}
	return a, nil
}

func fixedArray(t ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return slices.Clone(b)
	case TypeInt8:
		return decodeSlice(b, n, 1, func(p []byte) int8 { return int8(p[0]) })
	case TypeUint16:
		return decodeSlice(b, n, 2, le.Uint16)
	case TypeInt16:
		return decodeSlice(b, n, 2, func(p []byte) int16 { return int16(le.Uint16(p)) })
	case TypeUint32:
		return decodeSlice(b, n, 4, le.Uint32)
	case TypeInt32:
		return decodeSlice(b, n, 4, func(p []byte) int32 { return int32(le.Uint32(p)) })
	case TypeFloat32:
		return decodeSlice(b, n, 4, func(p []byte) float32 { return math.Float32frombits(le.Uint32(p)) })
	case TypeBool:
		return decodeSlice(b, n, 1, func(p []byte) bool { return p[0] != 0 })
	case TypeUint64:
		return decodeSlice(b, n, 8, le.Uint64)
	case TypeInt64:
		return decodeSlice(b, n, 8, func(p []byte) int64 { return int64(le.Uint64(p)) })
	case TypeFloat64:
		return decodeSlice(b, n, 8, func(p []byte) float64 { return math.Float64frombits(le.Uint64(p)) })
	}
	return nil
}

func decodeSlice[T any](b []byte, n, size int, conv func([]byte) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = conv(b[i*size:])
	}
	return out
}
