package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// testWriter encodes GGUF images for tests. It records where fields start so tests can corrupt
// them precisely.
type testWriter struct {
	buf   []byte
	marks map[string]int
}

func (w *testWriter) mark(name string) {
	if w.marks == nil {
		w.marks = map[string]int{}
	}
	w.marks[name] = len(w.buf)
}

func (w *testWriter) u8(v uint8)   { w.buf = append(w.buf, v) }
func (w *testWriter) u16(v uint16) { w.buf = binary.LittleEndian.AppendUint16(w.buf, v) }
func (w *testWriter) u32(v uint32) { w.buf = binary.LittleEndian.AppendUint32(w.buf, v) }
func (w *testWriter) u64(v uint64) { w.buf = binary.LittleEndian.AppendUint64(w.buf, v) }
func (w *testWriter) str(s string) { w.u64(uint64(len(s))); w.buf = append(w.buf, s...) }

// value encodes v, whose Go type must match t as in KV.Value.
func (w *testWriter) value(t ValueType, v any) {
	switch t {
	case TypeUint8:
		w.u8(v.(uint8))
	case TypeInt8:
		w.u8(uint8(v.(int8)))
	case TypeUint16:
		w.u16(v.(uint16))
	case TypeInt16:
		w.u16(uint16(v.(int16)))
	case TypeUint32:
		w.u32(v.(uint32))
	case TypeInt32:
		w.u32(uint32(v.(int32)))
	case TypeFloat32:
		w.u32(math.Float32bits(v.(float32)))
	case TypeBool:
		if v.(bool) {
			w.u8(1)
		} else {
			w.u8(0)
		}
	case TypeString:
		w.str(v.(string))
	case TypeUint64:
		w.u64(v.(uint64))
	case TypeInt64:
		w.u64(uint64(v.(int64)))
	case TypeFloat64:
		w.u64(math.Float64bits(v.(float64)))
	case TypeArray:
		a := v.(Array)
		w.u32(uint32(a.Elem))
		w.u64(uint64(a.Len()))
		w.elems(a)
	default:
		panic(fmt.Sprintf("testWriter: type %d", t))
	}
}

func (w *testWriter) elems(a Array) {
	switch vs := a.Values.(type) {
	case []uint8:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	case []int8:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	case []uint16:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	case []int16:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	case []uint32:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	case []int32:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	case []float32:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	case []bool:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	case []string:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	case []uint64:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	case []int64:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	case []float64:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	case []Array:
		for _, x := range vs {
			w.value(a.Elem, x)
		}
	default:
		panic(fmt.Sprintf("testWriter: array values %T", a.Values))
	}
}

// testTensor is a tensor to encode; data is padded or truncated to the size the shape implies.
type testTensor struct {
	name  string
	shape []uint64
	typ   GGMLType
	data  []byte
}

// testFile describes a GGUF image; build lays tensors out contiguously at aligned offsets like
// llama.cpp's writer.
type testFile struct {
	version   uint32
	alignment uint64 // 0: default; written as general.alignment only if listed in kvs
	kvs       []KV
	tensors   []testTensor
}

func (tf testFile) build() *testWriter {
	w := &testWriter{}
	align := tf.alignment
	if align == 0 {
		align = DefaultAlignment
	}
	version := tf.version
	if version == 0 {
		version = 3
	}
	w.mark("magic")
	w.buf = append(w.buf, "GGUF"...)
	w.mark("version")
	w.u32(version)
	w.mark("n_tensors")
	w.u64(uint64(len(tf.tensors)))
	w.mark("n_kv")
	w.u64(uint64(len(tf.kvs)))
	for i, kv := range tf.kvs {
		w.mark(fmt.Sprintf("kv%d", i))
		w.str(kv.Key)
		w.mark(fmt.Sprintf("kv%d.type", i))
		w.u32(uint32(kv.Type))
		w.mark(fmt.Sprintf("kv%d.value", i))
		w.value(kv.Type, kv.Value)
	}
	var offsets []uint64
	off := uint64(0)
	for _, t := range tf.tensors {
		offsets = append(offsets, off)
		off = alignUp(off+tensorBytes(t), align)
	}
	for i, t := range tf.tensors {
		w.mark(fmt.Sprintf("t%d", i))
		w.str(t.name)
		w.mark(fmt.Sprintf("t%d.ndims", i))
		w.u32(uint32(len(t.shape)))
		w.mark(fmt.Sprintf("t%d.dims", i))
		for _, d := range t.shape {
			w.u64(d)
		}
		w.mark(fmt.Sprintf("t%d.type", i))
		w.u32(uint32(t.typ))
		w.mark(fmt.Sprintf("t%d.offset", i))
		w.u64(offsets[i])
	}
	w.mark("infos_end")
	if len(tf.tensors) > 0 {
		for uint64(len(w.buf))%align != 0 {
			w.u8(0)
		}
	}
	w.mark("data")
	base := len(w.buf)
	for i, t := range tf.tensors {
		for uint64(len(w.buf)-base) < offsets[i] {
			w.u8(0)
		}
		n := tensorBytes(t)
		b := make([]byte, n)
		copy(b, t.data)
		w.buf = append(w.buf, b...)
	}
	if len(tf.tensors) > 0 {
		for uint64(len(w.buf)-base)%align != 0 {
			w.u8(0)
		}
	}
	return w
}

func tensorBytes(t testTensor) uint64 {
	n := uint64(1)
	for _, d := range t.shape {
		n *= d
	}
	s, _ := t.typ.RowSize(n)
	return s
}
