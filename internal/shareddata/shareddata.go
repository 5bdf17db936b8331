// Package shareddata locates the project's shared test data (real models, reference outputs),
// which lives beside the repository and is never copied into it.
package shareddata

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// EnvVar names the directory holding the shared data; .ci/run sets it.
const EnvVar = "WGPU_LLAMA_SHARED"

// Dir returns the shared data directory, or "" when EnvVar is unset.
func Dir() string { return os.Getenv(EnvVar) }

// Path joins parts under the shared data directory. It skips the test, saying why, when the
// directory is not configured, and fails it when the directory is configured but lacks the file.
func Path(tb testing.TB, parts ...string) string {
	tb.Helper()
	dir := Dir()
	if dir == "" {
		tb.Skipf("shared test data not configured: set %s to the shared/ directory (e.g. ../shared)", EnvVar)
	}
	p := filepath.Join(append([]string{dir}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("shared test data missing (%s=%s): %v", EnvVar, dir, err)
	}
	return p
}

// Float32s reads a shared file of little-endian float32 values (a reference's tensors).
func Float32s(tb testing.TB, parts ...string) []float32 {
	tb.Helper()
	b, err := os.ReadFile(Path(tb, parts...))
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}
