package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/go-faster/jx"
)

// Vertex is Google Cloud Vertex AI's custom-container protocol, as llama-server serves it when
// AIP_MODE=PREDICTION: a predict route running a batch of instances, each a request to one of
// the server's own routes, and optionally a second health route.
// https://cloud.google.com/vertex-ai/docs/predictions/custom-container-requirements
type Vertex struct {
	// HealthRoute, when set, answers GET as /health (AIP_HEALTH_ROUTE).
	HealthRoute string
	// PredictRoute answers POST {"instances":[...]} with {"predictions":[...]} (AIP_PREDICT_ROUTE).
	PredictRoute string
	// Port is the port to listen on (AIP_HTTP_PORT), which replaces --port.
	Port int
}

// VertexFromEnv reads llama-server's AIP_* variables: nil unless AIP_MODE is PREDICTION; then
// AIP_HEALTH_ROUTE (none by default), AIP_PREDICT_ROUTE (default /predict), both given a leading
// slash when they lack one, and AIP_HTTP_PORT (default 8080). An empty variable counts as unset.
func VertexFromEnv(getenv func(string) string) (*Vertex, error) {
	if getenv("AIP_MODE") != "PREDICTION" {
		return nil, nil
	}
	route := func(name, def string) string {
		v := getenv(name)
		if v == "" {
			return def
		}
		if !strings.HasPrefix(v, "/") {
			v = "/" + v
		}
		return v
	}
	v := &Vertex{HealthRoute: route("AIP_HEALTH_ROUTE", ""), PredictRoute: route("AIP_PREDICT_ROUTE", "/predict"), Port: 8080}
	if p := getenv("AIP_HTTP_PORT"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("AIP_HTTP_PORT=%q is not a port number", p)
		}
		v.Port = n
	}
	return v, nil
}

// maxInstances bounds a predict request's instances, as llama-server.
const maxInstances = 128

// ServeVertex adds the Vertex AI routes to the server's routes; call it before Handler. A
// predict route that is already one of the server's routes is refused, as llama-server exits
// on it.
func (s *Server) ServeVertex(v Vertex) error {
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		if r, ok := s.api.FindRoute(method, v.PredictRoute); ok && r.PathPattern() == v.PredictRoute {
			return fmt.Errorf("AIP_PREDICT_ROUTE=%s conflicts with an existing route", v.PredictRoute)
		}
	}
	s.vertex = &v
	s.vertexFormats = s.predictFormats()
	s.logger.Info("Google Cloud Vertex AI compat", "health_route", v.HealthRoute, "predict_route", v.PredictRoute)
	return nil
}

// routes is the generated router, behind the Vertex AI routes when they are served.
func (s *Server) routes() http.Handler {
	v := s.vertex
	if v == nil {
		return s.api
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == v.PredictRoute && r.Method == http.MethodPost:
			s.predict(w, r)
		case v.HealthRoute != "" && r.URL.Path == v.HealthRoute && r.Method == http.MethodGet:
			r2 := r.Clone(r.Context())
			r2.URL.Path, r2.URL.RawPath = "/health", ""
			s.api.ServeHTTP(w, r2)
		default:
			s.api.ServeHTTP(w, r)
		}
	})
}

// predictRoutes are llama-server's routes in the order it registers them, each with the method
// of its first registration (the handler a predict instance reaches).
var predictRoutes = []struct{ method, path string }{
	{"GET", "/health"}, {"GET", "/v1/health"}, {"GET", "/metrics"}, {"GET", "/props"},
	{"POST", "/api/show"}, {"GET", "/models"}, {"GET", "/v1/models"}, {"GET", "/api/tags"},
	{"POST", "/completion"}, {"POST", "/completions"}, {"POST", "/v1/completions"},
	{"POST", "/chat/completions"}, {"POST", "/v1/chat/completions"}, {"POST", "/api/chat"},
	{"POST", "/responses"}, {"POST", "/v1/responses"},
	{"POST", "/v1/messages"}, {"POST", "/v1/messages/count_tokens"}, {"POST", "/infill"},
	{"POST", "/embedding"}, {"POST", "/embeddings"}, {"POST", "/v1/embeddings"},
	{"POST", "/rerank"}, {"POST", "/reranking"}, {"POST", "/v1/rerank"}, {"POST", "/v1/reranking"},
	{"POST", "/tokenize"}, {"POST", "/detokenize"}, {"POST", "/apply-template"},
	{"GET", "/lora-adapters"}, {"GET", "/slots"},
}

