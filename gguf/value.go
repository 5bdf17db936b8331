package gguf

import (
	"fmt"
	"math"
)

// ValueType is a metadata value's type code (enum gguf_type).
type ValueType uint32

// The metadata value types, with GGUF's numbering.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64",
}

// String returns the lower-case type name gguf-py uses ("uint32", "string", "array").
func (t ValueType) String() string {
	if uint64(t) < uint64(len(valueTypeNames)) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// Valid reports whether t is one of the 13 defined value types.
func (t ValueType) Valid() bool { return uint64(t) < uint64(len(valueTypeNames)) }

// fixedSize is the encoded size of a scalar of type t, or 0 for strings, arrays and unknowns.
func (t ValueType) fixedSize() uint64 {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one encoded value of type t can take; it bounds element counts
// against the bytes left before anything is allocated.
func (t ValueType) minSize() uint64 {
	switch t {
	case TypeString:
		return 8 // length only
	case TypeArray:
		return 4 + 8 // element type and count
	}
	return t.fixedSize()
}

// Array is a metadata array. Values holds a slice of the Go type matching Elem ([]uint8 ...
// []float64, []bool, []string), or []Array for nested arrays, so callers can type-switch once
// instead of per element.
type Array struct {
	// Elem is the element type all Values share, as stored in the file.
	Elem ValueType
	// Values is the typed slice described above.
	Values any
}

// Len returns the number of elements.
func (a Array) Len() int {
	switch v := a.Values.(type) {
	case []uint8:
		return len(v)
	case []int8:
		return len(v)
	case []uint16:
		return len(v)
	case []int16:
		return len(v)
	case []uint32:
		return len(v)
	case []int32:
		return len(v)
	case []float32:
		return len(v)
	case []bool:
		return len(v)
	case []string:
		return len(v)
	case []uint64:
		return len(v)
	case []int64:
		return len(v)
	case []float64:
		return len(v)
	case []Array:
		return len(v)
	}
	return 0
}

// KV is one metadata entry. Value holds the Go type matching Type: uint8, int8, uint16, int16,
// uint32, int32, float32, bool, string, Array, uint64, int64 or float64.
type KV struct {
	// Key is the dotted metadata name, unique within a file (e.g. "general.architecture").
	Key string
	// Type is the GGUF value type, which fixes Value's Go type.
	Type ValueType
	// Value is the decoded value, of the Go type listed above.
	Value any
}

// Lookup returns the entry for key.
func (f *File) Lookup(key string) (KV, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return KV{}, false
	}
	return f.KV[i], true
}

// asInt64 widens any integer value; ok is false for non-integers and uint64 values above
// MaxInt64.
func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

// Uint returns a non-negative integer value of any width, because writers disagree on which
// integer type to use for counts (llama.cpp writes u32, some converters i32 or u64).
func (f *File) Uint(key string) (uint64, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	if u, ok := kv.Value.(uint64); ok {
		return u, true
	}
	i, ok := asInt64(kv.Value)
	if !ok || i < 0 {
		return 0, false
	}
	return uint64(i), true
}

// Int returns an integer value of any width that fits in an int64.
func (f *File) Int(key string) (int64, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	return asInt64(kv.Value)
}

// Float returns a float value, or an integer one converted, since hyper-parameters such as
// rope.freq_base are sometimes written as integers.
func (f *File) Float(key string) (float64, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	switch x := kv.Value.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	case uint64:
		return float64(x), true
	}
	i, ok := asInt64(kv.Value)
	return float64(i), ok
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return "", false
	}
	s, ok := kv.Value.(string)
	return s, ok
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return false, false
	}
	b, ok := kv.Value.(bool)
	return b, ok
}

func (f *File) array(key string) (Array, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return Array{}, false
	}
	a, ok := kv.Value.(Array)
	return a, ok
}

// Strings returns a string array. The slice is shared with the File: do not modify it.
func (f *File) Strings(key string) ([]string, bool) {
	a, ok := f.array(key)
	if !ok {
		return nil, false
	}
	s, ok := a.Values.([]string)
	return s, ok
}

// Float32s returns a float32 array (shared with the File: do not modify it), or a float64 one
// converted.
func (f *File) Float32s(key string) ([]float32, bool) {
	a, ok := f.array(key)
	if !ok {
		return nil, false
	}
	switch v := a.Values.(type) {
	case []float32:
		return v, true
	case []float64:
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out, true
	}
	return nil, false
}

// Int32s returns an integer array of any element type as int32s (token types, per-layer head
// counts); false when an element does not fit. An []int32 array is returned shared: do not
// modify it.
func (f *File) Int32s(key string) ([]int32, bool) {
	a, ok := f.array(key)
	if !ok {
		return nil, false
	}
	if v, ok := a.Values.([]int32); ok {
		return v, true
	}
	switch v := a.Values.(type) {
	case []uint8:
		return convertInts(v)
	case []int8:
		return convertInts(v)
	case []uint16:
		return convertInts(v)
	case []int16:
		return convertInts(v)
	case []uint32:
		return convertInts(v)
	case []uint64:
		return convertInts(v)
	case []int64:
		return convertInts(v)
	}
	return nil, false
}

func convertInts[T uint8 | int8 | uint16 | int16 | uint32 | uint64 | int64](v []T) ([]int32, bool) {
	out := make([]int32, len(v))
	for i, x := range v {
		if x < 0 {
			if int64(x) < math.MinInt32 {
				return nil, false
			}
		} else if uint64(x) > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

// Architecture returns general.architecture, the prefix of the model's hyper-parameter keys
// ("llama" for llama.embedding_length), or "" when absent.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}
