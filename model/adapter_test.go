package model_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// loadAdapters loads the reference's adapters (by letter: A, A16, B, C) into m, in order.
func loadAdapters(t *testing.T, m *model.Model, names ...string) {
	t.Helper()
	files := map[string]string{"A": "stories260K-lora-A-F32.gguf", "A16": "stories260K-lora-A-F16.gguf", "B": "stories260K-lora-B-F32.gguf", "C": "stories260K-lora-C-noalpha-F32.gguf"}
	for _, n := range names {
		if _, err := m.LoadAdapterFile(shareddata.Path(t, "models", "lora") + "/" + files[n]); err != nil {
			t.Fatal(err)
		}
	}
}

// greedyWith generates 32 greedy tokens after "Once upon a time" with the adapters' scales.
func greedyWith(t *testing.T, m *model.Model, scales []float32) string {
	t.Helper()
	kv, err := m.NewKVCache(64)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	prompt := []int32{1, 403, 407, 261, 378}
	b := model.Batch{Lora: scales, Logits: []int{len(prompt) - 1}}
	for i, tok := range prompt {
		b.Tokens, b.Pos, b.Base = append(b.Tokens, tok), append(b.Pos, int32(i)), append(b.Base, 0)
	}
	var out []string
	for step := range 32 {
		logits, err := m.ForwardBatch(kv, b)
		if err != nil {
			t.Fatal(err)
		}
		id := argmax(logits[0])
		out = append(out, fmt.Sprint(id))
		b = model.Batch{Tokens: []int32{id}, Pos: []int32{int32(len(prompt) + step)}, Base: []int32{0}, Logits: []int{0}, Lora: scales}
	}
	return strings.Join(out, " ")
}

// Every greedy reference of ../shared/models/lora: llama.cpp's 32 tokens with each adapter
// alone, scaled, negative, combined, without alpha, in F16, and at scale 0 (the base).
func TestLoraGreedyMatchesLlamaCpp(t *testing.T) {
	m := loadOpts(t, model.Options{MaxBatch: 16}, "models", "stories260K.gguf")
	loadAdapters(t, m, "A", "B", "C", "A16")
	const (
		base = "432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 282 295 433 426 385 328 432 358 394"
		a1   = "432 383 286 261 370 268 414 422 395 405 426 405 401 396 267 337 335 345 267 422 419 426 385 328 432 281 272 277 264 261 370 268"
	)
	for _, c := range []struct {
		name   string
		scales []float32 // A, B, C, A-F16
		want   string
	}{
		{"base", nil, base},
		{"all zero", []float32{0, 0, 0, 0}, base},
		{"A x1", []float32{1}, a1},
		{"A x0.5", []float32{0.5}, "432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 335 311 267 422 419 269 279 276 314 419 426 385 328 432 358 272"},
		{"A+B", []float32{1, 1}, "432 383 286 261 370 268 414 422 395 326 426 326 286 399 280 414 341 269 401 396 267 337 335 345 374 419 426 385 328 432 281 272"},
		{"B", []float32{0, 1}, "432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 262 379 419 316 426 385 328 432 358"},
		{"A x-1", []float32{-1}, "432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 282 295 433 426 385 328 432 317 439"},
		{"A x0.5 + B x2", []float32{0.5, 2}, "432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 262 379 419 316 419 426 385 328 432"},
		{"C (no alpha)", []float32{0, 0, 1}, "432 383 286 261 376 298 315 421 395 317 426 385 328 432 317 263 377 267 265 282 295 433 428 411 335 311 357 343 426 385 328 432"},
		{"A-F16 x1", []float32{0, 0, 0, 1}, a1},
	} {
		if got := greedyWith(t, m, c.scales); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// A BF16 adapter loads and runs: adapter A rounded to bfloat16 gives llama.cpp's A x1 tokens.
func TestLoraBF16(t *testing.T) {
	src, err := gguf.Open(shareddata.Path(t, "models", "lora") + "/stories260K-lora-A-F32.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var ts []gguf.TensorData
	for i := range src.Tensors {
		ti := &src.Tensors[i]
		vals := make([]float32, ti.NumElements())
		if err := gguf.Dequantize(ti.Type, src.TensorData(ti), vals); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 2*len(vals))
		for j, v := range vals {
			binary.LittleEndian.PutUint16(data[2*j:], gguf.F32ToBF16(v))
		}
		ts = append(ts, gguf.TensorData{Name: ti.Name, Shape: ti.Shape, Type: gguf.TypeBF16, Data: data})
	}
	path := filepath.Join(t.TempDir(), "lora-A-BF16.gguf")
	if err := gguf.WriteFile(path, src.KV, ts); err != nil {
		t.Fatal(err)
	}
	m := loadOpts(t, model.Options{MaxBatch: 16}, "models", "stories260K.gguf")
	if _, err := m.LoadAdapterFile(path); err != nil {
		t.Fatal(err)
	}
	const a1 = "432 383 286 261 370 268 414 422 395 405 426 405 401 396 267 337 335 345 267 422 419 426 385 328 432 281 272 277 264 261 370 268"
	if got := greedyWith(t, m, []float32{1}); got != a1 {
		t.Errorf("A in BF16:\n got %s\nwant %s", got, a1)
	}
}
