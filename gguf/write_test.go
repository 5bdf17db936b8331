package gguf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sampleTensorData is sampleTensors with every tensor's data at full length.
func sampleTensorData() []TensorData {
	var out []TensorData
	for i, tt := range sampleTensors() {
		data := make([]byte, tensorBytes(tt))
		copy(data, tt.data)
		for j := len(tt.data); j < len(data); j++ {
			data[j] = byte(i + j)
		}
		out = append(out, TensorData{Name: tt.name, Shape: tt.shape, Type: tt.typ, Data: data})
	}
	return out
}

func writeBytes(t *testing.T, kvs []KV, tensors []TensorData) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, kvs, tensors); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes()
}

// checkParsed asserts that f holds exactly kvs and tensors, aligned to align.
func checkParsed(t *testing.T, f *File, kvs []KV, tensors []TensorData, align uint64) {
	t.Helper()
	if f.Version != 3 || f.Alignment != align || f.DataOffset%align != 0 {
		t.Errorf("version %d alignment %d data offset %d, want 3, %d, aligned", f.Version, f.Alignment, f.DataOffset, align)
	}
	if !reflect.DeepEqual(f.KV, kvs) {
		t.Errorf("KV mismatch:\n got %#v\nwant %#v", f.KV, kvs)
	}
	if len(f.Tensors) != len(tensors) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(tensors))
	}
	for i, want := range tensors {
		got := &f.Tensors[i]
		if got.Name != want.Name || !reflect.DeepEqual(got.Shape, want.Shape) || got.Type != want.Type || got.Offset%align != 0 {
			t.Errorf("tensor %d = %+v, want %s %v %s", i, got, want.Name, want.Shape, want.Type)
		}
		if !bytes.Equal(f.TensorData(got), want.Data) {
			t.Errorf("tensor %d %q: data differs", i, want.Name)
		}
	}
	if f.FileSize%align != 0 {
		t.Errorf("file size %d not padded to %d", f.FileSize, align)
	}
}

func TestWriteRoundTrip(t *testing.T) {
	for _, align := range []uint64{0, 32, 64, 1, 256} {
		kvs := allTypesKVs()
		if align != 0 {
			kvs = append(kvs, KV{"general.alignment", TypeUint32, uint32(align)})
		}
		wantAlign := align
		if align == 0 {
			wantAlign = DefaultAlignment
		}
		tensors := sampleTensorData()
		out := writeBytes(t, kvs, tensors)
		checkParsed(t, mustParse(t, out), kvs, tensors, wantAlign)
		// The test writer in writer_test.go lays files out independently; both must agree.
		ref := testFile{alignment: align, kvs: kvs, tensors: sampleTensors()}
		for i := range ref.tensors {
			ref.tensors[i].data = tensors[i].Data
		}
		if b := ref.build().buf; !bytes.Equal(out, b) {
			t.Errorf("align %d: %d bytes, test writer %d bytes, contents differ", align, len(out), len(b))
		}
	}
}

func TestWriteNoTensors(t *testing.T) {
	for _, kvs := range [][]KV{nil, allTypesKVs()} {
		out := writeBytes(t, kvs, nil)
		f := mustParse(t, out)
		if len(f.KV) != len(kvs) || len(f.Tensors) != 0 || len(out)%DefaultAlignment != 0 {
			t.Errorf("%d kvs, %d tensors, %d bytes", len(f.KV), len(f.Tensors), len(out))
		}
	}
}

func TestWriteDeepNesting(t *testing.T) {
	a := Array{TypeInt8, []int8{-7}}
	for range maxArrayDepth - 1 {
		a = Array{TypeArray, []Array{a, {TypeString, nil}}}
	}
	kvs := []KV{{"deep", TypeArray, a}}
	f := mustParse(t, writeBytes(t, kvs, nil))
	got := f.KV[0].Value.(Array)
	for got.Elem == TypeArray {
		vs := got.Values.([]Array)
		if len(vs) != 2 || vs[1].Len() != 0 {
			t.Fatalf("nested element %#v", vs)
		}
		got = vs[0]
	}
	if !reflect.DeepEqual(got, Array{TypeInt8, []int8{-7}}) {
		t.Errorf("innermost %#v", got)
	}
	tooDeep := []KV{{"deep", TypeArray, Array{TypeArray, []Array{a}}}}
	if err := Write(io.Discard, tooDeep, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("too deep: %v", err)
	}
}

