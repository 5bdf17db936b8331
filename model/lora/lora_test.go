package lora

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// base is stories260K's shapes where the tests need them.
func base(name string) ([]uint64, bool) {
	s, ok := map[string][]uint64{"blk.0.attn_q.weight": {64, 64}, "blk.0.ffn_down.weight": {172, 64}, "blk.0.ffn_up_exps.weight": {64, 48, 6}}[name]
	return s, ok
}

// adapter writes an adapter file with the given keys and tensors (F32 zeros of the shapes).
func adapter(t *testing.T, arch string, alpha bool, tensors map[string][]uint64) string {
	t.Helper()
	kvs := []gguf.KV{
		{Key: "general.architecture", Type: gguf.TypeString, Value: arch},
		{Key: "general.type", Type: gguf.TypeString, Value: "adapter"},
		{Key: "adapter.type", Type: gguf.TypeString, Value: "lora"},
	}
	if alpha {
		kvs = append(kvs, gguf.KV{Key: "adapter.lora.alpha", Type: gguf.TypeFloat32, Value: float32(16)})
	}
	var ts []gguf.TensorData
	for name, shape := range tensors {
		n := uint64(1)
		for _, d := range shape {
			n *= d
		}
		ts = append(ts, gguf.TensorData{Name: name, Shape: shape, Type: gguf.TypeF32, Data: make([]byte, 4*n)})
	}
	path := filepath.Join(t.TempDir(), "adapter.gguf")
	if err := gguf.WriteFile(path, kvs, ts); err != nil {
		t.Fatal(err)
	}
	return path
}

func read(t *testing.T, path string) (*Adapter, error) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, "llama", base)
}

// A good adapter reads with its pairs, ranks and scale rule; bad ones fail naming what and
// where.
func TestRead(t *testing.T) {
	good := map[string][]uint64{"blk.0.attn_q.weight.lora_a": {64, 8}, "blk.0.attn_q.weight.lora_b": {8, 64}, "blk.0.ffn_down.weight.lora_a": {172, 8}, "blk.0.ffn_down.weight.lora_b": {8, 64}}
	ad, err := read(t, adapter(t, "llama", true, good))
	if err != nil {
		t.Fatal(err)
	}
	p := ad.Pairs["blk.0.ffn_down.weight"]
	if len(ad.Pairs) != 2 || p.Rank != 8 || p.In != 172 || p.Out != 64 || ad.Scale(p, 0.5) != 1 {
		t.Errorf("pairs %d, %+v, scale %v", len(ad.Pairs), p, ad.Scale(p, 0.5))
	}
	experts, err := read(t, adapter(t, "llama", true, map[string][]uint64{"blk.0.ffn_up_exps.weight.lora_a": {64, 4, 6}, "blk.0.ffn_up_exps.weight.lora_b": {4, 48, 6}}))
	if p := experts.Pairs["blk.0.ffn_up_exps.weight"]; err != nil || p.Rank != 4 || p.In != 64 || p.Out != 48 || p.Experts != 6 || ad.Pairs["blk.0.attn_q.weight"].Experts != 0 {
		t.Errorf("a pair per expert: %+v (%v)", p, err)
	}
	noAlpha, err := read(t, adapter(t, "llama", false, good))
	if err != nil || noAlpha.Scale(noAlpha.Pairs["blk.0.attn_q.weight"], 0.5) != 0.5 {
		t.Errorf("without alpha: %v", err)
	}
	with := func(name string, shape []uint64) map[string][]uint64 {
		m := map[string][]uint64{}
		for k, v := range good {
			m[k] = v
		}
		if shape == nil {
			delete(m, name)
		} else {
			m[name] = shape
		}
		return m
	}
	for name, c := range map[string]struct {
		arch    string
		tensors map[string][]uint64
		want    string
	}{
		"wrong arch":    {"qwen2", good, `the adapter is for architecture "qwen2", the model is "llama"`},
		"a lone lora_a": {"llama", with("blk.9.attn_q.weight.lora_a", []uint64{64, 8}), `tensor "blk.9.attn_q.weight" is missing one component`},
		"a lone lora_b": {"llama", with("blk.9.attn_q.weight.lora_b", []uint64{8, 64}), `blk.9.attn_q.weight`},
		"wrong shape":   {"llama", with("blk.0.attn_q.weight.lora_b", []uint64{8, 32}), `tensor "blk.0.attn_q.weight": shapes lora_a [64 8] and lora_b [8 32] do not fit the base's [64 64]`},
		"rank mismatch": {"llama", with("blk.0.attn_q.weight.lora_b", []uint64{4, 64}), `tensor "blk.0.attn_q.weight": shapes`},
		"missing half":  {"llama", with("blk.0.attn_q.weight.lora_b", nil), `tensor "blk.0.attn_q.weight" is missing one component`},
		"odd suffix":    {"llama", with("blk.0.attn_q.weight.lora_c", []uint64{8}), `tensor "blk.0.attn_q.weight.lora_c" has unexpected suffix`},
		"no pairs":      {"llama", map[string][]uint64{}, "holds no tensor pairs"},
		"one pair for all experts": {"llama", map[string][]uint64{"blk.0.ffn_up_exps.weight.lora_a": {64, 4}, "blk.0.ffn_up_exps.weight.lora_b": {4, 48}},
			`tensor "blk.0.ffn_up_exps.weight": shapes lora_a [64 4] and lora_b [4 48] do not fit the base's [64 48 6]`},
		"other expert count": {"llama", map[string][]uint64{"blk.0.ffn_up_exps.weight.lora_a": {64, 4, 6}, "blk.0.ffn_up_exps.weight.lora_b": {4, 48, 5}},
			`shapes lora_a [64 4 6] and lora_b [4 48 5] do not fit the base's [64 48 6]`},
		"norm is skipped": {"llama", with("blk.0.attn_norm.weight.lora_a", []uint64{64, 8}), ""},
	} {
		_, err := read(t, adapter(t, c.arch, true, c.tensors))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	// "not in model" pairs both halves on a tensor the base lacks
	both := with("blk.9.attn_q.weight.lora_a", []uint64{64, 8})
	both["blk.9.attn_q.weight.lora_b"] = []uint64{8, 64}
	if _, err := read(t, adapter(t, "llama", true, both)); err == nil || !strings.Contains(err.Error(), `tensor "blk.9.attn_q.weight" does not exist in the base model`) {
		t.Errorf("a tensor the model lacks: %v", err)
	}
	// a model file is no adapter; a truncated adapter does not open
	if _, err := read(t, shareddata.Path(t, "models", "stories260K.gguf")); err == nil || !strings.Contains(err.Error(), `general.type is "", not adapter`) {
		t.Errorf("a model as adapter: %v", err)
	}
	data, err := os.ReadFile(shareddata.Path(t, "models", "lora") + "/stories260K-lora-B-F32.gguf")
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.gguf")
	os.WriteFile(cut, data[:len(data)-100], 0o644)
	if _, err := read(t, cut); err == nil {
		t.Error("a truncated adapter read")
	}
}
