//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package gguf

import "os"

// mapFile reads the whole file where this package has no mmap support.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	return readWhole(fh, size)
}