// chunkedSource streams data a few bytes per Write call.
func chunkedSource(td TensorData, chunk int) TensorSource {
	return TensorSource{Name: td.Name, Shape: td.Shape, Type: td.Type, Write: func(w io.Writer) error {
		for off := 0; off < len(td.Data); off += chunk {
			if _, err := w.Write(td.Data[off:min(off+chunk, len(td.Data))]); err != nil {
				return err
			}
		}
		return nil
	}}
}

func TestWriteStreamMatchesWrite(t *testing.T) {
	kvs := append(allTypesKVs(), KV{"general.alignment", TypeUint32, uint32(64)})
	tensors := sampleTensorData()
	want := writeBytes(t, kvs, tensors)
	for _, chunk := range []int{1, 7, 1 << 20} {
		var srcs []TensorSource
		for _, td := range tensors {
			srcs = append(srcs, chunkedSource(td, chunk))
		}
		var buf bytes.Buffer
		if err := WriteStream(&buf, kvs, srcs); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("chunk %d: streamed output differs", chunk)
		}
	}
}

func TestWriteErrors(t *testing.T) {
	good := sampleTensorData()
	with := func(i int, edit func(*TensorData)) []TensorData {
		ts := append([]TensorData(nil), good...)
		edit(&ts[i])
		return ts
	}
	for _, tc := range []struct {
		name    string
		kvs     []KV
		tensors []TensorData
		want    error
		msg     string
	}{
		{"dup tensor", nil, with(1, func(td *TensorData) { td.Name = good[0].Name }), ErrDuplicate, "also tensor 0"},
		{"dup key", []KV{{"a", TypeBool, true}, {"a", TypeBool, false}}, nil, ErrDuplicate, `kv 1 "a"`},
		{"empty key", []KV{{"", TypeBool, true}}, nil, ErrInvalid, "empty key"},
		{"no dims", nil, with(0, func(td *TensorData) { td.Shape = nil }), ErrInvalid, "0 dimensions"},
		{"5 dims", nil, with(0, func(td *TensorData) { td.Shape = []uint64{1, 1, 1, 1, 6} }), ErrInvalid, "5 dimensions"},
		{"zero dim", nil, with(0, func(td *TensorData) { td.Shape = []uint64{3, 0} }), ErrInvalid, "zero-length"},
		{"row not blocks", nil, with(1, func(td *TensorData) { td.Shape = []uint64{48, 3} }), ErrInvalid, "block size 32"},
		{"short data", nil, with(0, func(td *TensorData) { td.Data = td.Data[1:] }), ErrInvalid, "data is 23 bytes"},
		{"unknown type", nil, with(0, func(td *TensorData) { td.Type = 4 }), ErrUnknownGGMLType, "unknown ggml type 4"},
		{"empty name", nil, with(0, func(td *TensorData) { td.Name = "" }), ErrInvalid, "empty tensor name"},
		{"long name", nil, with(0, func(td *TensorData) { td.Name = strings.Repeat("x", 64) }), ErrInvalid, "64 bytes"},
		{"overflow", nil, with(0, func(td *TensorData) { td.Shape = []uint64{1 << 40, 1 << 40} }), ErrInvalid, "overflows"},
		{"value type", []KV{{"n", TypeUint32, 5}}, nil, ErrInvalid, "Go type int for a uint32"},
		{"unknown value type", []KV{{"n", ValueType(13), 5}}, nil, ErrUnknownValueType, "13"},
		{"array type", []KV{{"a", TypeArray, Array{TypeInt32, []uint32{1}}}}, nil, ErrInvalid, "[]uint32 for int32 elements"},
		{"array value", []KV{{"a", TypeArray, []int32{1}}}, nil, ErrInvalid, "[]int32 for a array"},
		{"align 3", []KV{{"general.alignment", TypeUint32, uint32(3)}}, nil, ErrInvalid, "power of two"},
		{"align 0", []KV{{"general.alignment", TypeUint32, uint32(0)}}, nil, ErrInvalid, "power of two"},
		{"align string", []KV{{"general.alignment", TypeString, "32"}}, nil, ErrInvalid, "power of two"},
		{"align uint64", []KV{{"general.alignment", TypeUint64, uint64(32)}}, nil, ErrInvalid, "not a uint32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tc.kvs, tc.tensors)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want %v containing %q", err, tc.want, tc.msg)
			}
			if buf.Len() != 0 {
				t.Errorf("%d bytes written before the error", buf.Len())
			}
		})
	}
}

