package gguf

import (
	"errors"
	"fmt"
)

// Sentinel causes, so callers can tell a damaged file (errors.Is(err, ErrTruncated)) from one
// this reader does not understand (ErrUnknownGGMLType) without parsing messages.
var (
	// ErrTruncated: the file ends before a field it announces (often an interrupted download).
	ErrTruncated = errors.New("truncated")
	// ErrBadMagic: the file does not start with "GGUF", so it is not a GGUF file at all.
	ErrBadMagic = errors.New("bad magic")
	// ErrUnsupportedVersion: GGUF v1 and versions newer than 3 are refused.
	ErrUnsupportedVersion = errors.New("unsupported GGUF version")
	// ErrUnknownValueType: a metadata value type outside 0..12.
	ErrUnknownValueType = errors.New("unknown value type")
	// ErrUnknownGGMLType: a tensor type id with no known block layout, so its size cannot be known.
	ErrUnknownGGMLType = errors.New("unknown ggml type")
	// ErrDuplicate: a metadata key or tensor name appears twice.
	ErrDuplicate = errors.New("duplicate")
	// ErrInvalid: a structurally readable field holds an impossible value
	// (bad shape, bad alignment, misaligned or overlapping tensor data, ...).
	ErrInvalid = errors.New("invalid")
)

// FormatError reports where a GGUF file is malformed, so a user can locate the damage with a
// hex dump: Offset is the absolute byte offset of the offending field and Field names it.
type FormatError struct {
	// Path is the file name when the error came from Open; empty for Parse.
	Path string
	// Offset is the absolute byte offset of the field that failed.
	Offset int64
	// Field names the field, e.g. `tensor 3 "blk.0.attn_q.weight" type`.
	Field string
	// Err is the cause; it wraps one of the sentinel errors above.
	Err error
}

// Error names the file, the offset and the field that could not be read, then why.
func (e *FormatError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("gguf: %s: offset 0x%x: %s: %v", e.Path, e.Offset, e.Field, e.Err)
	}
	return fmt.Sprintf("gguf: offset 0x%x: %s: %v", e.Offset, e.Field, e.Err)
}

// Unwrap exposes the cause for errors.Is / errors.As.
func (e *FormatError) Unwrap() error { return e.Err }

func formatErr(off uint64, field string, err error) error {
	return &FormatError{Offset: int64(off), Field: field, Err: err}
}

func truncatedErr(off uint64, field string, need, left uint64) error {
	return formatErr(off, field, fmt.Errorf("%w: need %d bytes, only %d left", ErrTruncated, need, left))
}

func invalidErr(off uint64, field string, format string, args ...any) error {
	return formatErr(off, field, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
}
