package gguf

import (
	"fmt"
	"io"
	"math"
	"os"
)

// readWhole reads the file into memory, the fallback where it cannot be mapped.
func readWhole(fh *os.File, size int64) ([]byte, func() error, error) {
	if size < 0 || uint64(size) > math.MaxInt {
		return nil, nil, fmt.Errorf("file size %d cannot be read into memory", size)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(fh, 0, size), data); err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