func TestWriteStreamErrors(t *testing.T) {
	td := sampleTensorData()[0]
	src := func(write func(w io.Writer) error) []TensorSource {
		return []TensorSource{{Name: td.Name, Shape: td.Shape, Type: td.Type, Write: write}}
	}
	short := src(func(w io.Writer) error { _, err := w.Write(td.Data[1:]); return err })
	if err := WriteStream(io.Discard, nil, short); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "produced 23 bytes, want 24") {
		t.Errorf("short: %v", err)
	}
	long := src(func(w io.Writer) error { _, err := w.Write(append(td.Data, 0)); return err })
	if err := WriteStream(io.Discard, nil, long); !errors.Is(err, ErrInvalid) {
		t.Errorf("long: %v", err)
	}
	ignored := src(func(w io.Writer) error { w.Write(append(td.Data, 0)); return nil })
	if err := WriteStream(io.Discard, nil, ignored); !errors.Is(err, ErrInvalid) {
		t.Errorf("long, error ignored: %v", err)
	}
	boom := errors.New("boom")
	failing := src(func(w io.Writer) error { return boom })
	if err := WriteStream(io.Discard, nil, failing); !errors.Is(err, boom) || !strings.Contains(err.Error(), td.Name) {
		t.Errorf("failing source: %v", err)
	}
	if err := WriteStream(io.Discard, nil, src(nil)); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil Write: %v", err)
	}
	// A failing destination: the error surfaces whatever the write size.
	total := len(writeBytes(t, allTypesKVs(), sampleTensorData()))
	for _, n := range []int{0, 10, 500, total - 1} {
		if err := Write(&failAfter{n: n}, allTypesKVs(), sampleTensorData()); !errors.Is(err, errDiskFull) {
			t.Errorf("fail after %d: %v", n, err)
		}
	}
}

var errDiskFull = errors.New("disk full")

type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errDiskFull
	}
	f.n -= len(p)
	return len(p), nil
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	kvs, tensors := allTypesKVs(), sampleTensorData()
	if err := WriteFile(path, kvs, tensors); err != nil {
		t.Fatal(err)
	}
	// Overwrite with the streaming form: the rename replaces the old file.
	var srcs []TensorSource
	for _, td := range tensors {
		srcs = append(srcs, chunkedSource(td, 5))
	}
	if err := WriteFileStream(path, kvs, srcs); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	checkParsed(t, f, kvs, tensors, DefaultAlignment)
	// A failed write leaves neither the target nor a temporary file.
	bad := filepath.Join(dir, "bad.gguf")
	if err := WriteFile(bad, []KV{{"", TypeBool, true}}, nil); err == nil {
		t.Fatal("no error")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "m.gguf" {
		t.Errorf("directory holds %v", entries)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x.gguf"), nil, nil); err == nil {
		t.Error("no error for a missing directory")
	}
}

// TestRewriteRealFiles writes every shared model's KVs and tensors back. gguf-py (synth256-F32,
// stories260K) and llama.cpp (llama-quantize's outputs) lay files out the same way, so the
// output must be byte-identical. The one difference: for vocab-only files (no tensors) gguf-py
// stops after the KVs, while llama.cpp's writer, and this one, still pad to the alignment.
func TestRewriteRealFiles(t *testing.T) {
	for _, p := range realModels(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var tensors []TensorData
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				tensors = append(tensors, TensorData{ti.Name, ti.Shape, ti.Type, f.TensorData(ti)})
			}
			out := writeBytes(t, f.KV, tensors)
			checkParsed(t, mustParse(t, out), f.KV, tensors, f.Alignment)
			orig := f.data
			if len(f.Tensors) == 0 && bytes.HasPrefix(out, orig) {
				pad := out[len(orig):]
				if len(pad) < int(f.Alignment) && len(out)%int(f.Alignment) == 0 && bytes.Count(pad, []byte{0}) == len(pad) {
					out = orig
				}
			}
			if !bytes.Equal(out, orig) {
				i := 0
				for i < min(len(out), len(orig)) && out[i] == orig[i] {
					i++
				}
				t.Errorf("not byte-identical: %d bytes vs %d, first difference at %d", len(out), len(orig), i)
			}
		})
	}
}
