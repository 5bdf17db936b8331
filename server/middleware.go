package server

import (
	"context"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/wgpu-llama/wgpu-llama/server/static"
)

// middleware wraps a handler; chain applies them so the first listed runs first.
type middleware func(http.Handler) http.Handler

func chain(h http.Handler, ms ...middleware) http.Handler {
	for i := len(ms) - 1; i >= 0; i-- {
		h = ms[i](h)
	}
	return h
}

// requestStats collects what a handler wants in the request's log line; logRequests puts one in
// every request's context. A resumable stream's generation outlives its request when the client
// leaves (streams.go): its tokens, noted after the request's line was written, get a line of
// their own.
type requestStats struct {
	server       *Server
	method, path string
	conversation string // X-Conversation-Id, set for resumable streams
	start        time.Time

	mu                sync.Mutex
	logged            bool // the request's line is written
	status            int
	prompt, predicted int
}

type statsKey struct{}

func statsFrom(ctx context.Context) *requestStats {
	st, _ := ctx.Value(statsKey{}).(*requestStats)
	return st
}

// noteTokens records a request's token counts for its log line, or logs them at once when that
// line is already written (a detached generation that finished after its client left).
func noteTokens(ctx context.Context, prompt, predicted int) {
	st := statsFrom(ctx)
	if st == nil {
		return
	}
	st.mu.Lock()
	st.prompt, st.predicted = prompt, predicted
	logged, status := st.logged, st.status
	st.mu.Unlock()
	if logged {
		st.server.logger.Info("detached generation finished",
			"method", st.method,
			"path", st.path,
			"conversation", st.conversation,
			"status", status,
			"duration", time.Since(st.start).Round(time.Microsecond),
			"prompt_tokens", prompt,
			"predicted_tokens", predicted,
		)
	}
}

// requestPath is the path of the request ctx belongs to, for log lines.
func requestPath(ctx context.Context) string {
	if st := statsFrom(ctx); st != nil {
		return st.path
	}
	return ""
}

// statusRecorder remembers the status written through it. Unwrap lets
// http.NewResponseController reach the underlying writer's Flush.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	// Every 503 (loading, a full queue, shutting down) is a "try again soon".
	if code == http.StatusServiceUnavailable && r.Header().Get("Retry-After") == "" {
		r.Header().Set("Retry-After", "1")
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// polledPaths are requested regularly by monitors; llama-server leaves them out of its request
// log, and they log at debug level here when they succeed.
var polledPaths = map[string]bool{
	"/health": true, "/v1/health": true, "/models": true, "/v1/models": true, "/props": true, "/metrics": true,
	"/api/tags": true,
}

// logRequests logs one line per request: method, path, status, duration and, for requests
// that ran the model, prompt and predicted token counts; it also counts the request for
// /metrics. Successful polls (polledPaths) log at debug level so that monitoring does not flood
// the log. A resumable stream whose client left logs its tokens when it ends (noteTokens).
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &requestStats{server: s, method: r.Method, path: r.URL.Path, conversation: r.Header.Get("X-Conversation-Id"), start: time.Now()}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), statsKey{}, st)))
		s.countRequest(s.routeLabel(r), rec.status) // 0: the client left before any answer

		st.mu.Lock()
		st.logged, st.status = true, rec.status
		prompt, predicted := st.prompt, st.predicted
		st.mu.Unlock()
		kv := []any{
			"method", r.Method,
			"path", r.URL.Path,
			"status", rec.status,
			"duration", time.Since(st.start).Round(time.Microsecond),
		}
		if prompt > 0 {
			kv = append(kv, "prompt_tokens", prompt, "predicted_tokens", predicted)
		}
		if st.conversation != "" {
			kv = append(kv, "conversation", st.conversation)
		}
		if polledPaths[r.URL.Path] && rec.status == http.StatusOK {
			s.logger.Debug("request", kv...)
			return
		}
		s.logger.Info("request", kv...)
	})
}

// requireBackend answers 503 "Loading model" on every route (health included) until SetBackend;
// with a web UI, "/" and .html pages answer 503 with a page that opens the app once the model
// is ready, as llama-server's loading.html.
func (s *Server) requireBackend(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.model() == nil {
			if s.ui != nil && (r.URL.Path == "/" || strings.HasSuffix(r.URL.Path, ".html")) {
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				w.Header().Set("Cache-Control", "no-store")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write(static.LoadingPage)
				return
			}
			writeError(w, errLoading)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveUI answers GET and HEAD of the web UI's files (Config.UI) before the API key check,
// which they do not need (static.Handler.Wrap).
func (s *Server) serveUI(next http.Handler) http.Handler { return s.ui.Wrap(next) }

// writeDeadlines gives each write of a response Config.WriteTimeout to complete, as a socket
// send timeout does in llama-server. http.Server's WriteTimeout would instead bound the whole
// response, cutting streams and long generations.
func (s *Server) writeDeadlines(next http.Handler) http.Handler {
	if s.cfg.WriteTimeout <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}, r)
	})
}

// deadlineWriter moves the connection's write deadline forward before each write.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (d *deadlineWriter) extend() { _ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout)) }

func (d *deadlineWriter) WriteHeader(code int) {
	d.extend()
	d.ResponseWriter.WriteHeader(code)
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	d.extend()
	return d.ResponseWriter.Write(b)
}

// Flush sends what is buffered within a fresh deadline.
func (d *deadlineWriter) Flush() {
	d.extend()
	_ = http.NewResponseController(d.ResponseWriter).Flush()
}

func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// limitBody caps request bodies at Config.MaxBodyBytes; reading past it fails with
// *http.MaxBytesError, which decodeError turns into 413.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		}
		next.ServeHTTP(w, r)
	})
}

// jsonBody labels request bodies as JSON. llama-server parses every body as JSON whatever its
// Content-Type (so `curl -d '{...}'`, which sends application/x-www-form-urlencoded, works),
// while the generated decoders dispatch on Content-Type.
func jsonBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				r.Header.Set("Content-Type", "application/json")
			}
		}
		next.ServeHTTP(w, r)
	})
}
