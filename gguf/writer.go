package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// maxNameLen is ggml's GGML_MAX_NAME minus the terminator: llama.cpp refuses longer tensor names.
const maxNameLen = 63

// TensorData is a tensor held in memory, for Write.
type TensorData struct {
	// Name must be unique and at most 63 bytes (llama.cpp's GGML_MAX_NAME limit).
	Name string
	// Shape lists the dimensions ggml-style: Shape[0] (ne0) is the row length.
	Shape []uint64
	// Type is the ggml storage type Data is packed in.
	Type GGMLType
	// Data is the packed tensor, exactly Type.RowSize(elements) bytes.
	Data []byte
}

// TensorSource is a tensor whose bytes are produced while the file is written, so that a
// multi-gigabyte model never has to sit in memory at once.
type TensorSource struct {
	// Name, Shape and Type are as in TensorData.
	Name  string
	Shape []uint64 // ggml order: Shape[0] is the row length
	Type  GGMLType // the storage type Write produces
	// Write writes exactly the tensor's bytes (Type.RowSize(elements)); writing more or fewer
	// fails WriteStream.
	Write func(w io.Writer) error
}

// Write writes a GGUF v3 file laid out as llama.cpp and gguf-py write it: header, kvs in the
// given order, tensor infos, padding to the alignment (general.alignment from kvs if present,
// which must be a uint32 power of two, else 32), then each tensor's data padded to the
// alignment. KV values use the Go types Parse produces, so a parsed file's KV and tensors write
// back unchanged. Everything is validated before the first byte is written.
func Write(w io.Writer, kvs []KV, tensors []TensorData) error {
	srcs := make([]TensorSource, len(tensors))
	for i, t := range tensors {
		srcs[i] = TensorSource{Name: t.Name, Shape: t.Shape, Type: t.Type,
			Write: func(w io.Writer) error { _, err := w.Write(t.Data); return err }}
		size, err := tensorSize(t.Name, t.Shape, t.Type)
		if err != nil {
			return fmt.Errorf("gguf: write: tensor %d %q: %w", i, t.Name, err)
		}
		if uint64(len(t.Data)) != size {
			return fmt.Errorf("gguf: write: tensor %d %q: %w: data is %d bytes, %s %v needs %d",
				i, t.Name, ErrInvalid, len(t.Data), t.Type, t.Shape, size)
		}
	}
	return WriteStream(w, kvs, srcs)
}

// WriteFile writes the file through a temporary file in the same directory renamed over path
// once complete, so an interrupted write never leaves a truncated model behind.
func WriteFile(path string, kvs []KV, tensors []TensorData) error {
	return writeFileWith(path, func(w io.Writer) error { return Write(w, kvs, tensors) })
}

// WriteFileStream is WriteFile for streamed tensors.
func WriteFileStream(path string, kvs []KV, tensors []TensorSource) error {
	return writeFileWith(path, func(w io.Writer) error { return WriteStream(w, kvs, tensors) })
}

func writeFileWith(path string, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteStream is Write with tensor data produced on demand by each TensorSource, in order.
func WriteStream(w io.Writer, kvs []KV, tensors []TensorSource) error {
	align, err := checkKVs(kvs)
	if err != nil {
		return fmt.Errorf("gguf: write: %w", err)
	}
	sizes := make([]uint64, len(tensors))
	names := make(map[string]int, len(tensors))
	for i, t := range tensors {
		if sizes[i], err = tensorSize(t.Name, t.Shape, t.Type); err != nil {
			return fmt.Errorf("gguf: write: tensor %d %q: %w", i, t.Name, err)
		}
		if j, dup := names[t.Name]; dup {
			return fmt.Errorf("gguf: write: tensor %d %q: %w name (also tensor %d)", i, t.Name, ErrDuplicate, j)
		}
		names[t.Name] = i
		if t.Write == nil {
			return fmt.Errorf("gguf: write: tensor %d %q: %w: nil Write func", i, t.Name, ErrInvalid)
		}
	}

	bw := bufio.NewWriterSize(w, 1<<20)
	e := &encoder{w: bw}
	e.bytes([]byte("GGUF"))
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		e.u32(uint32(kv.Type))
		e.value(kv.Type, kv.Value)
	}
	var offset uint64
	for i, t := range tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(offset)
		offset = alignUp(offset+sizes[i], align)
	}
	e.pad(align)
	if e.err != nil {
		return e.err
	}
	for i, t := range tensors {
		cw := &exactWriter{w: bw, left: sizes[i]}
		if err := t.Write(cw); err != nil {
			return fmt.Errorf("gguf: write: tensor %d %q: %w", i, t.Name, err)
		}
		if cw.err != nil {
			return fmt.Errorf("gguf: write: tensor %d %q: %w", i, t.Name, cw.err)
		}
		if cw.left != 0 {
			return fmt.Errorf("gguf: write: tensor %d %q: %w: Write produced %d bytes, want %d",
				i, t.Name, ErrInvalid, sizes[i]-cw.left, sizes[i])
		}
		e.n += sizes[i]
		e.pad(align)
		if e.err != nil {
			return e.err
		}
	}
	return bw.Flush()
}

