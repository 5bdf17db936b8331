package model

import (
	"fmt"
	"sort"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// arch is one architecture, as llama.cpp's src/models/*.cpp describe one: how its
// hyperparameters, its tensors and its block graph differ from the shared building blocks
// (block_*.go). Each lives in a file of its own (arch_<name>.go) that registers it; adding an
// architecture is adding such a file and its test.
type arch struct {
	// name is general.architecture, the prefix of the file's own keys.
	name string
	// hparams reads the architecture's own keys into c, after readCommon read the shared ones
	// (keys checks and reads them; errors name the key).
	hparams func(k keys, c *Config) error
	// layer loads block il's tensors (named blk.<il>.*) into ly.
	layer func(l *loader, c *Config, ly *layer, il int) error
	// block records block il of a pass.
	block func(m *Model, p *pass, il int)
	// load, when set, replaces the decoder loading (global tensors, then layer for each block):
	// an encoder's own embeddings and post-norm blocks (bert).
	load func(m *Model, l *loader) error
	// stripsLast says llama.cpp's graph computes the last block's feed-forward for the output
	// rows alone (its inp_out_ids strip after the attention), which sets the summation order
	// of its F32 products there (preNormBlock, gpu.Recorder.SetOrderTokens).
	stripsLast bool
}

// archs are the registered architectures by name.
var archs = map[string]*arch{}

// register adds a to the registry; each arch_*.go file calls it from init.
func register(a *arch) {
	if _, dup := archs[a.name]; dup {
		panic("model: architecture " + a.name + " registered twice")
	}
	archs[a.name] = a
}

// Architectures lists the architectures this build runs, sorted: the registry's names.
func Architectures() []string {
	names := make([]string, 0, len(archs))
	for n := range archs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// lookupArch finds the file's architecture, or says which ones this build runs.
func lookupArch(name string) (*arch, error) {
	if name == "" {
		return nil, fmt.Errorf("model: general.architecture missing")
	}
	a, ok := archs[name]
	if !ok {
		return nil, fmt.Errorf("model: architecture %q not supported (supported: %s)", name, strings.Join(Architectures(), ", "))
	}
	return a, nil
}

// keys reads an architecture's metadata keys ("<arch>.<key>") with their checks.
type keys struct {
	f    *gguf.File
	arch string
}

// uint reads an optional unsigned key into dst, leaving it when absent.
func (k keys) uint(key string, dst *int) {
	if v, ok := k.f.Uint(k.arch + "." + key); ok {
		*dst = int(v)
	}
}

// float reads an optional float key into dst, leaving it when absent.
func (k keys) float(key string, dst *float32) {
	if v, ok := k.f.Float(k.arch + "." + key); ok {
		*dst = float32(v)
	}
}

// bool reads an optional boolean key into dst, leaving it when absent.
func (k keys) bool(key string, dst *bool) {
	if v, ok := k.f.Bool(k.arch + "." + key); ok {
		*dst = v
	}
}

// required reads an unsigned key that must be present, positive and sane.
func (k keys) required(key string, dst *int) error {
	v, ok := k.f.Uint(k.arch + "." + key)
	if !ok || v == 0 || v > 1<<24 {
		return fmt.Errorf("model: metadata %s.%s missing or invalid", k.arch, key)
	}
	*dst = int(v)
	return nil
}

// pass is what a block's recording needs of the forward pass being recorded: n tokens of
// seqs sequences whose inputs are in the scratch buffers, at most maxKeys positions deep,
// the cache addressed with pageBits (Batch.PageBits), attention limits from attnPos (the
// positions, or Batch.AttnEnds in their place), recurrent layers' sequences in rec.
type pass struct {
	r                          *gpu.Recorder
	kv                         *KVCache
	n, seqs, maxKeys, pageBits int
	outputs                    int // the rows whose logits the pass records (0: none)
	attnPos                    *gpu.Buffer
	rec                        gpu.RecurrentBatch
}

// neox marks the architectures llama.cpp ropes with GPT-NeoX pairs (LLAMA_ROPE_TYPE_NEOX).
func neox(k keys, c *Config) error {
	c.RopeNeoX = true
	return nil
}

// hasTensor reports whether the file holds a tensor of that name.
func (l *loader) hasTensor(name string) bool {
	_, ok := l.f.Tensor(name)
	return ok
}

// archFor is the registered architecture of a loaded model.
func (m *Model) archFor() *arch { return archs[m.Config.Arch] }
