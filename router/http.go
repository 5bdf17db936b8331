package router

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/corsproxy"
	"github.com/wgpu-llama/wgpu-llama/internal/apijson"
	"github.com/wgpu-llama/wgpu-llama/tools"
)

// Error types of llama-server's error bodies.
const (
	errInvalidRequest = "invalid_request_error"
	errNotFound       = "not_found_error"
	errAuth           = "authentication_error"
	errServer         = "server_error"
	errUnavailable    = "unavailable_error"
)

// writeError writes llama-server's error body {"error":{"code","message","type"}}.
// maxBody bounds the request bodies the router reads to find the model.
const maxBody = 32 << 20

// publicPaths answer without an API key, as in a single server.
var publicPaths = map[string]bool{"/health": true, "/v1/health": true, "/models": true, "/v1/models": true, "/api/tags": true, "/": true}

// Handler serves the router's endpoints and proxies everything else to the children.
func (r *Router) Handler() http.Handler {
	mux := http.NewServeMux()
	health := func(w http.ResponseWriter, _ *http.Request) { apijson.Write(w, 200, map[string]string{"status": "ok"}) }
	mux.HandleFunc("GET /health", health)
	mux.HandleFunc("GET /v1/health", health)
	mux.HandleFunc("GET /models", r.listModels)
	mux.HandleFunc("GET /v1/models", r.listModels)
	mux.HandleFunc("POST /models", r.download)
	mux.HandleFunc("DELETE /models", r.deleteModel)
	mux.HandleFunc("GET /models/sse", r.serveSSE)
	mux.HandleFunc("POST /models/load", r.loadModel)
	mux.HandleFunc("POST /models/unload", r.unloadModel)
	mux.HandleFunc("GET /props", r.props)
	mux.HandleFunc("GET /metrics", r.metrics)
	mux.HandleFunc("GET /v1/stream/{id}", r.proxyStream)
	mux.HandleFunc("DELETE /v1/stream/{id}", r.proxyStream)
	mux.HandleFunc("POST /v1/streams/lookup", r.lookupStreams)
	mux.Handle("/tools", tools.Handler(r.cfg.Tools, r.logger))
	mux.Handle("/cors-proxy", corsproxy.Handler(r.cfg.CORSProxy))
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, _ *http.Request) { apijson.Disabled(w) }) // one model's, not a router's
	mux.HandleFunc("/", r.proxyByModel)
	// The web UI's files before the API key check, as a single server serves them.
	return r.ui.Wrap(r.requireKey(mux))
}

// requireKey answers 401 to requests for non-public paths without one of the API keys.
func (r *Router) requireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if len(r.cfg.APIKeys) == 0 || publicPaths[req.URL.Path] || req.Method == http.MethodOptions {
			next.ServeHTTP(w, req)
			return
		}
		key := req.Header.Get("Authorization")
		if key == "" {
			key = req.Header.Get("X-Api-Key")
		}
		key = strings.TrimPrefix(key, "Bearer ")
		match := 0
		for _, k := range r.cfg.APIKeys {
			if k != "" {
				match |= subtle.ConstantTimeCompare([]byte(k), []byte(key))
			}
		}
		if match != 1 {
			apijson.Error(w, http.StatusUnauthorized, errAuth, "Invalid API Key")
			return
		}
		next.ServeHTTP(w, req)
	})
}

// props answers GET /props: the router's own properties, or with ?model= the model's.
func (r *Router) props(w http.ResponseWriter, req *http.Request) {
	if req.URL.Query().Get("model") != "" {
		r.proxyByModel(w, req)
		return
	}
	props := map[string]any{
		"role":            "router",
		"max_instances":   r.cfg.MaxModels,
		"models_autoload": r.cfg.Autoload,
		"model_alias":     "llama-server",
		"model_path":      "none",
		"default_generation_settings": map[string]any{
			"params": map[string]any{},
			"n_ctx":  0,
		},
		"build_info": r.cfg.BuildInfo,
	}
	if r.cfg.Tools != nil {
		props["endpoint_tools"] = true // our extension, present only when on
	}
	apijson.Write(w, 200, props)
}

