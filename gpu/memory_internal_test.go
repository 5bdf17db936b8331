package gpu

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMemAvailable reads MemAvailable from a meminfo file in its kB unit, and 0 when absent.
func TestMemAvailable(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "meminfo")
	os.WriteFile(p, []byte("MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   22118400 kB\n"), 0o644)
	if got := memAvailable(p); got != 22118400<<10 {
		t.Errorf("memAvailable = %d, want %d", got, uint64(22118400)<<10)
	}
	os.WriteFile(p, []byte("MemTotal: 1 kB\n"), 0o644)
	if got := memAvailable(p); got != 0 {
		t.Errorf("without MemAvailable: %d, want 0", got)
	}
	if got := memAvailable(filepath.Join(dir, "none")); got != 0 {
		t.Errorf("missing file: %d", got)
	}
}
