package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// allTypesKVs has one entry per value type, plus nested and empty arrays.
func allTypesKVs() []KV {
	return []KV{
		{"general.architecture", TypeString, "llama"},
		{"u8", TypeUint8, uint8(200)},
		{"i8", TypeInt8, int8(-100)},
		{"u16", TypeUint16, uint16(60000)},
		{"i16", TypeInt16, int16(-30000)},
		{"u32", TypeUint32, uint32(4000000000)},
		{"i32", TypeInt32, int32(-2000000000)},
		{"f32", TypeFloat32, float32(1.5)},
		{"bool.t", TypeBool, true},
		{"bool.f", TypeBool, false},
		{"str", TypeString, "héllo\x00\xff"},
		{"empty.str", TypeString, ""},
		{"u64", TypeUint64, uint64(math.MaxUint64)},
		{"i64", TypeInt64, int64(math.MinInt64)},
		{"f64", TypeFloat64, math.Pi},
		{"arr.u8", TypeArray, Array{TypeUint8, []uint8{1, 2, 255}}},
		{"arr.i8", TypeArray, Array{TypeInt8, []int8{-1, 2}}},
		{"arr.u16", TypeArray, Array{TypeUint16, []uint16{1, 65535}}},
		{"arr.i16", TypeArray, Array{TypeInt16, []int16{-1, 7}}},
		{"arr.u32", TypeArray, Array{TypeUint32, []uint32{1, 2, 3}}},
		{"arr.i32", TypeArray, Array{TypeInt32, []int32{-1, 0, 1}}},
		{"arr.f32", TypeArray, Array{TypeFloat32, []float32{-0.5, 0.25}}},
		{"arr.bool", TypeArray, Array{TypeBool, []bool{true, false, true}}},
		{"arr.str", TypeArray, Array{TypeString, []string{"<unk>", "", "<s>"}}},
		{"arr.u64", TypeArray, Array{TypeUint64, []uint64{math.MaxUint64}}},
		{"arr.i64", TypeArray, Array{TypeInt64, []int64{-5, 5}}},
		{"arr.f64", TypeArray, Array{TypeFloat64, []float64{1e300}}},
		{"arr.empty", TypeArray, Array{TypeString, []string{}}},
		{"arr.nested", TypeArray, Array{TypeArray, []Array{
			{TypeInt32, []int32{1, 2}},
			{TypeString, []string{"a"}},
			{TypeArray, []Array{{TypeUint8, []uint8{}}}},
		}}},
	}
}

func sampleTensors() []testTensor {
	f32 := make([]byte, 4*6)
	for i := range 6 {
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(float32(i)+0.5))
	}
	return []testTensor{
		{name: "token_embd.weight", shape: []uint64{3, 2}, typ: TypeF32, data: f32},
		{name: "blk.0.attn_q.weight", shape: []uint64{64, 2}, typ: TypeQ4_0, data: bytes.Repeat([]byte{7}, 72)},
		{name: "blk.0.ffn.weight", shape: []uint64{256, 1, 1, 2}, typ: TypeQ4_K},
		{name: "norm", shape: []uint64{5}, typ: TypeF16, data: []byte{0, 0x3c, 0, 0xc0}},
	}
}

func sampleFile() testFile {
	return testFile{kvs: allTypesKVs(), tensors: sampleTensors()}
}

