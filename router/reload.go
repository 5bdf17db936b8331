package router

import (
	"fmt"
	"net/http"

	"github.com/wgpu-llama/wgpu-llama/hf"
	"github.com/wgpu-llama/wgpu-llama/internal/apijson"
)

// Reload rescans the sources: a running model whose source is gone or whose options
// changed is unloaded, models no longer found are dropped, new ones are added, and the
// others take their new options. /models/sse gets a models_reload event.
func (r *Router) Reload() error {
	found, err := r.cfg.Catalog.Scan()
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rescan = false
	for name, in := range r.models {
		if in.status == StatusDownloading {
			continue // not from a source: the download owns it
		}
		m, ok := found[name]
		switch {
		case in.running() && (!ok || !m.equal(in.model)):
			r.logger.Info("reload: unloading a model whose source changed", "model", name)
			r.stop(in)
			if ok {
				in.model = m
			}
		case !ok && !in.running():
			delete(r.models, name)
		case ok:
			in.model = m
		}
	}
	for name, m := range found {
		if _, ok := r.models[name]; !ok {
			r.models[name] = &instance{model: m, status: StatusUnloaded}
			if m.LoadOnStartup() {
				r.enqueue(name, true)
			}
		}
	}
	r.pump()
	r.sse.send(Event{Model: "*", Event: "models_reload"})
	r.notify()
	return nil
}

func (r *Router) needsRescan() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rescan
}

// deleteModel answers DELETE /models?model=NAME: a cache model is unloaded and its
// repository removed from the cache; a model being downloaded has its download cancelled
// instead (its child killed), the cache left as it is. Models of other sources cannot be
// removed.
func (r *Router) deleteModel(w http.ResponseWriter, req *http.Request) {
	name := req.URL.Query().Get("model")
	if name == "" {
		apijson.Error(w, 400, errInvalidRequest, "model must be a non-empty string")
		return
	}
	r.mu.Lock()
	in := r.models[name]
	cancelled := false
	switch {
	case in == nil:
		r.mu.Unlock()
		apijson.Error(w, 404, errNotFound, fmt.Sprintf("model '%s' not found", name))
		return
	case in.model.Source != SourceCache:
		r.mu.Unlock()
		apijson.Error(w, 400, errInvalidRequest, fmt.Sprintf("model '%s' is not removable (not from the cache)", name))
		return
	case in.status == StatusDownloading:
		cancelled = true
		r.downloads[name]()
	case in.running():
		r.stop(in)
	}
	for in.running() || in.status == StatusDownloading {
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-req.Context().Done():
			return
		}
		r.mu.Lock()
	}
	delete(r.models, name)
	r.mu.Unlock()
	if cancelled {
		// The repository's other files stay, and so does the partial download: the next
		// POST /models of the model continues it.
		r.logger.Info("download cancelled; its partial file stays for the next download", "model", name)
		r.sse.send(Event{Model: name, Event: "model_remove"})
		apijson.Write(w, 200, map[string]any{"success": true})
		return
	}
	repo, _, _ := hf.ParseRepo(name)
	removed, err := hf.RemoveFromCache(r.cfg.Catalog.CacheDir, repo)
	if err != nil {
		apijson.Error(w, 500, errServer, err.Error())
		return
	}
	r.logger.Info("model removed", "model", name, "files_removed", removed)
	r.sse.send(Event{Model: name, Event: "model_remove"})
	apijson.Write(w, 200, map[string]any{"success": true})
}
