package gguf

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

func (d *decoder) tensorInfos(f *File, n uint64) ([]uint64, error) {
	f.Tensors = make([]TensorInfo, 0, capHint(n))
	offsetAt := make([]uint64, 0, capHint(n))
	f.tensorIndex = make(map[string]int, capHint(n))
	for i := range n {
		start := d.off
		name, err := d.str(func() string { return fmt.Sprintf("tensor %d name", i) })
		if err != nil {
			return nil, err
		}
		field := func(what string) func() string {
			return func() string { return fmt.Sprintf("tensor %d %q %s", i, name, what) }
		}
		if j, dup := f.tensorIndex[name]; dup {
			return nil, formatErr(start, field("name")(), fmt.Errorf("%w tensor name (also tensor %d)", ErrDuplicate, j))
		}
		dimsAt := d.off
		nDims, err := d.u32(field("n_dims"))
		if err != nil {
			return nil, err
		}
		if nDims == 0 || nDims > MaxDims {
			return nil, invalidErr(dimsAt, field("n_dims")(), "%d dimensions, want 1..%d", nDims, MaxDims)
		}
		t := TensorInfo{Name: name, Shape: make([]uint64, nDims)}
		elems := uint64(1)
		for j := range t.Shape {
			at := d.off
			dimField := func() string { return field(fmt.Sprintf("dim %d", j))() }
			if t.Shape[j], err = d.u64(dimField); err != nil {
				return nil, err
			}
			if t.Shape[j] == 0 {
				return nil, invalidErr(at, dimField(), "zero-length dimension")
			}
			hi, lo := bits.Mul64(elems, t.Shape[j])
			if hi != 0 || lo > math.MaxInt64 {
				return nil, invalidErr(at, dimField(), "element count of shape %v overflows int64", t.Shape[:j+1])
			}
			elems = lo
		}
		typeAt := d.off
		typ, err := d.u32(field("type"))
		if err != nil {
			return nil, err
		}
		t.Type = GGMLType(typ)
		if !t.Type.Known() {
			return nil, formatErr(typeAt, field("type")(), fmt.Errorf("%w %d", ErrUnknownGGMLType, typ))
		}
		if t.Shape[0]%t.Type.BlockSize() != 0 {
			return nil, invalidErr(typeAt, field("type")(), "row length %d is not a multiple of the %s block size %d",
				t.Shape[0], t.Type, t.Type.BlockSize())
		}
		size, ok := t.Type.RowSize(elems)
		if !ok {
			return nil, invalidErr(typeAt, field("type")(), "byte size of %d %s elements overflows", elems, t.Type)
		}
		t.Size = size
		offsetAt = append(offsetAt, d.off)
		if t.Offset, err = d.u64(field("offset")); err != nil {
			return nil, err
		}
		f.tensorIndex[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	return offsetAt, nil
}

// dataSection places the data section after the alignment padding and checks that every
// tensor is aligned, inside the file and disjoint from the others. Errors point at the tensor's
// offset field (offsetAt[i]), the value that is wrong or that the file's length contradicts.
func (d *decoder) dataSection(f *File, offsetAt []uint64) error {
	f.DataOffset = d.off
	if len(f.Tensors) == 0 {
		// llama.cpp does not require the padding when there is no data (vocab-only files).
		if p := alignUp(d.off, f.Alignment); p <= uint64(len(d.buf)) {
			f.DataOffset = p
		}
		return nil
	}
	f.DataOffset = alignUp(d.off, f.Alignment)
	if f.DataOffset > uint64(len(d.buf)) {
		return truncatedErr(d.off, "data section padding", f.DataOffset-d.off, d.left())
	}
	dataLen := uint64(len(d.buf)) - f.DataOffset
	order := make([]int, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		order[i] = i
		field := func() string { return fmt.Sprintf("tensor %d %q offset", i, t.Name) }
		if t.Offset%f.Alignment != 0 {
			return invalidErr(offsetAt[i], field(), "data offset %d is not a multiple of the alignment %d", t.Offset, f.Alignment)
		}
		if t.Offset > dataLen {
			return formatErr(offsetAt[i], field(), fmt.Errorf("%w: data offset %d is past the end of the %d-byte data section",
				ErrTruncated, t.Offset, dataLen))
		}
		if t.Size > dataLen-t.Offset {
			return formatErr(offsetAt[i], field(), fmt.Errorf("%w: %d bytes at data offset %d, but the data section ends after %d",
				ErrTruncated, t.Size, t.Offset, dataLen))
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmpU64(f.Tensors[a].Offset, f.Tensors[b].Offset)
	})
	for k := 1; k < len(order); k++ {
		p, c := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if p.Offset+p.Size > c.Offset {
			return invalidErr(offsetAt[order[k]], fmt.Sprintf("tensor %d %q offset", order[k], c.Name),
				"overlaps tensor %d %q (data offsets %d+%d > %d)", order[k-1], p.Name, p.Offset, p.Size, c.Offset)
		}
	}
	return nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func addOK(a, b uint64) (uint64, bool) {
	s, carry := bits.Add64(a, b, 0)
	return s, carry == 0
}

// alignUp rounds off up to a multiple of the power-of-two a (a <= 1<<32, so no overflow for
// offsets inside a slice).
func alignUp(off, a uint64) uint64 { return (off + a - 1) &^ (a - 1) }