func mustParse(t *testing.T, data []byte) *File {
	t.Helper()
	f, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return f
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version uint32
		align   uint64
	}{
		{"v3-default-align", 3, 0},
		{"v2-default-align", 2, 0},
		{"v3-align-64", 3, 64},
		{"v3-align-1", 3, 1},
		{"v2-align-256", 2, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tf := sampleFile()
			tf.version = tc.version
			tf.alignment = tc.align
			if tc.align != 0 {
				tf.kvs = append(tf.kvs, KV{"general.alignment", TypeUint32, uint32(tc.align)})
			}
			w := tf.build()
			f := mustParse(t, w.buf)
			if f.Version != tc.version {
				t.Errorf("Version = %d, want %d", f.Version, tc.version)
			}
			wantAlign := tc.align
			if wantAlign == 0 {
				wantAlign = DefaultAlignment
			}
			if f.Alignment != wantAlign {
				t.Errorf("Alignment = %d, want %d", f.Alignment, wantAlign)
			}
			if !reflect.DeepEqual(f.KV, tf.kvs) {
				t.Errorf("KV mismatch:\n got %#v\nwant %#v", f.KV, tf.kvs)
			}
			if f.DataOffset != uint64(w.marks["data"]) || f.DataOffset%wantAlign != 0 {
				t.Errorf("DataOffset = %d, want %d", f.DataOffset, w.marks["data"])
			}
			if f.FileSize != uint64(len(w.buf)) {
				t.Errorf("FileSize = %d, want %d", f.FileSize, len(w.buf))
			}
			if len(f.Tensors) != len(tf.tensors) {
				t.Fatalf("%d tensors, want %d", len(f.Tensors), len(tf.tensors))
			}
			for i, want := range tf.tensors {
				got, ok := f.Tensor(want.name)
				if !ok || got != &f.Tensors[i] {
					t.Fatalf("Tensor(%q) = %v, %v", want.name, got, ok)
				}
				if !reflect.DeepEqual(got.Shape, want.shape) || got.Type != want.typ || got.Size != tensorBytes(want) {
					t.Errorf("tensor %d = %+v, want %+v", i, got, want)
				}
				if got.Offset%wantAlign != 0 {
					t.Errorf("tensor %d offset %d misaligned", i, got.Offset)
				}
				data := f.TensorData(got)
				wantData := make([]byte, tensorBytes(want))
				copy(wantData, want.data)
				if !bytes.Equal(data, wantData) {
					t.Errorf("tensor %d data = %x, want %x", i, data, wantData)
				}
			}
			if n := f.Tensors[2].NumElements(); n != 512 {
				t.Errorf("NumElements = %d, want 512", n)
			}
			if f.Tensors[2].Size != 2*144 {
				t.Errorf("Q4_K size = %d, want 288", f.Tensors[2].Size)
			}
		})
	}
}

func TestAccessors(t *testing.T) {
	f := mustParse(t, sampleFile().build().buf)
	if a := f.Architecture(); a != "llama" {
		t.Errorf("Architecture = %q", a)
	}
	uints := map[string]uint64{"u8": 200, "u16": 60000, "u32": 4000000000, "u64": math.MaxUint64}
	for k, want := range uints {
		if got, ok := f.Uint(k); !ok || got != want {
			t.Errorf("Uint(%s) = %d, %v; want %d", k, got, ok, want)
		}
	}
	for _, k := range []string{"i8", "i16", "i32", "i64", "f32", "str", "missing", "bool.t"} {
		if got, ok := f.Uint(k); ok {
			t.Errorf("Uint(%s) = %d, want !ok", k, got)
		}
	}
	ints := map[string]int64{"u8": 200, "i8": -100, "i16": -30000, "i32": -2000000000, "i64": math.MinInt64, "u32": 4000000000}
	for k, want := range ints {
		if got, ok := f.Int(k); !ok || got != want {
			t.Errorf("Int(%s) = %d, %v; want %d", k, got, ok, want)
		}
	}
	if _, ok := f.Int("u64"); ok {
		t.Error("Int(u64 max) should not fit")
	}
	floats := map[string]float64{"f32": 1.5, "f64": math.Pi, "i8": -100, "u64": math.MaxUint64}
	for k, want := range floats {
		if got, ok := f.Float(k); !ok || got != want {
			t.Errorf("Float(%s) = %v, %v; want %v", k, got, ok, want)
		}
	}
	if _, ok := f.Float("str"); ok {
		t.Error("Float(str) ok")
	}
	if s, ok := f.String("str"); !ok || s != "héllo\x00\xff" {
		t.Errorf("String = %q, %v", s, ok)
	}
	if _, ok := f.String("u8"); ok {
		t.Error("String(u8) ok")
	}
	if b, ok := f.Bool("bool.t"); !ok || !b {
		t.Error("Bool(bool.t)")
	}
	if b, ok := f.Bool("bool.f"); !ok || b {
		t.Error("Bool(bool.f)")
	}
	if s, ok := f.Strings("arr.str"); !ok || !reflect.DeepEqual(s, []string{"<unk>", "", "<s>"}) {
		t.Errorf("Strings = %q, %v", s, ok)
	}
	if _, ok := f.Strings("arr.u8"); ok {
		t.Error("Strings(arr.u8) ok")
	}
	if s, ok := f.Float32s("arr.f32"); !ok || !reflect.DeepEqual(s, []float32{-0.5, 0.25}) {
		t.Errorf("Float32s = %v, %v", s, ok)
	}
	if s, ok := f.Float32s("arr.f64"); !ok || len(s) != 1 || !math.IsInf(float64(s[0]), 1) {
		t.Errorf("Float32s(f64) = %v, %v", s, ok)
	}
	for k, want := range map[string][]int32{
		"arr.i32": {-1, 0, 1}, "arr.u8": {1, 2, 255}, "arr.i8": {-1, 2}, "arr.u16": {1, 65535},
		"arr.i16": {-1, 7}, "arr.u32": {1, 2, 3}, "arr.i64": {-5, 5},
	} {
		if got, ok := f.Int32s(k); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("Int32s(%s) = %v, %v; want %v", k, got, ok, want)
		}
	}
	for _, k := range []string{"arr.u64", "arr.f32", "arr.str", "u32", "missing"} {
		if got, ok := f.Int32s(k); ok {
			t.Errorf("Int32s(%s) = %v, want !ok", k, got)
		}
	}
	if kv, ok := f.Lookup("arr.nested"); !ok || kv.Value.(Array).Len() != 3 {
		t.Errorf("Lookup(arr.nested) = %v, %v", kv, ok)
	}
	if _, ok := f.Tensor("nope"); ok {
		t.Error("Tensor(nope) ok")
	}
	if d := f.TensorData(&TensorInfo{Offset: math.MaxUint64, Size: 2}); d != nil {
		t.Error("TensorData of a foreign tensor should be nil")
	}
}