var errTensorOverrun = errors.New("Write produced more bytes than the tensor's size")

// exactWriter passes through at most left bytes, so a TensorSource that writes too much fails
// before it corrupts the following tensor's offset.
type exactWriter struct {
	w    io.Writer
	left uint64
	err  error
}

func (c *exactWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if uint64(len(p)) > c.left {
		c.err = fmt.Errorf("%w: %w", ErrInvalid, errTensorOverrun)
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.left -= uint64(n)
	if err != nil {
		c.err = err
	}
	return n, err
}

// tensorSize checks a tensor description as the reader would and returns its byte size.
func tensorSize(name string, shape []uint64, t GGMLType) (uint64, error) {
	if name == "" {
		return 0, fmt.Errorf("%w: empty tensor name", ErrInvalid)
	}
	if len(name) > maxNameLen {
		return 0, fmt.Errorf("%w: name is %d bytes, llama.cpp allows %d", ErrInvalid, len(name), maxNameLen)
	}
	if len(shape) == 0 || len(shape) > MaxDims {
		return 0, fmt.Errorf("%w: %d dimensions, want 1..%d", ErrInvalid, len(shape), MaxDims)
	}
	if !t.Known() {
		return 0, fmt.Errorf("%w %d", ErrUnknownGGMLType, uint32(t))
	}
	elems := uint64(1)
	for _, d := range shape {
		if d == 0 {
			return 0, fmt.Errorf("%w: zero-length dimension in shape %v", ErrInvalid, shape)
		}
		if d > math.MaxInt64/elems {
			return 0, fmt.Errorf("%w: element count of shape %v overflows int64", ErrInvalid, shape)
		}
		elems *= d
	}
	if shape[0]%t.BlockSize() != 0 {
		return 0, fmt.Errorf("%w: row length %d is not a multiple of the %s block size %d", ErrInvalid, shape[0], t, t.BlockSize())
	}
	size, ok := t.RowSize(elems)
	if !ok {
		return 0, fmt.Errorf("%w: byte size of %d %s elements overflows", ErrInvalid, elems, t)
	}
	return size, nil
}

// checkKVs validates keys and value types and returns the alignment the file will use.
func checkKVs(kvs []KV) (uint64, error) {
	align := uint64(DefaultAlignment)
	seen := make(map[string]int, len(kvs))
	for i, kv := range kvs {
		if kv.Key == "" {
			return 0, fmt.Errorf("kv %d: %w: empty key", i, ErrInvalid)
		}
		if j, dup := seen[kv.Key]; dup {
			return 0, fmt.Errorf("kv %d %q: %w key (also kv %d)", i, kv.Key, ErrDuplicate, j)
		}
		seen[kv.Key] = i
		if err := checkValue(kv.Type, kv.Value, 0); err != nil {
			return 0, fmt.Errorf("kv %d %q: %w", i, kv.Key, err)
		}
		if kv.Key == "general.alignment" {
			// llama.cpp reads the alignment with gguf_get_val_u32, which aborts on other types.
			a, ok := kv.Value.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return 0, fmt.Errorf("kv %d %q: %w: alignment %v (%s) is not a uint32 power of two",
					i, kv.Key, ErrInvalid, kv.Value, kv.Type)
			}
			align = uint64(a)
		}
	}
	return align, nil
}

// checkValue reports whether v has the Go type Parse produces for t.
func checkValue(t ValueType, v any, depth int) error {
	ok := false
	switch t {
	case TypeUint8:
		_, ok = v.(uint8)
	case TypeInt8:
		_, ok = v.(int8)
	case TypeUint16:
		_, ok = v.(uint16)
	case TypeInt16:
		_, ok = v.(int16)
	case TypeUint32:
		_, ok = v.(uint32)
	case TypeInt32:
		_, ok = v.(int32)
	case TypeFloat32:
		_, ok = v.(float32)
	case TypeBool:
		_, ok = v.(bool)
	case TypeString:
		_, ok = v.(string)
	case TypeUint64:
		_, ok = v.(uint64)
	case TypeInt64:
		_, ok = v.(int64)
	case TypeFloat64:
		_, ok = v.(float64)
	case TypeArray:
		a, isArr := v.(Array)
		if !isArr {
			break
		}
		return checkArray(a, depth)
	default:
		return fmt.Errorf("%w %d", ErrUnknownValueType, uint32(t))
	}
	if !ok {
		return fmt.Errorf("%w: value of Go type %T for a %s", ErrInvalid, v, t)
	}
	return nil
}

