package server

// Streaming responses and ogen.
//
// ogen generates SSE clients but not SSE servers. The completion operations therefore mark
// both of their response media types (application/json and text/event-stream) with
// x-ogen-raw-response in openapi.yaml: ogen still routes, decodes and validates the request,
// then hands the operation to gen.RawHandler together with the http.ResponseWriter, and the
// handler writes either one JSON body or the event stream below. An error returned before
// anything was written still goes through NewError, so early failures are ordinary JSON errors.
// GET /v1/stream/{id} is raw the same way: it relays a resumable stream's bytes (streams.go).

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/server/resumable"
)

// encoder is a generated type that can write itself as JSON.
type encoder interface {
	Encode(e *jx.Encoder)
}

// sseWriter writes server-sent events to a response or, for resumable streams, to a session
// that followers relay (streams.go). Nothing is sent until the first event, so a handler can
// still answer with a JSON error until it has a first result to stream.
type sseWriter struct {
	out io.Writer
	// begin commits the response before the first event; flush pushes each event out. Both
	// are nil for a session, which has no headers and no buffering.
	begin   func()
	flush   func() error
	started bool
	enc     jx.Encoder
	// pingEvery is the silence after which a keep-alive ping goes out (see keepAlive), 0 for
	// none; last is when the stream last wrote, broken that a write failed.
	pingEvery time.Duration
	last      time.Time
	broken    bool
}

// newSSE writes events straight to the response, pinging after pingEvery of silence (0: never).
func newSSE(w http.ResponseWriter, pingEvery time.Duration) *sseWriter {
	return &sseWriter{out: w, begin: func() { startEventStream(w) }, flush: http.NewResponseController(w).Flush, pingEvery: pingEvery}
}

// newSessionSSE writes events to a resumable stream's session; its pings reach every follower.
func newSessionSSE(s *resumable.Session, pingEvery time.Duration) *sseWriter {
	return &sseWriter{out: s, pingEvery: pingEvery}
}

// DefaultSSEPingInterval is llama-server's --sse-ping-interval default.
const DefaultSSEPingInterval = 30 * time.Second

// pingInterval is how long a stream of a request may stay silent before a keep-alive ping: the
// request's sse_ping_interval in seconds, else the server's --sse-ping-interval; 0 for never
// (a request's 0 or -1, a negative Config.SSEPingInterval).
func (s *Server) pingInterval(field gen.OptNilInt) time.Duration {
	if v, ok := field.Get(); ok {
		return max(time.Duration(v)*time.Second, 0)
	}
	switch d := s.cfg.SSEPingInterval; {
	case d == 0:
		return DefaultSSEPingInterval
	case d < 0:
		return 0
	default:
		return d
	}
}

// pingLine is llama-server's keep-alive: an empty comment, which event-stream parsers skip.
const pingLine = ":\n\n"

// keepAlive returns a channel that fires once the stream has been silent for its ping
// interval, and the function that releases its timer. The channel is nil (never fires) when
// pings are off, a write failed, or nothing was sent yet: as in llama-server, whose stream
// begins with the first result, the answer may until then still be a JSON error. s may be nil.
func (s *sseWriter) keepAlive() (<-chan time.Time, func() bool) {
	if s == nil || s.pingEvery <= 0 || !s.started || s.broken {
		return nil, func() bool { return false }
	}
	t := time.NewTimer(time.Until(s.last.Add(s.pingEvery)))
	return t.C, t.Stop
}

// ping sends the keep-alive comment. A failed write is not reported here (the client is gone
// and the request's end says so); it only ends the pings.
func (s *sseWriter) ping() { _ = s.write([]byte(pingLine)) }

// await waits for the next value of ch (ok false once ch is closed) or the end of ctx, sending
// sse's keep-alive pings while nothing comes; sse may be nil.
func await[T any](ctx context.Context, ch <-chan T, sse *sseWriter) (v T, ok bool, err error) {
	for {
		due, stop := sse.keepAlive()
		select {
		case <-ctx.Done():
			stop()
			return v, false, ctx.Err()
		case v, ok = <-ch:
			stop()
			return v, ok, nil
		case <-due:
			sse.ping()
		}
	}
}

