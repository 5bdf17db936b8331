package model_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// TestSplitLayers: layers go to devices as llama.cpp's --tensor-split puts them, the output
// counted as one more layer.
func TestSplitLayers(t *testing.T) {
	for _, tc := range []struct {
		layers  int
		weights []float64
		want    []int
	}{
		{5, []float64{1, 1}, []int{3, 2}},
		{5, []float64{1, 3}, []int{2, 3}},
		{12, []float64{1, 3}, []int{4, 8}},
		{32, []float64{1, 1, 2}, []int{9, 8, 15}},
		{8, []float64{1, 0}, []int{8, 0}},
		{8, []float64{0, 1}, []int{0, 8}},
		{1, []float64{1, 1}, []int{1, 0}},
	} {
		got, err := model.SplitLayers(tc.layers, tc.weights)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("SplitLayers(%d, %v) = %v, %v; want %v", tc.layers, tc.weights, got, err, tc.want)
		}
	}
	for _, bad := range [][]float64{nil, {0, 0}, {1, -1}} {
		if _, err := model.SplitLayers(4, bad); err == nil {
			t.Errorf("SplitLayers(4, %v): no error", bad)
		}
	}
}

// secondDevice opens another device on the test adapter, as a second GPU would be.
func secondDevice(t *testing.T) *gpu.Device {
	t.Helper()
	dev, err := gpu.Open(-1)
	gputest.Check(t, err)
	t.Cleanup(dev.Close)
	return dev
}

