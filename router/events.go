package router

import (
	"encoding/json"
	"net/http"
	"sync"
)

// Event is one GET /models/sse event, as llama-server names them: status_change,
// download_progress, download_finished, model_remove, models_reload.
type Event struct {
	Model string `json:"model"`
	Event string `json:"event"`
	Data  any    `json:"data,omitempty"`
}

// broadcaster fans events out to the /models/sse subscribers. A subscriber too slow to
// take an event loses it rather than holding the router up.
type broadcaster struct {
	mu     sync.Mutex
	subs   map[chan Event]struct{}
	closed bool
}

func newBroadcaster() *broadcaster { return &broadcaster{subs: map[chan Event]struct{}{}} }

func (b *broadcaster) subscribe() chan Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan Event, 64)
	if b.closed {
		close(ch)
		return ch
	}
	b.subs[ch] = struct{}{}
	return ch
}

func (b *broadcaster) unsubscribe(ch chan Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[ch]; ok {
		delete(b.subs, ch)
		close(ch)
	}
}

func (b *broadcaster) send(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

func (b *broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for ch := range b.subs {
		delete(b.subs, ch)
		close(ch)
	}
}

// serveSSE streams events as `data: {json}` lines until the client leaves or the router closes.
func (r *Router) serveSSE(w http.ResponseWriter, req *http.Request) {
	ch := r.sse.subscribe()
	defer r.sse.unsubscribe(ch)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	for {
		select {
		case <-req.Context().Done():
			return
		case e, ok := <-ch:
			if !ok {
				return
			}
			b, _ := json.Marshal(e)
			if _, err := w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}
