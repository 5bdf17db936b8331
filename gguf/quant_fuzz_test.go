package gguf

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
)

// scaleOffsets are the byte offsets, within one block, of the f16 scales (d, and dmin or m) of
// each block-quantized type. Every value such a block decodes to is a finite scale times a
// small integer (plus a finite scale times a small integer), so it is finite whenever they are:
// the property FuzzDequantize checks. F32, F16 and BF16 are checked bit for bit instead.
var scaleOffsets = map[GGMLType][]int{
	TypeQ8_0: {0},
	TypeQ4_0: {0},
	TypeQ4_1: {0, 2},
	TypeQ5_0: {0},
	TypeQ5_1: {0, 2},
	TypeQ2_K: {80, 82},
	TypeQ3_K: {108},
	TypeQ4_K: {0, 2},
	TypeQ5_K: {0, 2},
	TypeQ6_K: {208},
	// The IQ types (quant_iq*.go) lead with d: every value is d times a small integer, or
	// (IQ1_S) times one plus or minus 1/8.
	TypeIQ4_NL:  {0},
	TypeIQ4_XS:  {0},
	TypeIQ3_S:   {0},
	TypeIQ3_XXS: {0},
	TypeIQ2_S:   {0},
	TypeIQ2_XS:  {0},
	TypeIQ2_XXS: {0},
	TypeIQ1_S:   {0},
}

// scalesFinite replaces scaleOffsets for the types whose scale is not an f16 at a fixed offset:
// it reports whether the block's scale leaves every value it decodes to finite.
var scalesFinite = map[GGMLType]func(block []byte) bool{
	// IQ1_M's f16 d is spread over the top nibbles of its four scale words (bytes 48-55).
	TypeIQ1_M: func(b []byte) bool { return isFinite(iq1mScale(b[48:56])) },
	// MXFP4's E8M0 byte e scales by 2^(e-128) (every value finite, even e = 255), but the
	// largest levels, ±12 and ±8, overflow float32 above 2^124: e <= 252 keeps them finite.
	TypeMXFP4: func(b []byte) bool { return b[0] <= 252 },
}

func isFinite(f float32) bool { return !math.IsInf(float64(f), 0) && !math.IsNaN(float64(f)) }

// fuzzTypes are the types FuzzDequantize picks from: every known type, supported or not, and
// one unknown id.
var fuzzTypes = func() []GGMLType {
	var out []GGMLType
	for id := GGMLType(0); id < 64; id++ {
		if id.Known() {
			out = append(out, id)
		}
	}
	return append(out, GGMLType(63))
}()

// FuzzDequantize runs every quant block decoder on arbitrary bytes, as a model file's tensor
// data would feed it: a type Dequantize does not handle fails with ErrUnsupportedType, an
// element count that is not whole blocks or data of the wrong size fails (never a panic or a
// read past the data), and whole blocks decode to len(dst) values that are finite where the
// block's scales are, block by block the same as the whole row, bit-exact for the float types.
func FuzzDequantize(f *testing.F) {
	for _, t := range supportedTypes {
		data, err := Quantize(t, gaussian(uint64(t), 2*int(t.BlockSize()), 1))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(t), int16(0), data)
		f.Add(uint8(t), int16(1), data)               // a partial block of elements
		f.Add(uint8(t), int16(0), data[:len(data)-1]) // truncated data
	}
	for _, t := range iqTypes { // decode-only types: random blocks with finite scales
		if !slices.Contains(supportedTypes, t) {
			data := randomIQBlocks(uint64(t), t, 2)
			f.Add(uint8(t), int16(0), data)
			f.Add(uint8(t), int16(0), data[:len(data)-1])
		}
	}
	f.Add(uint8(TypeIQ4_NL), int16(0), make([]byte, 36))
	f.Add(uint8(TypeMXFP4), int16(0), []byte{253, 0xff, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) // ±Inf values
	f.Add(uint8(TypeQ4_K), int16(0), []byte{0x00, 0x7c, 0x00, 0xfc})                                     // +Inf d, -Inf dmin, short
	f.Fuzz(func(t *testing.T, pick uint8, extra int16, data []byte) {
		if len(data) > 1<<10 { // a few blocks of every type; bigger inputs add nothing
			return
		}
		typ := fuzzTypes[int(pick)%len(fuzzTypes)]
		if !typ.CanDequantize() {
			err := Dequantize(typ, data, make([]float32, typ.BlockSize()))
			if !errors.Is(err, ErrUnsupportedType) {
				t.Fatalf("%s: error %v, want ErrUnsupportedType", typ, err)
			}
			return
		}
		bs, ts := int(typ.BlockSize()), int(typ.TypeSize())
		blocks := len(data) / ts
		// the element count: the data's whole blocks, give or take a few elements, so that
		// partial blocks and counts that do not match the data are tried too
		n := blocks*bs + int(extra)%(2*bs)
		if n < 0 {
			n = 0
		}
		dst := make([]float32, n)
		err := Dequantize(typ, data, dst)
		want, ok := typ.RowSize(uint64(n))
		if !ok || want != uint64(len(data)) {
			if err == nil {
				t.Fatalf("%s: %d elements from %d bytes decoded without an error", typ, n, len(data))
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: %d elements from %d bytes: %v", typ, n, len(data), err)
		}
		for b := 0; b < n/bs; b++ {
			block := data[b*ts : (b+1)*ts]
			got := dst[b*bs : (b+1)*bs]
			one := make([]float32, bs)
			if err := Dequantize(typ, block, one); err != nil {
				t.Fatalf("%s block %d alone: %v", typ, b, err)
			}
			for i := range one {
				if math.Float32bits(one[i]) != math.Float32bits(got[i]) {
					t.Fatalf("%s block %d element %d: %v alone, %v in the row", typ, b, i, one[i], got[i])
				}
			}
			checkBlock(t, typ, block, got)
		}
	})
}

// checkBlock checks one decoded block against what its format guarantees.
func checkBlock(t *testing.T, typ GGMLType, block []byte, got []float32) {
	t.Helper()
	for i, v := range got {
		var want uint32
		switch typ {
		case TypeF32:
			want = binary.LittleEndian.Uint32(block[4*i:])
		case TypeF16:
			want = math.Float32bits(F16ToF32(binary.LittleEndian.Uint16(block[2*i:])))
		case TypeBF16:
			want = uint32(binary.LittleEndian.Uint16(block[2*i:])) << 16
		default:
			continue
		}
		if math.Float32bits(v) != want {
			t.Fatalf("%s element %d: bits %#x, want %#x", typ, i, math.Float32bits(v), want)
		}
	}
	offs, ok := scaleOffsets[typ]
	finite, special := scalesFinite[typ]
	switch {
	case special:
		if !finite(block) {
			return // a scale this large may well make non-finite values
		}
	case !ok:
		if typ != TypeF32 && typ != TypeF16 && typ != TypeBF16 {
			t.Fatalf("%s: no scale offsets listed for a type Dequantize handles", typ)
		}
		return
	}
	for _, o := range offs {
		if !isFinite(f16At(block[o:])) {
			return // a non-finite scale may well make non-finite values
		}
	}
	for i, v := range got {
		if math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) {
			t.Fatalf("%s element %d is %v though the block's scales are finite", typ, i, v)
		}
	}
}