func TestNoTensors(t *testing.T) {
	// A vocab-only file: no tensors and no padding after the metadata, as llama.cpp writes them.
	w := testFile{kvs: []KV{{"a", TypeUint8, uint8(1)}}}.build()
	f := mustParse(t, w.buf)
	if len(f.Tensors) != 0 || f.DataOffset > f.FileSize {
		t.Errorf("tensors %d, DataOffset %d, size %d", len(f.Tensors), f.DataOffset, f.FileSize)
	}
	w = testFile{}.build()
	if f := mustParse(t, w.buf); len(f.KV) != 0 {
		t.Error("expected empty file")
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.gguf")
	w := sampleFile().build()
	if err := os.WriteFile(p, w.buf, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	tt, _ := f.Tensor("norm")
	if d := f.TensorData(tt); len(d) != 10 || d[1] != 0x3c {
		t.Errorf("TensorData = %x", d)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if d := f.TensorData(tt); d != nil {
		t.Error("TensorData after Close should be nil")
	}
	if _, ok := f.String("str"); !ok {
		t.Error("metadata should survive Close")
	}

	if _, err := Open(filepath.Join(dir, "missing.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open(dir); err == nil {
		t.Error("directory: want error")
	}
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(empty)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Path != empty || !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty file: %v", err)
	}
}

// TestTruncated cuts a file at every length through the tensor infos and at several points in
// the data and checks for a truncation error (never a panic or success).
func TestTruncated(t *testing.T) {
	w := sampleFile().build()
	dataStart := w.marks["data"]
	lastEnd := len(w.buf) - 1 // the last tensor (F16, 10 bytes) is followed by padding
	for len(w.buf) > 0 && w.buf[lastEnd] == 0 {
		lastEnd--
	}
	var cuts []int
	for n := 0; n <= dataStart; n++ {
		cuts = append(cuts, n)
	}
	cuts = append(cuts, dataStart+1, dataStart+23, dataStart+24, dataStart+100, lastEnd)
	for _, n := range cuts {
		_, err := Parse(w.buf[:n:n])
		if err == nil {
			t.Fatalf("cut at %d of %d: no error", n, len(w.buf))
		}
		if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "truncated") {
			t.Fatalf("cut at %d: %v (want a truncation error)", n, err)
		}
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > int64(len(w.buf)) || fe.Field == "" {
			t.Fatalf("cut at %d: bad FormatError %#v", n, err)
		}
	}
}

// corrupt builds the sample file, lets edit change it, and returns the parse error.
func corrupt(t *testing.T, tf testFile, edit func(w *testWriter)) error {
	t.Helper()
	w := tf.build()
	edit(w)
	f, err := Parse(w.buf)
	if err == nil {
		t.Fatalf("no error; parsed %d kvs, %d tensors", len(f.KV), len(f.Tensors))
	}
	return err
}

func put32(w *testWriter, mark string, v uint32) {
	binary.LittleEndian.PutUint32(w.buf[w.marks[mark]:], v)
}

func put64(w *testWriter, mark string, v uint64) {
	binary.LittleEndian.PutUint64(w.buf[w.marks[mark]:], v)
}

func TestCorrupt(t *testing.T) {
	tests := []struct {
		name   string
		file   func() testFile
		edit   func(w *testWriter)
		target error
		substr string
	}{
		{"magic", sampleFile, func(w *testWriter) { copy(w.buf, "GGML") }, ErrBadMagic, `offset 0x0: magic: bad magic "GGML"`},
		{"version 1", sampleFile, func(w *testWriter) { put32(w, "version", 1) }, ErrUnsupportedVersion, "offset 0x4: version"},
		{"version 4", sampleFile, func(w *testWriter) { put32(w, "version", 4) }, ErrUnsupportedVersion, "version 4"},
		{"version 0", sampleFile, func(w *testWriter) { put32(w, "version", 0) }, ErrUnsupportedVersion, "version"},
		{"big endian", sampleFile, func(w *testWriter) { put32(w, "version", 0x03000000) }, ErrUnsupportedVersion, "big-endian"},
		{"huge n_tensors", sampleFile, func(w *testWriter) { put64(w, "n_tensors", math.MaxUint64) }, ErrTruncated, "tensor count"},
		{"huge n_kv", sampleFile, func(w *testWriter) { put64(w, "n_kv", 1<<60) }, ErrTruncated, "kv count"},
		{"n_kv too big", sampleFile, func(w *testWriter) { put64(w, "n_kv", 40) }, nil, "kv "},
		{"huge key length", sampleFile, func(w *testWriter) { put64(w, "kv3", math.MaxUint64) }, ErrTruncated, "kv 3 key"},
		{"unknown value type", sampleFile, func(w *testWriter) { put32(w, "kv2.type", 13) }, ErrUnknownValueType, `kv 2 "i8" type: unknown value type 13`},
		{"unknown elem type", sampleFile, func(w *testWriter) { put32(w, "kv15.value", 99) }, ErrUnknownValueType, `kv 15 "arr.u8" value`},
		{"huge array", sampleFile, func(w *testWriter) {
			binary.LittleEndian.PutUint64(w.buf[w.marks["kv23.value"]+4:], 1<<62)
		}, ErrTruncated, `kv 23 "arr.str" value`},
		{"huge string in array", sampleFile, func(w *testWriter) {
			binary.LittleEndian.PutUint64(w.buf[w.marks["kv23.value"]+12:], 1<<40)
		}, ErrTruncated, `kv 23 "arr.str" value[0]`},
		{"huge string", sampleFile, func(w *testWriter) { put64(w, "kv10.value", 1<<50) }, ErrTruncated, `kv 10 "str" value`},
		{"duplicate key", func() testFile {
			tf := sampleFile()
			tf.kvs = append(tf.kvs, KV{"u8", TypeUint8, uint8(1)})
			return tf
		}, func(*testWriter) {}, ErrDuplicate, "kv 1"},
		{"empty key", func() testFile {
			tf := sampleFile()
			tf.kvs = append(tf.kvs, KV{"", TypeUint8, uint8(1)})
			return tf
		}, func(*testWriter) {}, ErrInvalid, "empty key"},
		{"alignment 3", func() testFile { return withAlignKV(KV{"general.alignment", TypeUint32, uint32(3)}) }, func(*testWriter) {}, ErrInvalid, "general.alignment"},
		{"alignment 0", func() testFile { return withAlignKV(KV{"general.alignment", TypeUint32, uint32(0)}) }, func(*testWriter) {}, ErrInvalid, "power of two"},
		{"alignment string", func() testFile { return withAlignKV(KV{"general.alignment", TypeString, "32"}) }, func(*testWriter) {}, ErrInvalid, "power of two"},
		{"alignment negative", func() testFile { return withAlignKV(KV{"general.alignment", TypeInt32, int32(-32)}) }, func(*testWriter) {}, ErrInvalid, "power of two"},
		{"unknown ggml type", sampleFile, func(w *testWriter) { put32(w, "t1.type", 99) }, ErrUnknownGGMLType, `tensor 1 "blk.0.attn_q.weight" type: unknown ggml type 99`},
		{"retired ggml type", sampleFile, func(w *testWriter) { put32(w, "t0.type", 4) }, ErrUnknownGGMLType, "unknown ggml type 4"},
		{"row not multiple of block", sampleFile, func(w *testWriter) { put64(w, "t1.dims", 48) }, ErrInvalid, "not a multiple"},
		{"too many dims", sampleFile, func(w *testWriter) { put32(w, "t0.ndims", 5) }, ErrInvalid, `tensor 0 "token_embd.weight" n_dims`},
		{"no dims", sampleFile, func(w *testWriter) { put32(w, "t0.ndims", 0) }, nil, "tensor 0"},
		{"zero dim", sampleFile, func(w *testWriter) { put64(w, "t0.dims", 0) }, ErrInvalid, "zero-length"},
		{"dims overflow", sampleFile, func(w *testWriter) {
			binary.LittleEndian.PutUint64(w.buf[w.marks["t2.dims"]+8:], 1<<62)
		}, ErrInvalid, "overflows"},
		{"huge dim", sampleFile, func(w *testWriter) { put64(w, "t0.dims", math.MaxUint64) }, ErrInvalid, "overflows"},
		{"misaligned offset", sampleFile, func(w *testWriter) { put64(w, "t1.offset", 40) }, ErrInvalid, "not a multiple of the alignment 32"},
		{"offset past end", sampleFile, func(w *testWriter) { put64(w, "t3.offset", 1<<40) }, ErrTruncated, `tensor 3 "norm" offset`},
		{"offset overflow", sampleFile, func(w *testWriter) { put64(w, "t3.offset", math.MaxUint64&^31) }, ErrTruncated, `tensor 3 "norm" offset`},
		{"overlap", sampleFile, func(w *testWriter) { put64(w, "t1.offset", 0) }, ErrInvalid, "overlaps"},
		{"duplicate tensor", func() testFile {
			tf := sampleFile()
			tf.tensors = append(tf.tensors, tf.tensors[0])
			return tf
		}, func(*testWriter) {}, ErrDuplicate, `tensor 4 "token_embd.weight" name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := corrupt(t, tc.file(), tc.edit)
			t.Log(err)
			if tc.target != nil && !errors.Is(err, tc.target) {
				t.Errorf("error %v is not %v", err, tc.target)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("error %q does not mention %q", err, tc.substr)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Errorf("error %T is not a *FormatError", err)
			}
			if !strings.HasPrefix(err.Error(), "gguf: offset 0x") {
				t.Errorf("error %q lacks the offset prefix", err)
			}
		})
	}
}

func withAlignKV(kv KV) testFile {
	tf := sampleFile()
	tf.kvs = append(tf.kvs, kv)
	return tf
}

func TestErrorOffsets(t *testing.T) {
	w := sampleFile().build()
	put32(w, "t1.type", 99)
	_, err := Parse(w.buf)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Offset != int64(w.marks["t1.type"]) {
		t.Fatalf("err %v: want offset %d", err, w.marks["t1.type"])
	}
	want := fmt.Sprintf("gguf: offset 0x%x: tensor 1 \"blk.0.attn_q.weight\" type: unknown ggml type 99", w.marks["t1.type"])
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
}

func TestDeepNesting(t *testing.T) {
	w := &testWriter{}
	w.buf = append(w.buf, "GGUF"...)
	w.u32(3)
	w.u64(0)
	w.u64(1)
	w.str("deep")
	w.u32(uint32(TypeArray))
	for range 100000 {
		w.u32(uint32(TypeArray))
		w.u64(1)
	}
	w.u32(uint32(TypeUint8))
	w.u64(0)
	_, err := Parse(w.buf)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nested") {
		t.Fatalf("err = %v", err)
	}
}

// TestHugeCountsDoNotAllocate checks that corrupt counts are rejected before allocation.
func TestHugeCountsDoNotAllocate(t *testing.T) {
	w := sampleFile().build()
	// Claim an array of 2^27 uint64 (1 GiB) where only a few bytes remain.
	binary.LittleEndian.PutUint64(w.buf[w.marks["kv24.value"]+4:], 1<<27)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := Parse(w.buf); !errors.Is(err, ErrTruncated) {
			t.Fatalf("err = %v", err)
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 10<<20 {
		t.Errorf("allocated %d bytes for corrupt files", d)
	}
}

func TestGGMLTypes(t *testing.T) {
	want := map[GGMLType]struct {
		name      string
		block, sz uint64
	}{
		TypeF32: {"F32", 1, 4}, TypeF16: {"F16", 1, 2}, TypeQ4_0: {"Q4_0", 32, 18}, TypeQ4_1: {"Q4_1", 32, 20},
		TypeQ5_0: {"Q5_0", 32, 22}, TypeQ5_1: {"Q5_1", 32, 24}, TypeQ8_0: {"Q8_0", 32, 34}, TypeQ8_1: {"Q8_1", 32, 40},
		TypeQ2_K: {"Q2_K", 256, 84}, TypeQ3_K: {"Q3_K", 256, 110}, TypeQ4_K: {"Q4_K", 256, 144},
		TypeQ5_K: {"Q5_K", 256, 176}, TypeQ6_K: {"Q6_K", 256, 210}, TypeQ8_K: {"Q8_K", 256, 292},
		TypeIQ2_XXS: {"IQ2_XXS", 256, 66}, TypeIQ2_XS: {"IQ2_XS", 256, 74}, TypeIQ3_XXS: {"IQ3_XXS", 256, 98},
		TypeIQ1_S: {"IQ1_S", 256, 50}, TypeIQ4_NL: {"IQ4_NL", 32, 18}, TypeIQ3_S: {"IQ3_S", 256, 110},
		TypeIQ2_S: {"IQ2_S", 256, 82}, TypeIQ4_XS: {"IQ4_XS", 256, 136}, TypeI8: {"I8", 1, 1},
		TypeI16: {"I16", 1, 2}, TypeI32: {"I32", 1, 4}, TypeI64: {"I64", 1, 8}, TypeF64: {"F64", 1, 8},
		TypeIQ1_M: {"IQ1_M", 256, 56}, TypeBF16: {"BF16", 1, 2}, TypeTQ1_0: {"TQ1_0", 256, 54},
		TypeTQ2_0: {"TQ2_0", 256, 66}, TypeMXFP4: {"MXFP4", 32, 17}, TypeNVFP4: {"NVFP4", 64, 36},
		TypeQ1_0: {"Q1_0", 128, 18}, TypeQ2_0: {"Q2_0", 64, 18},
	}
	for id := GGMLType(0); id < 100; id++ {
		w, ok := want[id]
		if id.Known() != ok || id.String() != w.name && ok || id.BlockSize() != w.block || id.TypeSize() != w.sz {
			t.Errorf("type %d: %q known=%v block %d size %d; want %+v (known=%v)",
				id, id, id.Known(), id.BlockSize(), id.TypeSize(), w, ok)
		}
		if ok {
			if p, pok := ParseGGMLType(strings.ToLower(w.name)); !pok || p != id {
				t.Errorf("ParseGGMLType(%q) = %v, %v", w.name, p, pok)
			}
		}
	}
	if s := GGMLType(99).String(); s != "GGMLType(99)" {
		t.Errorf("String(99) = %q", s)
	}
	if _, ok := ParseGGMLType("Q9_9"); ok {
		t.Error("ParseGGMLType(Q9_9) ok")
	}
	if s, ok := TypeQ4_K.RowSize(512); !ok || s != 288 {
		t.Errorf("RowSize = %d, %v", s, ok)
	}
	if _, ok := TypeQ4_K.RowSize(100); ok {
		t.Error("RowSize(100) of Q4_K should fail")
	}
	if _, ok := TypeF32.RowSize(math.MaxUint64 / 2); ok {
		t.Error("RowSize overflow not detected")
	}
	if ValueType(5).String() != "int32" || ValueType(13).String() != "ValueType(13)" || ValueType(13).Valid() {
		t.Error("ValueType names")
	}
}

// FuzzParse checks that no input panics, and that what parses is self-consistent: every
// tensor's data has its size, and that of a type Dequantize handles (up to 1<<16 elements,
// to bound the work) decodes without an error, as a loader would decode it.
func FuzzParse(f *testing.F) {
	f.Add(sampleFile().build().buf)
	f.Add(testFile{version: 2, kvs: allTypesKVs()[:5]}.build().buf)
	f.Add(testFile{tensors: sampleTensors()[:1]}.build().buf)
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > int64(len(data)) {
				t.Fatalf("bad error %#v", err)
			}
			return
		}
		for i := range g.Tensors {
			tt := &g.Tensors[i]
			d := g.TensorData(tt)
			if uint64(len(d)) != tt.Size {
				t.Fatalf("tensor %d: %d bytes, want %d", i, len(d), tt.Size)
			}
			if n := tt.NumElements(); tt.Type.CanDequantize() && n <= 1<<16 {
				if err := Dequantize(tt.Type, d, make([]float32, n)); err != nil {
					t.Fatalf("tensor %d (%s, %d elements): %v", i, tt.Type, n, err)
				}
			}
		}
		for _, kv := range g.KV {
			if got, ok := g.Lookup(kv.Key); !ok || got.Key != kv.Key {
				t.Fatalf("Lookup(%q) failed", kv.Key)
			}
		}
	})
}
