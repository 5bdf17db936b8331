package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// errorType is llama-server's error "type", which fixes the HTTP status.
type errorType string

// Error types as llama-server names them (format_error_response in server-common.cpp).
const (
	errInvalidRequest  errorType = "invalid_request_error"
	errAuthentication  errorType = "authentication_error"
	errPermission      errorType = "permission_error"
	errNotFound        errorType = "not_found_error"
	errServer          errorType = "server_error"
	errNotSupported    errorType = "not_supported_error"
	errUnavailable     errorType = "unavailable_error"
	errExceedContext   errorType = "exceed_context_size_error"
	errRequestTooLarge errorType = "request_too_large" // ours: llama-server has no body limit
	errConflict        errorType = "conflict_error"    // ours: a resumable stream's id is in use
)

// statusOf is the one table from error type to HTTP status.
var statusOf = map[errorType]int{
	errInvalidRequest:  http.StatusBadRequest,
	errAuthentication:  http.StatusUnauthorized,
	errPermission:      http.StatusForbidden,
	errNotFound:        http.StatusNotFound,
	errServer:          http.StatusInternalServerError,
	errNotSupported:    http.StatusNotImplemented,
	errUnavailable:     http.StatusServiceUnavailable,
	errExceedContext:   http.StatusBadRequest,
	errRequestTooLarge: http.StatusRequestEntityTooLarge,
	errConflict:        http.StatusConflict,
}

// apiError is an error as the client sees it: llama-server's {"error":{"code","message","type"}}.
// cause, when set, is the underlying error for logs and errors.Is.
type apiError struct {
	typ     errorType
	message string
	cause   error
	// code overrides the type's status (405 has no llama-server type of its own).
	code int

	// nPrompt and nCtx are reported with errExceedContext.
	nPrompt, nCtx int
}

func (e *apiError) Error() string { return string(e.typ) + ": " + e.message }
func (e *apiError) Unwrap() error { return e.cause }

func (e *apiError) status() int {
	if e.code != 0 {
		return e.code
	}
	if code, ok := statusOf[e.typ]; ok {
		return code
	}
	return http.StatusInternalServerError
}

// invalidRequest is a 400 invalid_request_error with a formatted message.
func invalidRequest(format string, args ...any) *apiError {
	return &apiError{typ: errInvalidRequest, message: fmt.Sprintf(format, args...)}
}

// errLoading is the 503 every route answers until a backend is set, as llama-server does.
var errLoading = &apiError{typ: errUnavailable, message: "Loading model"}

// toAPIError maps any handler or engine error to what the client sees; it is the one place
// that decides statuses and messages.
func toAPIError(err error) *apiError {
	var (
		ae       *apiError
		tooLarge *engine.InputTooLargeError
		tooLong  *engine.ContextExceededError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &tooLarge):
		return &apiError{typ: errServer, cause: err, message: tooLarge.Error()}
	case errors.As(err, &tooLong):
		return &apiError{typ: errExceedContext, cause: err, message: tooLong.Error(), nPrompt: tooLong.Tokens, nCtx: tooLong.NCtx}
	case errors.Is(err, engine.ErrEmbeddingsDisabled):
		return errNoEmbeddings
	case errors.Is(err, engine.ErrNotReranker):
		return errNoRerank
	case errors.Is(err, engine.ErrRankPooling):
		return errRankServer
	case errors.Is(err, engine.ErrNoGeneration):
		return &apiError{typ: errNotSupported, cause: err,
			message: "The loaded model is an embedding model (an encoder): it does not generate text. Use /v1/embeddings or /v1/rerank"}
	case errors.Is(err, engine.ErrPromptTooBig):
		return &apiError{typ: errExceedContext, cause: err,
			message: "the request exceeds the available context size, try increasing it"}
	case errors.Is(err, engine.ErrEmptyPrompt):
		return &apiError{typ: errInvalidRequest, cause: err, message: "the prompt is empty"}
	case errors.Is(err, engine.ErrInvalidSlot):
		return &apiError{typ: errInvalidRequest, cause: err, message: "Invalid slot ID"}
	case errors.Is(err, engine.ErrClosed):
		return &apiError{typ: errUnavailable, cause: err, message: "the server is shutting down"}
	case errors.Is(err, engine.ErrQueueFull):
		return &apiError{typ: errUnavailable, cause: err, message: "the server is busy: too many requests are waiting for a slot (--max-queue); retry later"}
	case errors.Is(err, engine.ErrDeviceLost):
		return &apiError{typ: errUnavailable, cause: err, message: firstLine(err.Error())}
	case errors.Is(err, engine.ErrOutOfMemory):
		return &apiError{typ: errUnavailable, cause: err, message: "the GPU has no memory left for this request (" + firstLine(err.Error()) + "); retry later, or with a shorter prompt or fewer tokens"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{typ: errServer, cause: err, message: "request cancelled"}
	}
	return &apiError{typ: errServer, cause: err, message: err.Error()}
}

