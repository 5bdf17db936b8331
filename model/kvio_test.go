package model_test

import (
	"bytes"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// TestKVRowsRoundTrip copies a prompt's cache rows to another region of the cache and checks
// that the copy reads back byte for byte and that decoding from it gives the same logits as
// decoding from the original rows.
func TestKVRowsRoundTrip(t *testing.T) {
	m := load(t, "models", "stories260K.gguf")
	prompt := m.Tokenizer.Encode("Once upon a time, there was", true, false)
	n := len(prompt)
	const base = 64
	kv, err := m.NewKVCache(128)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	if _, err := m.Forward(kv, prompt, 0); err != nil {
		t.Fatal(err)
	}
	k, v, err := m.ReadKVRows(kv, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(k) != m.KVLayers() || len(v) != m.KVLayers() || len(k[0]) != n*m.KVRows()[0] {
		t.Fatalf("read %d/%d layers of %d bytes, want %d layers of %d", len(k), len(v), len(k[0]), m.KVLayers(), n*m.KVRows()[0])
	}
	if bytes.Equal(k[0], make([]byte, len(k[0]))) {
		t.Fatal("the prompt's key rows read back as zeros")
	}
	if err := m.WriteKVRows(kv, base, k, v); err != nil {
		t.Fatal(err)
	}
	k2, v2, err := m.ReadKVRows(kv, base, base+n)
	if err != nil {
		t.Fatal(err)
	}
	for l := range k {
		if !bytes.Equal(k[l], k2[l]) || !bytes.Equal(v[l], v2[l]) {
			t.Fatalf("layer %d: rows written at %d read back different", l, base)
		}
	}

	next := m.Tokenizer.Encode(" a", false, false)[0]
	decode := func(rowBase int32) []float32 {
		logits, err := m.ForwardBatch(kv, model.Batch{Tokens: []int32{next}, Pos: []int32{int32(n)}, Base: []int32{rowBase}, Logits: []int{0}})
		if err != nil {
			t.Fatal(err)
		}
		return logits[0]
	}
	if e := cpuref.RelErr(decode(0), decode(base)); e > 1e-6 {
		t.Errorf("decoding from the copied rows: relative error %.3g", e)
	}
}

func TestKVRowsErrors(t *testing.T) {
	m := load(t, "models", "stories260K.gguf")
	kv, err := m.NewKVCache(16)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	if _, _, err := m.ReadKVRows(kv, 8, 17); err == nil {
		t.Error("reading past the cache succeeded")
	}
	k, v, err := m.ReadKVRows(kv, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.WriteKVRows(kv, 14, k, v); err == nil {
		t.Error("writing past the cache succeeded")
	}
	if err := m.WriteKVRows(kv, 0, k[:1], v); err == nil {
		t.Error("writing rows for one layer of several succeeded")
	}
}
