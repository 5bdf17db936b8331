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

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
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
}

// newSSE writes events straight to the response.
func newSSE(w http.ResponseWriter) *sseWriter {
	return &sseWriter{out: w, begin: func() { startEventStream(w) }, flush: http.NewResponseController(w).Flush}
}

// newSessionSSE writes events to a resumable stream's session.
func newSessionSSE(s *resumable.Session) *sseWriter { return &sseWriter{out: s} }

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
	if !s.started {
		s.started = true
		if s.begin != nil {
			s.begin()
		}
	}
	// One write per event, so a session never holds half an event that its producer wrote.
	buf := make([]byte, 0, len(prefix)+len(payload)+2)
	buf = append(buf, prefix...)
	buf = append(buf, payload...)
	buf = append(buf, "\n\n"...)
	if _, err := s.out.Write(buf); err != nil {
		return err
	}
	if s.flush == nil {
		return nil
	}
	return s.flush()
}

// errNoFinal reports an engine channel that closed without a final result.
var errNoFinal = errors.New("engine: result channel closed without a final result")

// nextResult waits for the engine's next result, or for the request to end (client gone).
func nextResult(ctx context.Context, ch <-chan engine.Result) (engine.Result, error) {
	select {
	case <-ctx.Done():
		return engine.Result{}, ctx.Err()
	case res, ok := <-ch:
		if !ok {
			return engine.Result{}, errNoFinal
		}
		return res, nil
	}
}

// nextStreamed waits for the next result of a stream being written to sse; see streamEnds.
func (s *Server) nextStreamed(ctx context.Context, ch <-chan engine.Result, sse *sseWriter, fail func(error) *apiError, sendErr func(*apiError)) (res engine.Result, over bool, err error) {
	res, err = nextResult(ctx, ch)
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