// firstLine is an error message's first line: wgpu's run on over several.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

// submitError explains a failed Submit (or a failed final result) with the request's numbers.
func submitError(err error, nPrompt, nCtx int) *apiError {
	ae := toAPIError(err)
	if ae.typ == errExceedContext && ae.nCtx == 0 {
		ae = &apiError{typ: errExceedContext, cause: err, nPrompt: nPrompt, nCtx: nCtx,
			message: fmt.Sprintf("the request exceeds the available context size, try increasing it "+
				"(the prompt has %d tokens, the context size is %d)", nPrompt, nCtx)}
	}
	return ae
}

// body converts e to the generated error schema.
func (e *apiError) body() gen.ErrorResponse {
	b := gen.ErrorBody{Code: e.status(), Message: e.message, Type: string(e.typ)}
	if e.typ == errExceedContext && e.nCtx > 0 {
		b.NPromptTokens = gen.NewOptInt(e.nPrompt)
		b.NCtx = gen.NewOptInt(e.nCtx)
	}
	return gen.ErrorResponse{Error: b}
}

// NewError implements gen.Handler: ogen calls it for every error a handler returns.
func (s *Server) NewError(ctx context.Context, err error) *gen.ErrorStatusCode {
	ae := toAPIError(err)
	s.noteError(ctx, ae)
	return &gen.ErrorStatusCode{StatusCode: ae.status(), Response: ae.body()}
}

// noteError logs server-side failures; client mistakes, and requests for endpoints the server
// runs without (501), only show in the request log line.
func (s *Server) noteError(ctx context.Context, ae *apiError) {
	if ae.status() >= 500 && ae.typ != errUnavailable && ae.typ != errNotSupported {
		s.logger.Error("request failed", "path", requestPath(ctx), "err", logMessage(ae))
	}
}

// logMessage is what the log says about ae: its message and, when it adds something, the cause.
func logMessage(ae *apiError) string {
	if ae.cause != nil && ae.cause.Error() != ae.message {
		return ae.message + ": " + ae.cause.Error()
	}
	return ae.message
}

// writeError writes e as a complete JSON error response.
func writeError(w http.ResponseWriter, e *apiError) {
	body := e.body()
	enc := jx.GetEncoder()
	defer jx.PutEncoder(enc)
	body.Encode(enc)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(e.status())
	_, _ = w.Write(enc.Bytes())
}

// notFound answers unknown paths exactly as llama-server does.
func notFound(w http.ResponseWriter, _ *http.Request) {
	writeError(w, &apiError{typ: errNotFound, message: "File Not Found"})
}

// methodNotAllowed answers a known path with the wrong method. llama-server answers 404 here;
// 405 with an Allow header says more, in the same error shape.
func methodNotAllowed(w http.ResponseWriter, r *http.Request, allowed string) {
	w.Header().Set("Allow", allowed)
	writeError(w, &apiError{typ: errInvalidRequest, code: http.StatusMethodNotAllowed,
		message: fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allowed)})
}