// loadSplit loads the shared model at parts over the test device and a second one, layers
// apiece.
func loadSplit(t *testing.T, layers []int, opts model.Options, parts ...string) *model.Model {
	t.Helper()
	f, err := gguf.Open(shareddata.Path(t, parts...))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.LoadSplit([]*gpu.Device{gputest.Device(t), secondDevice(t)}, layers, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// cacheOf is a 64-row cache of m, released when the test ends.
func cacheOf(t *testing.T, m *model.Model) *model.KVCache {
	t.Helper()
	kv, err := m.NewKVCache(64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kv.Release)
	return kv
}

// forwardBoth runs tokens at pos0 through both models and returns their logits.
func forwardBoth(t *testing.T, one, two *model.Model, kv1, kv2 *model.KVCache, tokens []int32, pos0 int) (a, b []float32) {
	t.Helper()
	var err error
	if a, err = one.Forward(kv1, tokens, pos0); err != nil {
		t.Fatal(err)
	}
	if b, err = two.Forward(kv2, tokens, pos0); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestSplitMatchesOneDevice: stories260K over two devices gives the one-device model's logits
// bit for bit (a prompt, then greedy steps), the same candidates and the same cache rows, and
// puts its layers where asked.
func TestSplitMatchesOneDevice(t *testing.T) {
	opts := model.Options{MaxBatch: 16, MaxOutputs: 2}
	one := loadOpts(t, opts, "models", "stories260K.gguf")
	two := loadSplit(t, []int{2, 3}, opts, "models", "stories260K.gguf")
	st := two.StageLayers()
	if len(st) != 2 || st[0].Lo != 0 || st[0].Hi != 2 || st[1].Lo != 2 || st[1].Hi != 5 || st[0].Device == st[1].Device {
		t.Fatalf("stages %+v, want layers [0,2) and [2,5) on two devices", st)
	}
	if two.WeightBytes() < one.WeightBytes() { // more where both ends need the token embeddings
		t.Errorf("split weights %d bytes, fewer than one device's %d", two.WeightBytes(), one.WeightBytes())
	}
	kv1, kv2 := cacheOf(t, one), cacheOf(t, two)
	if kv2.Bytes() != kv1.Bytes() {
		t.Errorf("split cache %d bytes, one device's %d", kv2.Bytes(), kv1.Bytes())
	}

	prompt := one.Tokenizer.Encode("Once upon a time", true, false)
	a, b := forwardBoth(t, one, two, kv1, kv2, prompt, 0)
	var text strings.Builder
	for pos := len(prompt); pos < len(prompt)+20; pos++ {
		if !slices.Equal(a, b) {
			t.Fatalf("position %d: the split model's logits differ from one device's", pos)
		}
		id := argmax(a)
		text.WriteString(string(one.Tokenizer.Piece(id, false)))
		a, b = forwardBoth(t, one, two, kv1, kv2, []int32{id}, pos)
	}
	if !strings.HasPrefix(text.String(), ", there was a little girl named Lily") {
		t.Errorf("greedy text %q, want llama.cpp's", text.String())
	}

	batch := model.Batch{Tokens: []int32{1, 403}, Pos: []int32{30, 31}, Base: []int32{0, 0}, Logits: []int{0, 1}}
	c1, err := one.ForwardTopK(kv1, batch, 8)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := two.ForwardTopK(kv2, batch, 8)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c1 {
		if !slices.Equal(c1[i].IDs, c2[i].IDs) || !slices.Equal(c1[i].Logits, c2[i].Logits) {
			t.Errorf("row %d: candidates %v, want %v", i, c2[i].IDs, c1[i].IDs)
		}
	}

	k1, v1, err := one.ReadKVRows(kv1, 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	k2, v2, err := two.ReadKVRows(kv2, 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	if len(k2) != 5 || !slices.EqualFunc(k1, k2, bytes.Equal) || !slices.EqualFunc(v1, v2, bytes.Equal) {
		t.Fatalf("the split cache's rows (%d layers) differ from one device's", len(k2))
	}
	// Rows written back land on the device holding their layer.
	if err := two.WriteKVRows(kv2, 32, k2, v2); err != nil {
		t.Fatal(err)
	}
	k3, v3, err := two.ReadKVRows(kv2, 32, 64)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(k2, k3, bytes.Equal) || !slices.EqualFunc(v2, v3, bytes.Equal) {
		t.Error("rows written to the split cache read back differently")
	}
}

// TestSplitRecurrent: a hybrid model (Gated DeltaNet and attention layers) split over two
// devices gives one device's logits and recurrent state.
func TestSplitRecurrent(t *testing.T) {
	parts := []string{"models", "hybrid", "qwen35-Q8_0.gguf"}
	one := load(t, parts...)
	n := one.Config.NLayer
	two := loadSplit(t, []int{n / 2, n - n/2}, model.Options{MaxBatch: 16}, parts...)
	kv1, kv2 := cacheOf(t, one), cacheOf(t, two)
	prompt := []int32{1, 2, 3, 4, 5, 6, 7}
	if a, b := forwardBoth(t, one, two, kv1, kv2, prompt, 0); !slices.Equal(a, b) {
		t.Error("the split hybrid's logits differ from one device's")
	}
	s1, err := one.ReadState(kv1, 0)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := two.ReadState(kv2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s1, s2) {
		t.Error("the split hybrid's recurrent state differs from one device's")
	}
	if err := two.WriteState(kv2, 0, s1); err != nil {
		t.Fatal(err)
	}
}

// TestSplitRefused: a split that would need a stage to read another's cache, or an unequal
// count of layers, is refused with what to change.
func TestSplitRefused(t *testing.T) {
	f, err := gguf.Open(shareddata.Path(t, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	devs := []*gpu.Device{gputest.Device(t), secondDevice(t)}
	if _, err := model.LoadSplit(devs, []int{2, 2}, f, model.Options{}); err == nil || !strings.Contains(err.Error(), "the split gives 4 layers, the model has 5") {
		t.Errorf("4 of 5 layers: %v", err)
	}
	if _, err := model.LoadSplit(devs, []int{5}, f, model.Options{}); err == nil || !strings.Contains(err.Error(), "1 layer counts for 2 devices") {
		t.Errorf("one count for two devices: %v", err)
	}
}
