package router

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/hf"
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

// progressEvents turns the download's progress output into download_progress events.
type progressEvents struct {
	r    *Router
	name string
}

func (p progressEvents) Write(b []byte) (int, error) {
	text := strings.TrimSpace(strings.Trim(string(b), "\r\n"))
	if text != "" {
		p.r.sse.send(Event{Model: p.name, Event: "download_progress", Data: map[string]any{"progress": text}})
	}
	return len(b), nil
}

// download answers POST /models {"model": "ORG/NAME[:QUANT]"}: the model is fetched into
// the Hugging Face cache in the background, listed as downloading meanwhile, with
// download_progress events and one download_finished event at the end (its data says
// whether it succeeded, and why not). The finished entry gives way to the rescanned cache.
func (r *Router) download(w http.ResponseWriter, req *http.Request) {
	name, _, err := modelOfBody(req)
	if err != nil {
		writeError(w, 400, errInvalidRequest, err.Error())
		return
	}
	if name == "" {
		writeError(w, 400, errInvalidRequest, "model must be a non-empty string")
		return
	}
	if _, _, err := hf.ParseRepo(name); err != nil {
		writeError(w, 400, errInvalidRequest, err.Error())
		return
	}
	if r.cfg.Catalog.CacheDir == "" {
		writeError(w, 400, errInvalidRequest, "no Hugging Face cache to download into")
		return
	}
	r.mu.Lock()
	if _, ok := r.models[name]; ok {
		r.mu.Unlock()
		writeError(w, 400, errInvalidRequest, fmt.Sprintf("model '%s' already exists", name))
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{model: &Model{Name: name, Source: SourceCache, Options: map[string]string{"hf-repo": name}}}
	r.models[name] = in
	r.downloads[name] = cancel
	r.setStatus(name, in, StatusDownloading)
	r.mu.Unlock()
	go func() {
		defer cancel()
		r.sse.send(Event{Model: name, Event: "download_progress", Data: map[string]any{"progress": "starting"}})
		_, err := hf.Resolve(ctx, name, hf.Options{CacheDir: r.cfg.Catalog.CacheDir, Offline: r.cfg.Offline,
			Progress: progressEvents{r, name}, Logger: r.logger})
		data := map[string]any{"success": err == nil}
		if err != nil {
			data["error"] = err.Error()
			r.logger.Warn("download failed", "model", name, "err", err)
		}
		r.mu.Lock()
		delete(r.downloads, name)
		in.status = StatusUnloaded
		r.rescan = true
		r.notify()
		r.mu.Unlock()
		r.sse.send(Event{Model: name, Event: "download_finished", Data: data})
	}()
	writeJSON(w, 200, map[string]any{"success": true})
}

// deleteModel answers DELETE /models?model=NAME: a cache model is unloaded and its
// repository removed from the cache. Models of other sources cannot be removed.
func (r *Router) deleteModel(w http.ResponseWriter, req *http.Request) {
	name := req.URL.Query().Get("model")
	if name == "" {
		writeError(w, 400, errInvalidRequest, "model must be a non-empty string")
		return
	}
	r.mu.Lock()
	in := r.models[name]
	switch {
	case in == nil:
		r.mu.Unlock()
		writeError(w, 404, errNotFound, fmt.Sprintf("model '%s' not found", name))
		return
	case in.model.Source != SourceCache:
		r.mu.Unlock()
		writeError(w, 400, errInvalidRequest, fmt.Sprintf("model '%s' is not removable (not from the cache)", name))
		return
	case in.status == StatusDownloading:
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
	repo, _, _ := hf.ParseRepo(name)
	removed, err := hf.RemoveFromCache(r.cfg.Catalog.CacheDir, repo)
	if err != nil {
		writeError(w, 500, errServer, err.Error())
		return
	}
	r.logger.Info("model removed", "model", name, "files_removed", removed)
	r.sse.send(Event{Model: name, Event: "model_remove"})
	writeJSON(w, 200, map[string]any{"success": true})
}
