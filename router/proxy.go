package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/internal/apijson"
)

// hopHeaders are connection-level headers a proxy does not forward.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// proxyClient talks to the children: no timeout, as a generation may stream for long.
var proxyClient = &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16}}

// proxyByModel proxies a request to the child of the model it names: the JSON body's
// "model" for POST and other methods with a body, ?model= for GET. The model is loaded
// first when autoload allows, and waits in the queue when --models-max is reached.
func (r *Router) proxyByModel(w http.ResponseWriter, req *http.Request) {
	var name string
	var body []byte
	if req.Method == http.MethodGet || req.Method == http.MethodHead || req.Method == http.MethodDelete {
		name = req.URL.Query().Get("model")
	} else {
		var err error
		if name, body, err = modelOfBody(req); err != nil {
			apijson.Error(w, 400, errInvalidRequest, err.Error())
			return
		}
	}
	if name == "" {
		apijson.Error(w, 400, errInvalidRequest, "model name is missing from the request")
		return
	}
	r.mu.Lock()
	_, known := r.models[name]
	r.mu.Unlock()
	if !known {
		apijson.Error(w, 400, errInvalidRequest, fmt.Sprintf("model '%s' not found", name))
		return
	}
	in, err := r.acquire(req.Context(), name, r.autoload(req))
	if err != nil {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return // the client left
		case errors.Is(err, errNotLoaded):
			apijson.Error(w, 400, errInvalidRequest, err.Error())
		default:
			apijson.Error(w, 503, errUnavailable, err.Error())
		}
		return
	}
	defer r.release(in)
	if r.cfg.FakeTiming {
		select { // the model is busy meanwhile
		case <-time.After(fakeDelay):
		case <-req.Context().Done():
			return
		}
	}
	if conv := req.Header.Get("X-Conversation-Id"); conv != "" && req.Method == http.MethodPost {
		r.mu.Lock()
		r.convs[conv] = name
		r.mu.Unlock()
	}
	r.forward(w, req, in, body)
}

// forward sends req to the instance's child and copies the answer back, flushing every
// chunk so that streams reach the client as they are made. A child that dies mid-stream
// ends an event stream with an error event.
func (r *Router) forward(w http.ResponseWriter, req *http.Request, in *instance, body []byte) {
	r.mu.Lock()
	c := in.child
	r.mu.Unlock()
	if c == nil {
		apijson.Error(w, 503, errUnavailable, "model is not running")
		return
	}
	u := *req.URL
	u.Scheme, u.Host = "http", "127.0.0.1:"+strconv.Itoa(c.port)
	var rd io.Reader = req.Body
	if body != nil {
		rd = bytes.NewReader(body)
	}
	out, err := http.NewRequestWithContext(req.Context(), req.Method, u.String(), rd)
	if err != nil {
		apijson.Error(w, 500, errServer, err.Error())
		return
	}
	out.Header = req.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	if body != nil {
		out.ContentLength = int64(len(body))
	}
	resp, err := proxyClient.Do(out)
	if err != nil {
		if req.Context().Err() == nil {
			apijson.Error(w, 502, errServer, fmt.Sprintf("model '%s' did not answer: %v", c.name, err))
		}
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			if req.Context().Err() == nil {
				r.logger.Warn("model's answer broke off", "model", c.name, "err", err)
				if isEventStream(resp.Header) {
					msg, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 500, "type": errServer,
						"message": fmt.Sprintf("model '%s' stopped answering: %v", c.name, err)}})
					w.Write(append(append([]byte("data: "), msg...), '\n', '\n'))
					if flusher != nil {
						flusher.Flush()
					}
				}
			}
			return
		}
	}
}

func isEventStream(h http.Header) bool {
	return bytes.HasPrefix([]byte(h.Get("Content-Type")), []byte("text/event-stream"))
}

// proxyStream routes GET and DELETE /v1/stream/{id} to the child that runs the conversation:
// the one its chat request went to, else the model named after "::" in the id.
func (r *Router) proxyStream(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	r.mu.Lock()
	name, ok := r.convs[id]
	if i := strings.LastIndex(id, "::"); !ok && i >= 0 {
		// the web UI names the model after "::" in the conversation id
		name, ok = id[i+2:], true
	}
	var in *instance
	if ok {
		in = r.models[name]
	}
	if in != nil && in.child != nil {
		in.inflight++
	}
	r.mu.Unlock()
	if in == nil || in.child == nil {
		apijson.Error(w, 404, errNotFound, fmt.Sprintf("no stream for conversation '%s'", id))
		return
	}
	defer r.release(in)
	if req.Method == http.MethodDelete {
		defer func() {
			r.mu.Lock()
			delete(r.convs, id)
			r.mu.Unlock()
		}()
	}
	r.forward(w, req, in, nil)
}

// lookupStreams answers POST /v1/streams/lookup by asking every running child and merging
// their answers: llama-server's array of sessions, or our {"streams":[...]}.
func (r *Router) lookupStreams(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxBody))
	if err != nil {
		apijson.Error(w, 400, errInvalidRequest, err.Error())
		return
	}
	r.mu.Lock()
	var ports []int
	for _, in := range r.models {
		if in.child != nil && in.status == StatusLoaded {
			ports = append(ports, in.child.port)
		}
	}
	r.mu.Unlock()
	var sessions []json.RawMessage
	var streams []json.RawMessage
	isArray := bytes.Contains(body, []byte(`"conversation_ids"`))
	for _, port := range ports {
		resp, err := proxyClient.Post("http://127.0.0.1:"+strconv.Itoa(port)+"/v1/streams/lookup", "application/json", bytes.NewReader(body))
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(resp.StatusCode)
			w.Write(b) // a bad request is bad for every child alike
			return
		}
		if isArray {
			var part []json.RawMessage
			json.Unmarshal(b, &part)
			sessions = append(sessions, part...)
		} else {
			var part struct {
				Streams []json.RawMessage `json:"streams"`
			}
			json.Unmarshal(b, &part)
			streams = append(streams, part.Streams...)
		}
	}
	if isArray {
		if sessions == nil {
			sessions = []json.RawMessage{}
		}
		apijson.Write(w, 200, sessions)
		return
	}
	if streams == nil {
		streams = []json.RawMessage{}
	}
	apijson.Write(w, 200, map[string]any{"streams": streams})
}
