package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxBody bounds what the soak reads of one answer.
const maxBody = 8 << 20

// client sends the soak's requests to one server.
type client struct {
	base, key string
	// hc is shared by the workers and keeps connections alive between requests.
	hc *http.Client
	// dropHC opens a connection per request and records it (see connHolder), so that a
	// drop can close it abruptly.
	dropHC *http.Client
}

func newClient(base, key string, conns int) *client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	shared := &http.Transport{
		Proxy: nil, DialContext: dialer.DialContext,
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: 30 * time.Second,
	}
	drop := &http.Transport{
		Proxy: nil, DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if h, ok := ctx.Value(connKey{}).(*connHolder); ok && err == nil {
				h.set(conn)
			}
			return conn, err
		},
	}
	return &client{base: strings.TrimRight(base, "/"), key: key, hc: &http.Client{Transport: shared}, dropHC: &http.Client{Transport: drop}}
}

// closeIdle closes the kept-alive connections, so that the server's goroutines and file
// descriptors for them are gone before a snapshot.
func (c *client) closeIdle() { c.hc.CloseIdleConnections() }

// connKey is the context key under which a drop request's connHolder travels to the dialer.
type connKey struct{}

// connHolder receives the connection a drop request was sent on.
type connHolder struct {
	mu   sync.Mutex
	conn net.Conn
}

func (h *connHolder) set(c net.Conn) {
	h.mu.Lock()
	h.conn = c
	h.mu.Unlock()
}

// abort closes the connection with a reset (linger 0), as a client that crashes or loses its
// network does, without reading the rest of the answer. It reports whether there was one.
func (h *connHolder) abort() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return false
	}
	if tc, ok := h.conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	h.conn.Close()
	return true
}

// request builds a request to path with body (JSON-encoded unless nil) and the API key.
func (c *client) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	return req, nil
}

// call POSTs body to path and returns the answer's body when it is a 200; otherwise the
// outcome that says what went wrong (route names path in error kinds).
func (c *client) call(ctx context.Context, path, route string, body any) ([]byte, *outcome) {
	return c.roundTrip(ctx, http.MethodPost, path, route, body)
}

// fetch GETs path and returns the body of a 200, or the outcome of another answer.
func (c *client) fetch(ctx context.Context, path, route string) ([]byte, *outcome) {
	return c.roundTrip(ctx, http.MethodGet, path, route, nil)
}

// roundTrip sends one request and reads its whole (bounded) answer.
func (c *client) roundTrip(ctx context.Context, method, path, route string, body any) ([]byte, *outcome) {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return nil, &outcome{fail: &failure{"client error", err.Error()}}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &outcome{fail: classify(route, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, &outcome{fail: classify(route, err)}
	}
	if resp.StatusCode != http.StatusOK {
		o := statusOutcome(route, resp.StatusCode, string(data))
		return nil, &o
	}
	return data, nil
}

// readBody reads a response's body, bounded.
func readBody(resp *http.Response) (string, error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return string(b), err
}

// statusOutcome classifies a non-200 answer: load shedding, a kind the server does not serve
// (skipped, not an error), or an error counted as "http CODE ROUTE".
func statusOutcome(route string, code int, body string) outcome {
	msg := fmt.Sprintf("%d %s", code, truncate(body, 300))
	if code == http.StatusServiceUnavailable && strings.Contains(body, "--max-queue") {
		return outcome{shed: true, fail: &failure{"shed", msg}}
	}
	if reason := unsupported(code, body); reason != "" {
		return outcome{skip: reason}
	}
	return outcome{fail: &failure{fmt.Sprintf("http %d %s", code, route), msg}}
}

// unsupported recognises the server's refusals of a feature it was not started with: a 501
// not_supported_error (embeddings without --embeddings), embeddings of a model that pools
// nothing, and tools without --jinja. It returns the server's message, or "".
func unsupported(code int, body string) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(body), &e) != nil {
		return ""
	}
	m := e.Error.Message
	switch {
	case code == http.StatusNotImplemented && e.Error.Type == "not_supported_error",
		code == http.StatusBadRequest && strings.Contains(m, "Pooling type 'none'"),
		code == http.StatusBadRequest && strings.Contains(m, "requires --jinja"):
		return m
	}
	return ""
}

// classify names a transport or stream error's kind.
func classify(route string, err error) *failure {
	var ne net.Error
	kind := "transport error"
	switch {
	case errors.Is(err, errBadSSE):
		kind = "bad SSE " + route
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		kind = "timeout"
	case errors.Is(err, syscall.ECONNRESET):
		kind = "connection reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		kind = "connection refused"
	case errors.Is(err, syscall.EPIPE):
		kind = "broken pipe"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		kind = "unexpected EOF"
	}
	var se *streamError
	if errors.As(err, &se) {
		kind = "stream error " + route
	}
	return &failure{kind, route + ": " + err.Error()}
}

// streamError is an error event in the middle of a stream (data: {"error": ...}).
type streamError struct {
	code int
	msg  string
}

func (e *streamError) Error() string { return fmt.Sprintf("error event %d: %s", e.code, e.msg) }

// chatStream is what reading a streamed chat completion found.
type chatStream struct {
	tokens int64
	ttft   time.Duration
	gaps   []time.Duration
	chunks int  // chunks that carried a token
	done   bool // [DONE] came
	// stopped says that reading stopped after stopAfter token chunks, before the end.
	stopped bool
}

// readChat reads a chat stream's events until [DONE] or, when stopAfter > 0, until that
// many chunks carried tokens. Times count from t0, when the request went out. The usage (or
// timings) of the last chunk that has one gives the tokens; lacking both, the chunks do.
func readChat(sr *sseReader, t0 time.Time, stopAfter int) (chatStream, error) {
	var st chatStream
	var last time.Time
	finished := false
	for {
		data, err := sr.next()
		if errors.Is(err, io.EOF) {
			return st, fmt.Errorf("%w: the stream ended without [DONE]", errBadSSE)
		}
		if err != nil {
			return st, err
		}
		if data == "[DONE]" {
			if !finished {
				return st, fmt.Errorf("%w: [DONE] without a finish_reason", errBadSSE)
			}
			if st.tokens == 0 {
				st.tokens = int64(st.chunks)
			}
			st.done = true
			return st, nil
		}
		c, err := parseChunk(data)
		if err != nil {
			return st, err
		}
		if c.Error != nil {
			return st, &streamError{c.Error.Code, c.Error.Message}
		}
		now := time.Now()
		if c.hasToken() {
			if st.chunks == 0 {
				st.ttft = now.Sub(t0)
			} else {
				st.gaps = append(st.gaps, now.Sub(last))
			}
			last = now
			st.chunks++
		}
		finished = finished || c.finished()
		if n := c.completionTokens(); n > 0 {
			st.tokens = n
		}
		if stopAfter > 0 && st.chunks >= stopAfter {
			st.stopped = true
			st.tokens = int64(st.chunks) // what the client saw of a stream it cuts
			return st, nil
		}
	}
}
