package server

import (
	"context"
	"net/http"
)

// SleepBackend is a Backend that frees its model when idle and loads it again on demand
// (llama-server's --sleep-idle-seconds); the engine satisfies it.
type SleepBackend interface {
	// Sleeping reports whether the model is freed.
	Sleeping() bool
	// Wake loads the model again if it is freed, returning once it is loaded.
	Wake(ctx context.Context) error
}

// readOnlyOperations answer without the model, so a sleeping server answers them as it is (as
// llama-server's routes made with bypass_sleep: health, models, GET /props and /metrics), and
// so do the resumable stream routes, which only read what is already generated. Every other
// route wakes it first.
var readOnlyOperations = map[string]bool{
	"getHealth": true, "getHealthAlias": true,
	"listModels": true, "listModelsAlias": true, "listModelsOllamaAlias": true,
	"getProps": true, "getMetrics": true,
	"getStream": true, "getStreamByQuery": true, "deleteStream": true, "deleteStreamByQuery": true, "lookupStreams": true,
}

// sleeping reports whether the loaded backend has freed its model.
func (m *loaded) sleeping() bool {
	sb, ok := m.backend.(SleepBackend)
	return ok && sb.Sleeping()
}

// wakeBackend makes a sleeping backend load its model before any route that needs it runs, so
// that the request waits for the load rather than failing; read-only routes and paths no route
// serves leave it asleep. A model that cannot be loaded again answers 500 with the reason.
func (s *Server) wakeBackend(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := s.model()
		if m == nil || !m.sleeping() {
			next.ServeHTTP(w, r)
			return
		}
		if route, ok := s.api.FindRoute(r.Method, r.URL.Path); !ok || readOnlyOperations[route.OperationID()] {
			next.ServeHTTP(w, r)
			return
		}
		if err := m.backend.(SleepBackend).Wake(r.Context()); err != nil {
			if r.Context().Err() != nil {
				return // the client left while the model loaded
			}
			writeError(w, &apiError{typ: errServer, message: "the model could not be loaded again after sleeping: " + err.Error(), cause: err})
			return
		}
		next.ServeHTTP(w, r)
	})
}
