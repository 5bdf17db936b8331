package gpu

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// StorageBytes is the device memory the storage buffers alive now take (weights, KV cache,
// activations): what /metrics reports as GPU memory. Staging and parameter buffers, a few
// megabytes at most, are not counted.
func (d *Device) StorageBytes() uint64 { return uint64(max(d.live.Load(), 0)) }

// SetBudget caps the storage buffers' memory at bytes (0: no cap): beyond it NewBuffer fails
// with ErrOutOfMemory as if the device had refused. It makes Memory report the cap, for a
// device whose size the driver does not tell (--gpu-memory), and lets tests run out of memory
// on a software adapter, which never does.
func (d *Device) SetBudget(bytes uint64) { d.budget.Store(bytes) }

// Memory is how much memory the device offers, and where that figure comes from: SetBudget's
// cap; else, for CPU and integrated adapters, the system memory available when the device
// opened; else a discrete card's VRAM where Linux tells it (amdgpu). 0 means unknown.
func (d *Device) Memory() (bytes uint64, source string) {
	if b := d.budget.Load(); b > 0 {
		return b, "--gpu-memory"
	}
	return d.memory, d.memorySource
}

// checkBudget refuses an allocation beyond SetBudget's cap.
func (d *Device) checkBudget(label string, size uint64) error {
	b := d.budget.Load()
	if b == 0 {
		return nil
	}
	if used := d.StorageBytes(); used+size > b {
		return fmt.Errorf("%w: buffer %q of %d bytes does not fit: %d of %d bytes in use", ErrOutOfMemory, label, size, used, b)
	}
	return nil
}

// findMemory looks up the adapter's memory for Memory.
func findMemory(info AdapterInfo) (uint64, string) {
	switch info.Type {
	case "cpu", "integrated":
		if n := memAvailable("/proc/meminfo"); n > 0 {
			return n, "system memory available"
		}
	case "discrete":
		// One card with its VRAM size in sysfs can only be this one; with several, which is
		// which is not known from here.
		paths, _ := filepath.Glob("/sys/class/drm/card[0-9]*/device/mem_info_vram_total")
		if len(paths) == 1 {
			if raw, err := os.ReadFile(paths[0]); err == nil {
				if n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64); err == nil && n > 0 {
					return n, "VRAM"
				}
			}
		}
	}
	return 0, ""
}

// memAvailable reads MemAvailable from a meminfo file, in bytes (0 if absent).
func memAvailable(path string) uint64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				if kb, err := strconv.ParseUint(fields[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}