// predictTarget is where a predict instance goes.
type predictTarget struct{ method, path string }

// predictFormats maps each @requestFormat a predict instance may name to its route: the
// camelCase alias of every route served (the first route registered wins an alias) and the
// route's path itself.
func (s *Server) predictFormats() map[string]predictTarget {
	formats := map[string]predictTarget{}
	for _, r := range predictRoutes {
		if _, ok := s.api.FindRoute(r.method, r.path); !ok {
			continue
		}
		t := predictTarget{r.method, r.path}
		if _, ok := formats[r.path]; !ok {
			formats[r.path] = t
		}
		if alias := vertexAlias(r.path); alias != "" {
			if _, ok := formats[alias]; !ok {
				formats[alias] = t
			}
		}
	}
	return formats
}

// vertexAlias is a path's camelCase @requestFormat, as llama-server derives it: without a
// leading /v1 and slash, each letter after '/', '-' or '_' capitalised ("/v1/chat/completions"
// is "chatCompletions", "/apply-template" "applyTemplate").
func vertexAlias(path string) string {
	path = strings.TrimPrefix(path, "/v1")
	path = strings.TrimPrefix(path, "/")
	var sb strings.Builder
	up := false
	for _, c := range path {
		switch c {
		case '/', '-', '_':
			up = true
			continue
		}
		if up {
			c = unicode.ToUpper(c)
		}
		sb.WriteRune(c)
		up = false
	}
	return sb.String()
}

// predict answers a Vertex AI predict request: every instance, an object whose @requestFormat
// names a route (its alias or path), runs at once as that route's request with the other fields
// as its body (streaming turned off); predictions are the routes' JSON answers in instance
// order, errors included, and the predict request itself fails only when it is malformed.
func (s *Server) predict(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, &apiError{typ: errRequestTooLarge, message: fmt.Sprintf("request body exceeds %d bytes", tooLarge.Limit)})
			return
		}
		writeError(w, invalidRequest("reading the request body: %v", err))
		return
	}
	instances, ae := predictInstances(body)
	if ae != nil {
		writeError(w, ae)
		return
	}
	predictions := make([]jx.Raw, len(instances))
	var wg sync.WaitGroup
	for i, inst := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			predictions[i] = s.predictOne(r, inst)
		}()
	}
	wg.Wait()

	e := jx.GetEncoder()
	defer jx.PutEncoder(e)
	e.ObjStart()
	e.FieldStart("predictions")
	e.ArrStart()
	for _, p := range predictions {
		e.Raw(p)
	}
	e.ArrEnd()
	e.ObjEnd()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(e.Bytes())
}

// predictInstances checks a predict body and returns its instances.
func predictInstances(body []byte) ([]jx.Raw, *apiError) {
	if !json.Valid(body) {
		var v any
		err := json.Unmarshal(body, &v)
		return nil, invalidRequest("invalid JSON in the request body: %v", err)
	}
	if jx.DecodeBytes(body).Next() != jx.Object {
		return nil, invalidRequest("request body must be a JSON object")
	}
	var instances []jx.Raw
	found := false
	err := jx.DecodeBytes(body).Obj(func(d *jx.Decoder, key string) error {
		if key != "instances" || d.Next() != jx.Array {
			return d.Skip()
		}
		found, instances = true, instances[:0]
		return d.Arr(func(d *jx.Decoder) error {
			raw, err := d.Raw()
			instances = append(instances, raw)
			return err
		})
	})
	switch {
	case err != nil:
		return nil, invalidRequest("invalid JSON in the request body: %v", err)
	case !found:
		return nil, invalidRequest("request body must include an array field named instances")
	case len(instances) > maxInstances:
		return nil, invalidRequest("instances array exceeds maximum size of %d", maxInstances)
	}
	return instances, nil
}

