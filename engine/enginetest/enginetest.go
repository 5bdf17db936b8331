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
	path := shareddata.Path(tb, parts...)
	if spec.DraftModel != "" {
		spec.DraftModel = shareddata.Path(tb, strings.Split(spec.DraftModel, "/")...)
	}
	_, err := gpu.Adapters()
	gputest.Check(tb, err) // skip or fail exactly as the GPU tests do
	e, err := engine.Load(context.Background(), engine.Config{ModelPath: path, CtxSize: 512 * n, Slots: n, Device: -1,
		Speculative: spec, Logger: log.New(testWriter{tb})})
	gputest.Check(tb, err)
	tb.Cleanup(func() { e.Close() })
	return e
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(string(p))
	return len(p), nil
}