// startEventStream commits the 200 status and the event-stream headers llama-server sends.
func startEventStream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	// Tell nginx-style proxies not to buffer the stream.
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// data sends v as one `data: {json}` event and flushes it.
func (s *sseWriter) data(v encoder) error {
	s.enc.Reset()
	v.Encode(&s.enc)
	return s.send("data: ", s.enc.Bytes())
}

// event sends v as a named event (`event: NAME` then `data: {json}`), as Anthropic's streams
// are framed.
func (s *sseWriter) event(name string, v encoder) error {
	s.enc.Reset()
	v.Encode(&s.enc)
	return s.send("event: "+name+"\ndata: ", s.enc.Bytes())
}

// done sends the `data: [DONE]` event that ends OpenAI-style streams.
func (s *sseWriter) done() error { return s.send("data: ", []byte("[DONE]")) }

// fail reports an error that happened after the stream started, as a `data: {"error":{...}}`
// event: the status is already sent, and OpenAI clients recognise this shape in a stream.
func (s *sseWriter) fail(e *apiError) error {
	body := e.body()
	return s.data(&body)
}

func (s *sseWriter) send(prefix string, payload []byte) error {
	// One write per event, so a session never holds half an event that its producer wrote.
	buf := make([]byte, 0, len(prefix)+len(payload)+2)
	buf = append(buf, prefix...)
	buf = append(buf, payload...)
	buf = append(buf, "\n\n"...)
	return s.write(buf)
}

// write sends bytes that end an event (or a ping) and flushes them.
func (s *sseWriter) write(buf []byte) error {
	if !s.started {
		s.started = true
		if s.begin != nil {
			s.begin()
		}
	}
	s.last = time.Now()
	if _, err := s.out.Write(buf); err != nil {
		s.broken = true
		return err
	}
	if s.flush == nil {
		return nil
	}
	if err := s.flush(); err != nil {
		s.broken = true
		return err
	}
	return nil
}

// errNoFinal reports an engine channel that closed without a final result.
var errNoFinal = errors.New("engine: result channel closed without a final result")

// nextResult waits for the engine's next result, or for the request to end (client gone),
// pinging sse (nil for none) while it waits.
func nextResult(ctx context.Context, ch <-chan engine.Result, sse *sseWriter) (engine.Result, error) {
	res, ok, err := await(ctx, ch, sse)
	switch {
	case err != nil:
		return engine.Result{}, err
	case !ok:
		return engine.Result{}, errNoFinal
	}
	return res, nil
}

// nextStreamed waits for the next result of a stream being written to sse; see streamEnds.
func (s *Server) nextStreamed(ctx context.Context, ch <-chan engine.Result, sse *sseWriter, fail func(error) *apiError, sendErr func(*apiError)) (res engine.Result, over bool, err error) {
	res, err = nextResult(ctx, ch, sse)
	over, err = s.streamEnds(ctx, res, err, sse, fail, sendErr)
	return res, over, err
}

// streamEnds decides, for a result (or the error of waiting for one) of a stream being written
// to sse, whether the stream is over. over reports that the caller should stop, returning err:
// the client left (err nil); the engine failed before anything was sent (err is the failure,
// to be answered as an ordinary JSON error); or it failed mid-stream, when the failure is
// noted and sent with sendErr (the endpoint's error event) and err is nil.
func (s *Server) streamEnds(ctx context.Context, res engine.Result, err error, sse *sseWriter, fail func(error) *apiError, sendErr func(*apiError)) (over bool, _ error) {
	if err == nil && res.Err != nil {
		err = res.Err
	}
	switch {
	case ctx.Err() != nil:
		return true, nil
	case err != nil && !sse.started:
		return true, fail(err)
	case err != nil:
		ae := fail(err)
		s.noteError(ctx, ae)
		sendErr(ae)
		return true, nil
	}
	return false, nil
}

// drain consumes whatever the engine still sends after the handler stopped listening (client
// gone, write failed), so an engine blocked on the channel is released; the engine learns of
// the cancellation through the context it got in Submit (the request's, or a resumable
// stream's session).
func drain(ch <-chan engine.Result) {
	go func() {
		for range ch {
		}
	}()
}
