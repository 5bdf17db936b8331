package server

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// procStats are the process's own gauges for /metrics: what a long soak watches for leaks.
type procStats struct {
	rss        uint64 // resident memory in bytes; 0 where /proc is missing
	goroutines int
	fds        int // open file descriptors; -1 where /proc is missing
}

// readProcStats reads the gauges from /proc/self (Linux); elsewhere RSS and descriptors are
// unknown and left out of /metrics.
func readProcStats() procStats {
	p := procStats{goroutines: runtime.NumGoroutine(), fds: -1}
	if raw, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(raw)); len(f) > 1 {
			if pages, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				p.rss = pages * uint64(os.Getpagesize())
			}
		}
	}
	if d, err := os.Open("/proc/self/fd"); err == nil {
		names, err := d.Readdirnames(-1)
		d.Close()
		if err == nil {
			p.fds = len(names) - 1 // less the descriptor reading the directory
		}
	}
	return p
}
