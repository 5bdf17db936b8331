// Package enginetest loads a real engine for tests of the packages above it.
package enginetest

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// Load starts an engine on the shared model at parts (e.g. "models", "stories260K.gguf") with
// a 512-token context, skipping as shareddata and gputest do when the data or GPU is absent.
// The engine is closed when the test ends.
func Load(tb testing.TB, parts ...string) *engine.Engine {
	tb.Helper()
	return LoadSlots(tb, 1, parts...)
}

// LoadSlots is Load with n slots, each with a 512-token context.
func LoadSlots(tb testing.TB, n int, parts ...string) *engine.Engine {
	tb.Helper()
	return LoadSpec(tb, n, engine.SpecConfig{}, parts...)
}

// LoadSpec is LoadSlots with speculative decoding configured by spec (a DraftModel is a path
// under the shared data directory, as parts are).
func LoadSpec(tb testing.TB, n int, spec engine.SpecConfig, parts ...string) *engine.Engine {
	tb.Helper()
	if spec.DraftModel != "" {
		spec.DraftModel = shareddata.Path(tb, strings.Split(spec.DraftModel, "/")...)
	}
	return LoadConfig(tb, engine.Config{ModelPath: shareddata.Path(tb, parts...), CtxSize: 512 * n, Slots: n, Speculative: spec})
}

// LoadConfig starts an engine as cfg says, on the best adapter, logging to the test; it skips
// or fails as gputest does without a GPU adapter and is closed when the test ends.
func LoadConfig(tb testing.TB, cfg engine.Config) *engine.Engine {
	tb.Helper()
	_, err := gpu.Adapters()
	gputest.Check(tb, err) // skip or fail exactly as the GPU tests do
	cfg.Device = -1
	if cfg.Logger == nil {
		cfg.Logger = log.New(testWriter{tb})
	}
	e, err := engine.Load(context.Background(), cfg)
	gputest.Check(tb, err)
	tb.Cleanup(func() { e.Close() })
	return e
}

// SynthModel writes gen-model's tiny preset as a bert encoder with full attention heads (the
// mean pooling of an embedding model), changed by edit (e.g. Rank for a reranker), into a
// temporary file and returns its path.
func SynthModel(tb testing.TB, edit func(*synth.Config)) string {
	tb.Helper()
	cfg, err := synth.Preset("tiny")
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Arch, cfg.KVHeads, cfg.NormEps = "bert", cfg.Heads, 1e-12
	if edit != nil {
		edit(&cfg)
	}
	path := filepath.Join(tb.TempDir(), "synth-"+cfg.Arch+".gguf")
	if _, err := synth.WriteFile(path, cfg, nil); err != nil {
		tb.Fatal(err)
	}
	return path
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(string(p))
	return len(p), nil
}

// LogBuffer is a buffer a server's or engine's goroutines may log into while the test reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what was logged so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