// modelJSON is one entry of GET /models, in llama-server's router shape.
func (r *Router) modelJSON(name string, in *instance, created int64) map[string]any {
	status := map[string]any{"value": in.status, "args": append(in.model.Args(), r.cfg.Inherited...)}
	if in.failed {
		status["exit_code"] = in.exitCode
		status["failed"] = true
	}
	if in.progress != nil && in.status == StatusLoading {
		status["progress"] = *in.progress
	}
	return map[string]any{
		"id":       name,
		"aliases":  []string{},
		"tags":     []string{},
		"object":   "model",
		"owned_by": "llamacpp",
		"created":  created,
		"status":   status,
		"architecture": map[string]any{
			"input_modalities":  []string{"text"},
			"output_modalities": []string{"text"},
		},
		"source":     in.model.Source,
		"can_remove": in.model.Source == SourceCache,
	}
}

// listModels answers GET /models and /v1/models: every known model with its status;
// ?reload=1 rescans the sources first.
func (r *Router) listModels(w http.ResponseWriter, req *http.Request) {
	if req.URL.Query().Get("reload") != "" || r.needsRescan() {
		if err := r.Reload(); err != nil {
			apijson.Error(w, 500, errServer, err.Error())
			return
		}
	}
	r.mu.Lock()
	names := make([]string, 0, len(r.models))
	for n := range r.models {
		names = append(names, n)
	}
	sort.Strings(names)
	now := time.Now().Unix()
	data := make([]map[string]any, 0, len(names))
	for _, n := range names {
		if !r.models[n].model.Hidden {
			data = append(data, r.modelJSON(n, r.models[n], now))
		}
	}
	r.mu.Unlock()
	apijson.Write(w, 200, map[string]any{"data": data, "object": "list"})
}

// modelOfBody reads a JSON body's "model" field.
func modelOfBody(req *http.Request) (string, []byte, error) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxBody+1))
	if err != nil {
		return "", nil, fmt.Errorf("reading the request body: %w", err)
	}
	if len(body) > maxBody {
		return "", nil, fmt.Errorf("request body larger than %d bytes", maxBody)
	}
	var v struct {
		Model any `json:"model"`
	}
	if len(body) > 0 && strings.Contains(req.Header.Get("Content-Type"), "multipart/") {
		return req.FormValue("model"), body, nil
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &v); err != nil {
			return "", nil, fmt.Errorf("request body is not valid JSON: %w", err)
		}
	}
	if v.Model == nil {
		return "", body, nil
	}
	s, ok := v.Model.(string)
	if !ok {
		return "", nil, errors.New("'model' must be a string")
	}
	return s, body, nil
}

// loadModel answers POST /models/load {"model": NAME}: it queues the load and answers at once.
func (r *Router) loadModel(w http.ResponseWriter, req *http.Request) {
	name, _, err := modelOfBody(req)
	if err != nil {
		apijson.Error(w, 400, errInvalidRequest, err.Error())
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.models[name]
	switch {
	case in == nil:
		apijson.Error(w, 404, errNotFound, "model is not found")
	case in.running() && !in.stopping:
		apijson.Error(w, 400, errInvalidRequest, "model is already running")
	case in.status == StatusDownloading:
		apijson.Error(w, 400, errInvalidRequest, "model is still downloading")
	default:
		r.enqueue(name, true)
		r.pump()
		apijson.Write(w, 200, map[string]any{"success": true})
	}
}

// unloadModel answers POST /models/unload {"model": NAME}: the child is asked to exit.
func (r *Router) unloadModel(w http.ResponseWriter, req *http.Request) {
	name, _, err := modelOfBody(req)
	if err != nil {
		apijson.Error(w, 400, errInvalidRequest, err.Error())
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.models[name]
	switch {
	case in == nil:
		apijson.Error(w, 400, errInvalidRequest, "model is not found")
	case in.status == StatusDownloading:
		r.downloads[name]()
		apijson.Write(w, 200, map[string]any{"success": true})
	case !in.running():
		apijson.Error(w, 400, errInvalidRequest, "model is not running")
	default:
		for i, q := range r.queue {
			if q.name == name {
				r.queue = append(r.queue[:i], r.queue[i+1:]...)
				break
			}
		}
		r.stop(in)
		apijson.Write(w, 200, map[string]any{"success": true})
	}
}

// autoload is the request's ?autoload= when given, else the router's setting.
func (r *Router) autoload(req *http.Request) bool {
	switch req.URL.Query().Get("autoload") {
	case "":
		return r.cfg.Autoload
	case "1", "true":
		return true
	}
	return false
}