// predictOne runs one instance and returns its prediction.
func (s *Server) predictOne(r *http.Request, inst jx.Raw) jx.Raw {
	if inst.Type() != jx.Object {
		return predictError(invalidRequest("each instance must be a JSON object"))
	}
	format, payload, streamed, err := instancePayload(inst)
	if err != nil {
		return predictError(invalidRequest("%v", err))
	}
	if format == "" {
		return predictError(invalidRequest("each instance must include a string @requestFormat"))
	}
	if streamed {
		s.logger.Warn("ignoring client-provided stream field in instance, streaming is not supported in predict route")
	}
	target, ok := s.vertexFormats[format]
	if !ok {
		return predictError(invalidRequest("no handler registered for @requestFormat: %s", format))
	}
	req, err := http.NewRequestWithContext(r.Context(), target.method, target.path, bytes.NewReader(payload))
	if err != nil {
		return predictError(&apiError{typ: errServer, message: err.Error()})
	}
	for k, vs := range r.Header {
		if k != "Content-Length" {
			req.Header[k] = vs
		}
	}
	req.Header.Set("Content-Type", "application/json")
	rec := newBufferedResponse()
	s.api.ServeHTTP(rec, req)
	if strings.HasPrefix(rec.header.Get("Content-Type"), "text/event-stream") {
		return predictError(invalidRequest("predict route does not support streaming responses"))
	}
	out := bytes.TrimSpace(rec.body.Bytes())
	switch {
	case len(out) == 0:
		return jx.Raw("null")
	case json.Valid(out):
		return jx.Raw(out)
	}
	e := jx.GetEncoder()
	defer jx.PutEncoder(e)
	e.Str(rec.body.String()) // not JSON: the text as a string, as llama-server
	return append(jx.Raw(nil), e.Bytes()...)
}

// instancePayload splits an instance into its @requestFormat (empty when missing or not a
// string) and the request body it stands for: its other fields, in order, with any stream
// field set to false (streamed reports there was one).
func instancePayload(inst jx.Raw) (format string, payload []byte, streamed bool, err error) {
	e := &jx.Encoder{}
	e.ObjStart()
	err = jx.DecodeBytes(inst).ObjBytes(func(d *jx.Decoder, key []byte) error {
		switch string(key) {
		case "@requestFormat":
			if d.Next() == jx.String {
				s, err := d.Str()
				format = s
				return err
			}
			return d.Skip()
		case "stream":
			streamed = true
			e.FieldStart("stream")
			e.Bool(false)
			return d.Skip()
		}
		raw, err := d.Raw()
		if err != nil {
			return err
		}
		e.FieldStart(string(key))
		e.Raw(raw)
		return nil
	})
	e.ObjEnd()
	return format, e.Bytes(), streamed, err
}

// predictError is a prediction reporting an error: {"error":{"code","message","type"}}.
func predictError(ae *apiError) jx.Raw {
	body := ae.body()
	e := &jx.Encoder{}
	body.Encode(e)
	return e.Bytes()
}

// bufferedResponse collects an internal request's answer.
type bufferedResponse struct {
	header http.Header
	body   bytes.Buffer
	status int
}

func newBufferedResponse() *bufferedResponse { return &bufferedResponse{header: http.Header{}} }

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

// Flush is a no-op: the answer is read whole.
func (b *bufferedResponse) Flush() {}
