package seqstate

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
	"time"
)

// fuzzLayouts are caches a slot file may be restored into: stories260K's with f32 rows and a
// short context, then with f16 rows, a single-layer cache of a long context, and stories260K's
// as the engine has it (5 layers of 64-byte f16 rows, a context of 512), of which
// testdata/fuzz/FuzzSlotFile holds a file the engine saved (pick 3), and a small hybrid's
// (M-RoPE cells, 2 KV layers, 2 recurrent layers of a 12-byte conv row and a 16-byte
// delta-rule row), and one whose layers' rows differ (Gemma 4's sliding and global heads).
var fuzzLayouts = []Layout{
	{KVType: TypeF32, Layers: 5, RowBytes: []int{128, 128, 128, 128, 128}, SlotCtx: 64, NVocab: 512, MediaToken: 1 << 30},
	{KVType: TypeF16, Layers: 5, RowBytes: []int{64, 64, 64, 64, 64}, SlotCtx: 64, NVocab: 512, MediaToken: 1 << 30},
	{KVType: TypeF16, Layers: 1, RowBytes: []int{4}, SlotCtx: 1 << 20, NVocab: 32000, MediaToken: 1 << 30},
	{KVType: TypeF16, Layers: 5, RowBytes: []int{64, 64, 64, 64, 64}, SlotCtx: 512, NVocab: 512, MediaToken: 1 << 30},
	{KVType: TypeF16, Layers: 2, RowBytes: []int{8, 8}, SlotCtx: 64, NVocab: 512, MediaToken: 1 << 30, PosExt: true, StateLayers: 2, ConvBytes: 12, SSMBytes: 16, Blocks: 3},
	{KVType: TypeF16, Layers: 3, RowBytes: []int{8, 16, 8}, SlotCtx: 64, NVocab: 512, MediaToken: 1 << 30, PosExt: true},
}

