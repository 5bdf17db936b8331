package server

// Checks on the raw bytes of a JSON body, made before the generated decoders see it: they bound
// what a hostile body can cost (nesting the decoders recurse into, error chains as deep as the
// nesting) and keep bytes that are not text out of every response.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"
)

const (
	// maxJSONDepth bounds the nesting of arrays and objects in a request body. The deepest
	// legitimate values (JSON schemas, tool parameters) are far shallower; llama-server has no
	// limit, but its parser is not recursive.
	maxJSONDepth = 128
	// maxErrorDetail bounds the length of a request error's description, whatever the body.
	maxErrorDetail = 512
	// maxJSONItems bounds the array elements and object members of a body, all arrays and
	// objects together. The decoders make a value of tens of bytes of each (a 32 MiB body of
	// one-digit token ids would become a gigabyte, and seconds of work); a million is far more
	// than any context holds tokens.
	maxJSONItems = 1 << 20
)

// checkJSONBody refuses request bodies that are not UTF-8 text or that nest deeper than
// maxJSONDepth (400), or that hold more than maxJSONItems values (413), saying where. The body
// is read whole (the decoders read it whole anyway); a read error, such as the body limit's, is
// replayed to the decoder after the bytes.
func (s *Server) checkJSONBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || (r.Method != http.MethodPost && r.Method != http.MethodPut && r.Method != http.MethodPatch) {
			next.ServeHTTP(w, r)
			return
		}
		data, err := io.ReadAll(r.Body)
		if err != nil {
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), errorReader{err}))
			next.ServeHTTP(w, r)
			return
		}
		if ae := jsonTextProblem(data); ae != nil {
			s.noteError(r.Context(), ae)
			writeError(w, ae)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		next.ServeHTTP(w, r)
	})
}

// jsonTextProblem describes the first of these problems in data, or returns nil: bytes that
// are not UTF-8 (RFC 8259 §8.1 requires it), nesting deeper than maxJSONDepth, more than
// maxJSONItems elements and members. Strings are skipped, so brackets and commas in them do not
// count.
func jsonTextProblem(data []byte) *apiError {
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, n := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return invalidRequest("invalid JSON: invalid UTF-8 at byte %d; request bodies must be UTF-8 text", off)
	}
	depth, items := 0, 0
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			if depth++; depth > maxJSONDepth {
				return invalidRequest("invalid JSON: arrays and objects nested deeper than %d levels (at byte %d)", maxJSONDepth, i)
			}
		case ']', '}':
			// Stray closers are the decoder's syntax error to report; they must not lower
			// the depth that later openers reach.
			depth = max(depth-1, 0)
		case ',':
			if items++; items >= maxJSONItems {
				return &apiError{typ: errRequestTooLarge, message: fmt.Sprintf(
					"request body too large: more than %d array elements and object members (at byte %d)", maxJSONItems, i)}
			}
		}
	}
	return nil
}

// errorReader fails every read with err.
type errorReader struct{ err error }

func (e errorReader) Read([]byte) (int, error) { return 0, e.err }
