// Package gguf reads GGUF model files (llama.cpp's container for metadata and tensors), versions 2
// and 3, without cgo. Files are memory-mapped so tensor bytes can be uploaded to the GPU without an
// intermediate copy. Every length and offset is checked against the file before it is used, so a
// damaged or hostile file yields a *FormatError instead of a panic or a huge allocation.
package gguf

import (
	"errors"
	"fmt"
	"os"
)

const (
	// DefaultAlignment applies when general.alignment is absent.
	DefaultAlignment = 32
	// MaxDims is ggml's GGML_MAX_DIMS: tensors have at most 4 dimensions.
	MaxDims = 4
	// maxArrayDepth bounds nested arrays so a crafted file cannot exhaust the stack.
	maxArrayDepth = 64
	// minTensorInfoSize: name length, n_dims, type and offset.
	minTensorInfoSize = 8 + 4 + 4 + 8
	// minKVSize: key length, value type and a one-byte value.
	minKVSize = 8 + 4 + 1
)

// TensorInfo describes one tensor; its bytes are File.TensorData.
type TensorInfo struct {
	// Name is unique within the file (e.g. "blk.0.attn_q.weight").
	Name string
	// Shape lists the dimensions ggml-style: Shape[0] (ne0) is the contiguous row length.
	Shape []uint64
	// Type is the ggml storage type, which fixes Size for the Shape.
	Type GGMLType
	// Offset is relative to File.DataOffset, as stored in the file.
	Offset uint64
	// Size is the tensor's length in bytes.
	Size uint64
}

// NumElements returns the product of the dimensions.
func (t *TensorInfo) NumElements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is a parsed GGUF file. Metadata and tensor infos are copied out of the file; tensor data
// stays in the mapping and is valid until Close.
type File struct {
	// Version is the GGUF format version, 2 or 3 (others are rejected).
	Version uint32
	// KV holds the metadata in file order.
	KV []KV
	// Tensors holds the tensor infos in file order.
	Tensors []TensorInfo
	// Alignment is general.alignment or DefaultAlignment.
	Alignment uint64
	// DataOffset is the absolute offset of the tensor data section.
	DataOffset uint64
	// FileSize is the whole file's length in bytes.
	FileSize uint64

	data        []byte
	unmap       func() error
	kvIndex     map[string]int
	tensorIndex map[string]int
}

// Open memory-maps and parses the file at path (where mmap is unavailable the file is read
// whole). The File must be closed to release the mapping.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: not a regular file", path)
	}
	data, unmap, err := mapFile(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		_ = unmap()
		var fe *FormatError
		if errors.As(err, &fe) {
			fe.Path = path
		}
		return nil, err
	}
	f.unmap = unmap
	return f, nil
}

// Close releases the mapping; TensorData returns nil afterwards. It is safe to call twice.
func (f *File) Close() error {
	f.data = nil
	if f.unmap == nil {
		return nil
	}
	u := f.unmap
	f.unmap = nil
	return u()
}

// Tensor finds a tensor by name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData returns the tensor's bytes as a sub-slice of the mapping (read-only: writing to
// a mapped file faults). It returns nil after Close or for a tensor outside this file.
func (f *File) TensorData(t *TensorInfo) []byte {
	start, ok1 := addOK(f.DataOffset, t.Offset)
	end, ok2 := addOK(start, t.Size)
	if !ok1 || !ok2 || end > uint64(len(f.data)) {
		return nil
	}
	return f.data[start:end:end]
}

// Parse parses a GGUF image held in memory. data is retained (TensorData slices it) and must
// not be modified while the File is in use.
func Parse(data []byte) (*File, error) {
	d := &decoder{buf: data}
	f := &File{FileSize: uint64(len(data)), data: data, Alignment: DefaultAlignment}
	if err := d.header(f); err != nil {
		return nil, err
	}
	return f, nil
}

func (d *decoder) header(f *File) error {
	m, ok := d.take(4)
	if !ok {
		return truncatedErr(0, "magic", 4, d.left())
	}
	if string(m) != "GGUF" {
		return formatErr(0, "magic", fmt.Errorf("%w %q, want \"GGUF\" (not a GGUF file)", ErrBadMagic, m))
	}
	var err error
	if f.Version, err = d.u32(constField("version")); err != nil {
		return err
	}
	switch v := f.Version; {
	case v == 0:
		return formatErr(4, "version", fmt.Errorf("%w 0", ErrUnsupportedVersion))
	case v == 1:
		return formatErr(4, "version", fmt.Errorf("%w 1: GGUF v1 (32-bit counts) is obsolete; re-convert the model", ErrUnsupportedVersion))
	case v != 2 && v != 3 && v&0xFFFF == 0:
		return formatErr(4, "version", fmt.Errorf("%w 0x%x: a big-endian file? only little-endian GGUF is supported", ErrUnsupportedVersion, v))
	case v != 2 && v != 3:
		return formatErr(4, "version", fmt.Errorf("%w %d: only versions 2 and 3 are supported", ErrUnsupportedVersion, v))
	}
	nTensors, err := d.count(constField("tensor count"), "tensor infos", minTensorInfoSize)
	if err != nil {
		return err
	}
	nKV, err := d.count(constField("kv count"), "key-value pairs", minKVSize)
	if err != nil {
		return err
	}
	if err := d.kvs(f, nKV); err != nil {
		return err
	}
	offsetAt, err := d.tensorInfos(f, nTensors)
	if err != nil {
		return err
	}
	return d.dataSection(f, offsetAt)
}

func (d *decoder) kvs(f *File, n uint64) error {
	f.KV = make([]KV, 0, capHint(n))
	f.kvIndex = make(map[string]int, capHint(n))
	alignAt, alignIdx := uint64(0), 0
	for i := range n {
		start := d.off
		key, err := d.str(func() string { return fmt.Sprintf("kv %d key", i) })
		if err != nil {
			return err
		}
		field := func(what string) func() string {
			return func() string { return fmt.Sprintf("kv %d %q %s", i, key, what) }
		}
		if key == "" {
			return invalidErr(start, fmt.Sprintf("kv %d key", i), "empty key")
		}
		if j, dup := f.kvIndex[key]; dup {
			return formatErr(start, field("key")(), fmt.Errorf("%w key (also kv %d)", ErrDuplicate, j))
		}
		typeAt := d.off
		t, err := d.u32(field("type"))
		if err != nil {
			return err
		}
		vt := ValueType(t)
		if !vt.Valid() {
			return formatErr(typeAt, field("type")(), fmt.Errorf("%w %d", ErrUnknownValueType, t))
		}
		valueAt := d.off
		v, err := d.value(vt, field("value"), 0)
		if err != nil {
			return err
		}
		if key == "general.alignment" {
			alignAt, alignIdx = valueAt, len(f.KV)
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Type: vt, Value: v})
	}
	if _, ok := f.Lookup("general.alignment"); ok {
		a, ok := f.Uint("general.alignment")
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<32 {
			kv, _ := f.Lookup("general.alignment")
			return invalidErr(alignAt, fmt.Sprintf("kv %d \"general.alignment\" value", alignIdx),
				"alignment %v (%s) is not a positive power of two", kv.Value, kv.Type)
		}
		f.Alignment = a
	}
	return nil
}