func checkArray(a Array, depth int) error {
	if depth >= maxArrayDepth {
		return fmt.Errorf("%w: arrays nested deeper than %d levels", ErrInvalid, maxArrayDepth)
	}
	if a.Values == nil && a.Elem.Valid() {
		return nil // an empty array
	}
	var ok bool
	switch a.Elem {
	case TypeUint8:
		_, ok = a.Values.([]uint8)
	case TypeInt8:
		_, ok = a.Values.([]int8)
	case TypeUint16:
		_, ok = a.Values.([]uint16)
	case TypeInt16:
		_, ok = a.Values.([]int16)
	case TypeUint32:
		_, ok = a.Values.([]uint32)
	case TypeInt32:
		_, ok = a.Values.([]int32)
	case TypeFloat32:
		_, ok = a.Values.([]float32)
	case TypeBool:
		_, ok = a.Values.([]bool)
	case TypeString:
		_, ok = a.Values.([]string)
	case TypeUint64:
		_, ok = a.Values.([]uint64)
	case TypeInt64:
		_, ok = a.Values.([]int64)
	case TypeFloat64:
		_, ok = a.Values.([]float64)
	case TypeArray:
		var sub []Array
		if sub, ok = a.Values.([]Array); ok {
			for i, s := range sub {
				if err := checkArray(s, depth+1); err != nil {
					return fmt.Errorf("element %d: %w", i, err)
				}
			}
		}
	default:
		return fmt.Errorf("%w %d (array element)", ErrUnknownValueType, uint32(a.Elem))
	}
	if !ok {
		return fmt.Errorf("%w: array values of Go type %T for %s elements", ErrInvalid, a.Values, a.Elem)
	}
	return nil
}

// encoder writes little-endian GGUF fields, remembering the first error and the byte count
// (for padding).
type encoder struct {
	w       io.Writer
	n       uint64
	err     error
	scratch [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += uint64(n)
	e.err = err
}

func (e *encoder) u8(v uint8) { e.scratch[0] = v; e.bytes(e.scratch[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.scratch[:], v)
	e.bytes(e.scratch[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.scratch[:], v)
	e.bytes(e.scratch[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.scratch[:], v)
	e.bytes(e.scratch[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if sw, ok := e.w.(io.StringWriter); ok && e.err == nil {
		n, err := sw.WriteString(s)
		e.n += uint64(n)
		e.err = err
		return
	}
	e.bytes([]byte(s))
}

var zeroPad [256]byte

func (e *encoder) pad(align uint64) {
	for left := alignUp(e.n, align) - e.n; left > 0 && e.err == nil; {
		k := min(left, uint64(len(zeroPad)))
		e.bytes(zeroPad[:k])
		left -= k
	}
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// value encodes v, already checked by checkValue.
func (e *encoder) value(t ValueType, v any) {
	switch t {
	case TypeUint8:
		e.u8(v.(uint8))
	case TypeInt8:
		e.u8(uint8(v.(int8)))
	case TypeUint16:
		e.u16(v.(uint16))
	case TypeInt16:
		e.u16(uint16(v.(int16)))
	case TypeUint32:
		e.u32(v.(uint32))
	case TypeInt32:
		e.u32(uint32(v.(int32)))
	case TypeFloat32:
		e.u32(math.Float32bits(v.(float32)))
	case TypeBool:
		e.u8(boolByte(v.(bool)))
	case TypeString:
		e.str(v.(string))
	case TypeUint64:
		e.u64(v.(uint64))
	case TypeInt64:
		e.u64(uint64(v.(int64)))
	case TypeFloat64:
		e.u64(math.Float64bits(v.(float64)))
	case TypeArray:
		e.array(v.(Array))
	}
}

func (e *encoder) array(a Array) {
	e.u32(uint32(a.Elem))
	e.u64(uint64(a.Len()))
	switch vs := a.Values.(type) {
	case []uint8:
		e.bytes(vs)
	case []int8:
		encodeEach(e, vs, func(x int8) { e.u8(uint8(x)) })
	case []uint16:
		encodeEach(e, vs, e.u16)
	case []int16:
		encodeEach(e, vs, func(x int16) { e.u16(uint16(x)) })
	case []uint32:
		encodeEach(e, vs, e.u32)
	case []int32:
		encodeEach(e, vs, func(x int32) { e.u32(uint32(x)) })
	case []float32:
		encodeEach(e, vs, func(x float32) { e.u32(math.Float32bits(x)) })
	case []bool:
		encodeEach(e, vs, func(x bool) { e.u8(boolByte(x)) })
	case []string:
		encodeEach(e, vs, e.str)
	case []uint64:
		encodeEach(e, vs, e.u64)
	case []int64:
		encodeEach(e, vs, func(x int64) { e.u64(uint64(x)) })
	case []float64:
		encodeEach(e, vs, func(x float64) { e.u64(math.Float64bits(x)) })
	case []Array:
		encodeEach(e, vs, e.array)
	}
}

func encodeEach[T any](e *encoder, vs []T, put func(T)) {
	for _, v := range vs {
		if e.err != nil {
			return
		}
		put(v)
	}
}
