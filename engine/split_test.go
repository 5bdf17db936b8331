package engine_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// model134M writes gen-model's 134m preset in Q4_K_M (12 layers of 768) to a temporary file.
func model134M(t *testing.T) string {
	t.Helper()
	cfg, err := synth.Preset("134m")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Mix = quantize.MixQ4_K_M
	path := filepath.Join(t.TempDir(), "synth-134m-Q4_K_M.gguf")
	if _, err := synth.WriteFile(path, cfg, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSplitEngineMatchesOneDevice: a model whose layers are split over two devices generates
// the one-device run's greedy tokens, four prompts batched and with n-gram speculative
// decoding, on stories260K and the 134M shape; --tensor-split 1,3 puts layers as llama.cpp
// does (the output counted as a layer: 4 of 12 on the first device).
func TestSplitEngineMatchesOneDevice(t *testing.T) {
	idx := gputest.AdapterIndex(t)
	spec := engine.DefaultSpecConfig()
	spec.Type, spec.NgramN, spec.NMax = engine.SpecNgram, 3, 8
	prompts := []string{"Once upon a time", "Tom had a red ball. Tom had a red ball. Tom had", "The cat", "Ben had a toy car"}
	for _, tc := range []struct {
		name   string
		path   string
		shares []float64
		want   []engine.DeviceLayers
	}{
		{"stories260K", shareddata.Path(t, "models", "stories260K.gguf"), []float64{1, 1},
			[]engine.DeviceLayers{{Lo: 0, Hi: 3}, {Lo: 3, Hi: 5, Output: true}}},
		{"134M-Q4_K_M", model134M(t), []float64{1, 3},
			[]engine.DeviceLayers{{Lo: 0, Hi: 4}, {Lo: 4, Hi: 12, Output: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := engine.Config{ModelPath: tc.path, CtxSize: 4 * 256, Slots: 4}
			one := enginetest.LoadConfig(t, base)
			want, _ := generateAll(t, one, prompts, greedy(24))

			split := base
			split.Devices, split.TensorSplit = []int{idx, idx}, tc.shares
			two := enginetest.LoadConfig(t, split)
			got := two.Info().Split
			for i := range got {
				got[i].Index, got[i].Name = 0, ""
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("split %+v, want %+v", got, tc.want)
			}
			if texts, _ := generateAll(t, two, prompts, greedy(24)); !slices.Equal(texts, want) {
				t.Errorf("split over two devices, batched:\n%q\nwant one device's\n%q", texts, want)
			}

			// Verifying drafts runs batches where plain decoding runs single tokens, whose
			// products round differently: the reference is the one-device run with drafts.
			base.Speculative, base.Slots, base.CtxSize = spec, 1, 512
			wantDrafted, _ := generate(t, enginetest.LoadConfig(t, base), prompts[1], greedy(24))
			split.Speculative, split.Slots, split.CtxSize = spec, 1, 512
			drafted := enginetest.LoadConfig(t, split)
			text, final := generate(t, drafted, prompts[1], greedy(24))
			if text != wantDrafted {
				t.Errorf("split with n-gram drafts: %q, want one device's %q", text, wantDrafted)
			}
			if final.Timings.DraftNAccepted == 0 {
				t.Errorf("no drafted token accepted (drafted %d): the speculative path did not run", final.Timings.DraftN)
			}
		})
	}
}

// TestSplitConfigErrors: a split the model cannot take is refused before anything loads, with
// what to change.
func TestSplitConfigErrors(t *testing.T) {
	idx := gputest.AdapterIndex(t)
	path := shareddata.Path(t, "models", "stories260K.gguf")
	for _, tc := range []struct {
		cfg  engine.Config
		want string
	}{
		{engine.Config{ModelPath: path, Devices: []int{idx, idx}, TensorSplit: []float64{1, 1, 1}}, "--tensor-split gives 3 shares for 2 devices"},
		{engine.Config{ModelPath: path, Devices: []int{idx, idx}, TensorSplit: []float64{0, 0}}, "gives every device nothing"},
		{engine.Config{ModelPath: path, Devices: []int{idx, 99}}, "device 99"},
		{engine.Config{ModelPath: path, Devices: []int{idx, idx}, TensorSplit: []float64{1, 1}, CtxSize: 65536, GPUMemory: 4 << 20},
			"device 0 (" + gputest.Device(t).Info.Name + "), which holds layers 0-2, has 4.0 MiB (--gpu-memory)"},
	} {
		_, err := engine.Load(t.Context(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.cfg.TensorSplit, err, tc.want)
		}
	}
}

// TestSplitWithAdapter: a LoRA adapter on a split model (each device loads its layers' terms,
// the last the output's) gives the one-device run's greedy tokens.
func TestSplitWithAdapter(t *testing.T) {
	idx := gputest.AdapterIndex(t)
	dir := shareddata.Path(t, "models", "lora")
	base := engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 512, Slots: 1,
		Lora: []engine.LoraSpec{{Path: filepath.Join(dir, "stories260K-lora-A-F32.gguf"), Scale: 1}}}
	plain := base
	plain.Lora = nil
	without, _ := generate(t, enginetest.LoadConfig(t, plain), "Once upon a time", greedy(24))
	want, _ := generate(t, enginetest.LoadConfig(t, base), "Once upon a time", greedy(24))
	if want == without {
		t.Fatalf("the adapter does not change the text %q: the test cannot tell", want)
	}
	base.Devices, base.TensorSplit = []int{idx, idx}, []float64{1, 1}
	if got, _ := generate(t, enginetest.LoadConfig(t, base), "Once upon a time", greedy(24)); got != want {
		t.Errorf("split with adapter A: %q, want one device's %q", got, want)
	}
}

// TestSplitDeviceLossRecovers: losing the second device of a split reopens every device and
// loads the model again, as losing the main one does, and greedy output is the same after.
func TestSplitDeviceLossRecovers(t *testing.T) {
	idx := gputest.AdapterIndex(t)
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 512, Slots: 1,
		Devices: []int{idx, idx}, TensorSplit: []float64{1, 1}})
	before, _ := generate(t, e, "Once upon a time", greedy(24))
	if err := e.LoseDeviceAt(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	after, _ := generate(t, e, "Once upon a time", greedy(24))
	if after != before {
		t.Errorf("after the recovery: %q, before: %q", after, before)
	}
	if e.Recoveries() != 1 || e.Health() != nil || len(e.Info().Split) != 2 {
		t.Errorf("Recoveries %d, Health %v, split %+v; want 1, nil and two devices", e.Recoveries(), e.Health(), e.Info().Split)
	}
}
