//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package gguf

import (
	"fmt"
	"math"
	"os"
	"syscall"
)

// mapFile maps the file read-only so that tensor data is paged in on demand and shared with
// the page cache instead of being copied onto the Go heap. It falls back to reading the file
// when the file system refuses mmap.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	if size < 0 || uint64(size) > math.MaxInt {
		return nil, nil, fmt.Errorf("file size %d cannot be mapped", size)
	}
	data, err := syscall.Mmap(int(fh.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return readWhole(fh, size)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
