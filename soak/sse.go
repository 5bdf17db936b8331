package soak

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// errBadSSE marks a stream that is not well-formed server-sent events as the server sends
// them: a partial event at the end, data that is not JSON, no [DONE].
var errBadSSE = errors.New("bad SSE")

// maxEventBytes bounds one event's size, so that a runaway stream cannot exhaust memory.
const maxEventBytes = 1 << 20

// sseReader reads server-sent events and counts the bytes it has consumed, which is the
// offset a resumable stream is reattached from. Comment-only events (the server's ":" pings)
// are consumed but not returned.
type sseReader struct {
	r *bufio.Reader
	// n is how many bytes the events returned so far (and the pings between them) span.
	n int64
	// keep, when set, receives every byte consumed, so a reattach can be compared.
	keep *bytes.Buffer
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReader(r)} }

// next returns the next event's data (its data: lines joined by "\n"). It returns io.EOF at
// a clean end between events and an errBadSSE error for a stream cut inside an event.
func (s *sseReader) next() (string, error) {
	var data []string
	size, hasData, started := 0, false, false
	for {
		line, err := s.r.ReadString('\n')
		if len(line) > 0 && err == nil {
			s.n += int64(len(line))
			if s.keep != nil {
				s.keep.WriteString(line)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" && !started {
				return "", io.EOF
			}
			if errors.Is(err, io.EOF) {
				return "", fmt.Errorf("%w: the stream ended inside an event (%q)", errBadSSE, truncate(line, 80))
			}
			return "", err
		}
		started = true
		if size += len(line); size > maxEventBytes {
			return "", fmt.Errorf("%w: an event over %d bytes", errBadSSE, maxEventBytes)
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if hasData {
				return strings.Join(data, "\n"), nil
			}
			size, started = 0, false // a ping, or stray blank lines
		case strings.HasPrefix(line, ":"):
			// a comment: keep-alive
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			hasData = true
		default:
			// event:, id:, retry: carry nothing the soak checks
		}
	}
}

// chunk is the part of a streamed chat chunk (or a non-streamed answer) the soak reads.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content          *string         `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage   *usage   `json:"usage"`
	Timings *timings `json:"timings"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

type usage struct {
	CompletionTokens int64 `json:"completion_tokens"`
}

type timings struct {
	PredictedN int64 `json:"predicted_n"`
}

// hasToken says whether a chunk carries generated text (content, reasoning or a tool call's
// delta), which is what time to first token and the inter-token gaps time.
func (c *chunk) hasToken() bool {
	for _, ch := range c.Choices {
		d := ch.Delta
		if (d.Content != nil && *d.Content != "") || (d.ReasoningContent != nil && *d.ReasoningContent != "") ||
			(len(d.ToolCalls) > 0 && string(d.ToolCalls) != "null") {
			return true
		}
	}
	return false
}

// finished says whether a chunk has a finish_reason.
func (c *chunk) finished() bool {
	for _, ch := range c.Choices {
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			return true
		}
	}
	return false
}

// completionTokens is the chunk's count of generated tokens: its usage, else its timings.
func (c *chunk) completionTokens() int64 {
	switch {
	case c.Usage != nil:
		return c.Usage.CompletionTokens
	case c.Timings != nil:
		return c.Timings.PredictedN
	}
	return 0
}

// parseChunk decodes one data payload of a chat stream.
func parseChunk(data string) (*chunk, error) {
	var c chunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return nil, fmt.Errorf("%w: data is not JSON: %v (%q)", errBadSSE, err, truncate(data, 80))
	}
	return &c, nil
}

// parseEvents splits a complete event-stream text into its data payloads; it is how a
// reattached tail is checked to start at an event boundary and end with [DONE].
func parseEvents(b []byte) ([]string, error) {
	r := newSSEReader(bytes.NewReader(b))
	var out []string
	for {
		d, err := r.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
