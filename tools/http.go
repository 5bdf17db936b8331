package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/internal/apijson"
)

// maxRequestBytes bounds a POST /tools body (write_file's content travels in it).
const maxRequestBytes = 32 << 20

// Handler serves GET /tools (the set's tools) and POST /tools (run one: {"tool", "params",
// "stream"}), as llama-server's. The x-tool-cwd, x-tool-runtime and x-resp-type headers set the
// call's working directory, runtime and read_file's base64 answer; params cannot set them. A
// nil set answers 403: the feature is off.
func Handler(set *Set, logger *log.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if set == nil {
			apijson.Disabled(w)
			return
		}
		switch r.Method {
		case http.MethodGet:
			list := make([]map[string]any, 0, len(set.tools))
			for _, t := range set.All() {
				list = append(list, t.Info())
			}
			apijson.Write(w, http.StatusOK, list)
		case http.MethodPost:
			serveCall(w, r, set, logger)
		default:
			w.Header().Set("Allow", "GET, POST")
			apijson.Error(w, http.StatusMethodNotAllowed, "invalid_request_error", "method not allowed")
		}
	})
}

// callRequest is POST /tools' body.
type callRequest struct {
	Tool   *string        `json:"tool"`
	Params map[string]any `json:"params"`
	Stream bool           `json:"stream"`
}

func serveCall(w http.ResponseWriter, r *http.Request, set *Set, logger *log.Logger) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		apijson.Error(w, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("request body over %d bytes", maxRequestBytes))
		return
	}
	var req callRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // MCP tools get integers as sent
	if err := dec.Decode(&req); err != nil {
		apijson.Error(w, http.StatusBadRequest, "invalid_request_error", "invalid JSON body: "+err.Error())
		return
	}
	if req.Tool == nil {
		apijson.Error(w, http.StatusBadRequest, "invalid_request_error", `missing "tool": the name of the tool to run`)
		return
	}
	t := set.Lookup(*req.Tool)
	if t == nil {
		apijson.Error(w, http.StatusNotFound, "invalid_request_error", (&UnknownTool{Name: *req.Tool}).Error())
		return
	}
	if req.Stream && !t.Streams {
		apijson.Error(w, http.StatusNotFound, "invalid_request_error", fmt.Sprintf("tool %q does not support stream = true", t.Name))
		return
	}
	c := Call{Params: req.Params, Cwd: r.Header.Get("X-Tool-Cwd"), Runtime: r.Header.Get("X-Tool-Runtime"), Base64: r.Header.Get("X-Resp-Type") == "base64"}
	if c.Params == nil {
		c.Params = map[string]any{}
	}
	if req.Stream {
		streamCall(w, r.Context(), set, t.Name, c)
		return
	}
	res, err := set.Run(r.Context(), t.Name, c)
	if err != nil {
		status, typ := errorStatus(err)
		if status == http.StatusInternalServerError {
			logger.Warn("tool call failed", "tool", t.Name, "err", err)
		}
		apijson.Error(w, status, typ, err.Error())
		return
	}
	apijson.Write(w, http.StatusOK, res)
}

// streamCall runs a streaming tool, sending its output as `data: {"chunk": ...}` events and
// ending with `data: {"done": true}` (with "error" when it failed).
func streamCall(w http.ResponseWriter, ctx context.Context, set *Set, name string, c Call) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	send := func(v any) bool {
		mu.Lock()
		defer mu.Unlock()
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return ctx.Err() == nil
	}
	c.Chunk = func(s string) bool {
		if s == "" {
			return ctx.Err() == nil
		}
		return send(map[string]any{"chunk": s})
	}
	_, err := set.Run(ctx, name, c)
	done := map[string]any{"done": true}
	if err != nil {
		done["error"] = err.Error()
	}
	send(done)
}

// errorStatus is the status and error type of a failed call.
func errorStatus(err error) (int, string) {
	var bad *BadParams
	var unknown *UnknownTool
	switch {
	case errors.As(err, &bad):
		return http.StatusBadRequest, "invalid_request_error"
	case errors.As(err, &unknown):
		return http.StatusNotFound, "invalid_request_error"
	}
	return http.StatusInternalServerError, "server_error"
}
