package server

// Streaming responses and ogen.
//
// ogen generates SSE clients but not SSE servers. The completion operations therefore mark
// both of their response media types (application/json and text/event-stream) with
// x-ogen-raw-response in openapi.yaml: ogen still routes, decodes and validates the request,
// then hands the operation to gen.RawHandler together with the http.ResponseWriter, and the
// handler writes either one JSON body or the event stream below. An error returned before
// anything was written still goes through NewError, so early failures are ordinary JSON errors.

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// encoder is a generated type that can write itself as JSON.
type encoder interface {
	Encode(e *jx.Encoder)
}

// sseWriter writes server-sent events. Nothing is sent until the first event, so a handler can
// still answer with a JSON error until it has a first result to stream.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	enc     jx.Encoder
}

func newSSE(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// start commits the 200 status and the event-stream headers llama-server sends.
func (s *sseWriter) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	// Tell nginx-style proxies not to buffer the stream.
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
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
	s.start()
	buf := make([]byte, 0, len(prefix)+len(payload)+2)
	buf = append(buf, prefix...)
	buf = append(buf, payload...)
	buf = append(buf, "\n\n"...)
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	return s.rc.Flush()
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

// drain consumes whatever the engine still sends after the handler stopped listening (client
// gone, write failed), so an engine blocked on the channel is released; the engine learns of
// the cancellation through the request context it got in Submit.
func drain(ch <-chan engine.Result) {
	go func() {
		for range ch {
		}
	}()
}
