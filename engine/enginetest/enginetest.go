// Package enginetest loads a real engine for tests of the packages above it.
package enginetest

import (
	"context"
	"strings"
	"testing"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/engine"
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
	return LoadConfig(tb, engine.Config{CtxSize: 512 * n, Slots: n, Speculative: spec}, parts...)
}

// LoadConfig starts an engine with cfg on the shared model at parts (a DraftModel is a path
// under the shared data directory too), on the best device, logging to the test.
func LoadConfig(tb testing.TB, cfg engine.Config, parts ...string) *engine.Engine {
	tb.Helper()
	cfg.ModelPath = shareddata.Path(tb, parts...)
	if cfg.Speculative.DraftModel != "" {
		cfg.Speculative.DraftModel = shareddata.Path(tb, strings.Split(cfg.Speculative.DraftModel, "/")...)
	}
	cfg.Device, cfg.Logger = -1, log.New(testWriter{tb})
	_, err := gpu.Adapters()
	gputest.Check(tb, err) // skip or fail exactly as the GPU tests do
	e, err := engine.Load(context.Background(), cfg)
	gputest.Check(tb, err)
	tb.Cleanup(func() { e.Close() })
	return e
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(string(p))
	return len(p), nil
}