// slotFileBytes encodes a valid slot file of tokens for layout l, with rows of made-up bytes.
func slotFileBytes(tb testing.TB, l Layout, id int, tokens []int32) []byte {
	tb.Helper()
	k, v := make([][]byte, l.Layers), make([][]byte, l.Layers)
	for i := range k {
		k[i], v[i] = make([]byte, len(tokens)*l.RowBytes[i]), make([]byte, len(tokens)*l.RowBytes[i])
		for j := range k[i] {
			k[i][j], v[i][j] = byte(i+j), byte(i*j+7)
		}
	}
	var state []byte
	if l.StateLayers > 0 && len(tokens) > 0 {
		state = make([]byte, l.StateBytes())
		for j := range state {
			state[j] = byte(3*j + 1)
		}
	}
	var buf bytes.Buffer
	if err := l.Encode(&buf, id, tokens, k, v, state); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzSlotFile decodes arbitrary bytes as a slot file (what /slots/N?action=restore reads
// from disk), for caches of several layouts: never a panic, an error (not a huge allocation
// or a long loop) for truncated files and counts the bytes cannot back, and what decodes fits
// the cache (tokens within the slot's context and the vocabulary, one row per token per layer)
// and encodes back to a file that decodes to the same thing.
func FuzzSlotFile(f *testing.F) {
	for i, l := range fuzzLayouts {
		valid := slotFileBytes(f, l, i, []int32{1, 300, 2, 5}[:1+i%3])
		f.Add(uint8(i), valid)
		f.Add(uint8(i), valid[:len(valid)-3]) // truncated rows
		f.Add(uint8(i), slotFileBytes(f, l, 0, nil))
		f.Add(uint8(i), slotFileBytes(f, l, 0, []int32{l.MediaToken, 3}))
		// a header claiming 2^32-1 payload words, tokens and KV cells
		huge := slices.Clone(valid[:8])
		huge = binary.LittleEndian.AppendUint32(huge, 0xffffffff)
		f.Add(uint8(i), huge)
		packed := slices.Clone(valid[:12])
		packed = binary.LittleEndian.AppendUint32(packed, 0xffffffff) // the packed marker
		packed = binary.LittleEndian.AppendUint32(packed, packedTokensVersion)
		f.Add(uint8(i), binary.LittleEndian.AppendUint32(packed, 0x7fffffff))
	}
	// a plain token list, as older servers wrote it
	old := binary.LittleEndian.AppendUint32(nil, Magic)
	old = binary.LittleEndian.AppendUint32(old, Version)
	old = binary.LittleEndian.AppendUint32(old, 2)
	old = binary.LittleEndian.AppendUint32(old, 5)
	old = binary.LittleEndian.AppendUint32(old, 6)
	f.Add(uint8(0), old)
	f.Fuzz(func(t *testing.T, pick uint8, data []byte) {
		if len(data) > 1<<14 { // a few tokens of every layout; bigger inputs only slow minimizing
			return
		}
		l := fuzzLayouts[int(pick)%len(fuzzLayouts)]
		start := time.Now()
		tokens, k, v, state, err := l.Decode(data)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("%v to decode %d bytes", d, len(data))
		}
		if err != nil {
			if tokens != nil || k != nil || v != nil || state != nil {
				t.Fatalf("error %v with results", err)
			}
			return
		}
		if len(tokens) > l.SlotCtx || 4*len(tokens) > len(data) {
			t.Fatalf("%d tokens from %d bytes for a context of %d", len(tokens), len(data), l.SlotCtx)
		}
		for _, id := range tokens {
			if (id < 0 || int(id) >= l.NVocab) && id < l.MediaToken {
				t.Fatalf("token %d outside the vocabulary of %d", id, l.NVocab)
			}
		}
		if len(k) != l.Layers || len(v) != l.Layers {
			t.Fatalf("%d key and %d value layers, want %d", len(k), len(v), l.Layers)
		}
		for i := range k {
			if len(k[i]) != len(tokens)*l.RowBytes[i] || len(v[i]) != len(tokens)*l.RowBytes[i] {
				t.Fatalf("layer %d: %d and %d bytes of rows for %d tokens of %d", i, len(k[i]), len(v[i]), len(tokens), l.RowBytes[i])
			}
		}
		if want := l.StateBytes(); len(tokens) == 0 && state != nil || len(tokens) > 0 && len(state) != want {
			t.Fatalf("a recurrent state of %d bytes for %d tokens (want %d)", len(state), len(tokens), want)
		}
		var buf bytes.Buffer
		if err := l.Encode(&buf, 3, tokens, k, v, state); err != nil {
			t.Fatal(err)
		}
		tokens2, k2, v2, state2, err := l.Decode(buf.Bytes())
		if err != nil {
			t.Fatalf("a re-encoded file does not decode: %v", err)
		}
		if !slices.Equal(tokens, tokens2) || !slices.EqualFunc(k, k2, bytes.Equal) || !slices.EqualFunc(v, v2, bytes.Equal) || !bytes.Equal(state, state2) {
			t.Fatal("a re-encoded file decodes to other tokens, rows or state")
		}
	})
}

// TestSlotFileRoundTrip checks that what encode writes decodes to the same tokens and rows,
// and that a file saved for one layout is refused by another with an error.
func TestSlotFileRoundTrip(t *testing.T) {
	tokens := []int32{1, 2, 3, 4}
	for i, l := range fuzzLayouts {
		data := slotFileBytes(t, l, 1, tokens)
		got, k, v, state, err := l.Decode(data)
		if err != nil || !slices.Equal(got, tokens) || len(k) != l.Layers || len(v) != l.Layers || len(state) != l.StateBytes() {
			t.Fatalf("layout %d: %v, %d state bytes, %v", i, got, len(state), err)
		}
		other := fuzzLayouts[(i+1)%len(fuzzLayouts)]
		if _, _, _, _, err := other.Decode(data); err == nil && !slices.Equal(other.RowBytes, l.RowBytes) {
			t.Errorf("layout %d's file restored into layout %d", i, (i+1)%len(fuzzLayouts))
		}
		if _, _, _, _, err := l.Decode(data[:len(data)-1]); err == nil {
			t.Errorf("layout %d: a truncated file decoded", i)
		}
	}
}
