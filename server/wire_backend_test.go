package server

import (
	"net/http/httptest"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// wireBackend is one backend the end-to-end tests (the openai-go client and the comparisons
// with llama-server's captures) run against. real marks the engine on stories260K, whose
// greedy outputs must equal the captures exactly; the fake only has to match their shape.
type wireBackend struct {
	name string
	load func(t *testing.T) Backend
	real bool
}

// wireBackends lists them; the engine case skips without the shared model or a GPU adapter
// (and fails under WGPU_LLAMA_REQUIRE_GPU), as the engine's own tests do.
var wireBackends = []wireBackend{
	{name: "fake", load: func(t *testing.T) Backend { return newFakeBackend(t) }},
	{name: "engine", load: func(t *testing.T) Backend { return enginetest.Load(t, "models", "stories260K.gguf") }, real: true},
}

// forEachBackend runs fn as a subtest per backend, each with its own server on a loopback
// port, named "stories260K" as in the captures.
func forEachBackend(t *testing.T, fn func(t *testing.T, url string, real bool)) {
	for _, wb := range wireBackends {
		t.Run(wb.name, func(t *testing.T) {
			b := wb.load(t)
			srv := New(Config{Alias: "stories260K"}, testLogger())
			srv.SetBackend(b)
			ts := httptest.NewServer(srv.Handler())
			t.Cleanup(ts.Close)
			fn(t, ts.URL, wb.real)
		})
	}
}
