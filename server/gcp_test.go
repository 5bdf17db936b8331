package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestVertexFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, tt := range []struct {
		env  map[string]string
		want *Vertex
		err  string
	}{
		{env: map[string]string{}, want: nil},
		{env: map[string]string{"AIP_MODE": "TRAINING", "AIP_HTTP_PORT": "9"}, want: nil},
		{env: map[string]string{"AIP_MODE": "PREDICTION"}, want: &Vertex{PredictRoute: "/predict", Port: 8080}},
		{env: map[string]string{"AIP_MODE": "PREDICTION", "AIP_HEALTH_ROUTE": "healthz", "AIP_PREDICT_ROUTE": "/v2/run", "AIP_HTTP_PORT": "9000"},
			want: &Vertex{HealthRoute: "/healthz", PredictRoute: "/v2/run", Port: 9000}},
		{env: map[string]string{"AIP_MODE": "PREDICTION", "AIP_PREDICT_ROUTE": "", "AIP_HTTP_PORT": ""}, want: &Vertex{PredictRoute: "/predict", Port: 8080}},
		{env: map[string]string{"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": "http"}, err: `AIP_HTTP_PORT="http" is not a port number`},
	} {
		got, err := VertexFromEnv(env(tt.env))
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%v: error %v, want %q", tt.env, err, tt.err)
			}
			continue
		}
		if err != nil || (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
			t.Errorf("%v: %+v, %v; want %+v", tt.env, got, err, tt.want)
		}
	}
}

func TestVertexAlias(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/chat/completions":      "chatCompletions",
		"/chat/completions":         "chatCompletions",
		"/apply-template":           "applyTemplate",
		"/v1/messages/count_tokens": "messagesCountTokens",
		"/completion":               "completion",
		"/slots/:id_slot":           "slots:idSlot",
		"/api/tags":                 "apiTags",
	} {
		if got := vertexAlias(path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

func TestServeVertexConflict(t *testing.T) {
	h := newHarness(t)
	for _, route := range []string{"/health", "/v1/chat/completions", "/slots"} {
		if err := h.srv.ServeVertex(Vertex{PredictRoute: route}); err == nil || !strings.Contains(err.Error(), "conflicts with an existing route") {
			t.Errorf("%s: %v", route, err)
		}
	}
	if err := h.srv.ServeVertex(Vertex{PredictRoute: "/slots/predict"}); err != nil {
		t.Errorf("/slots/predict: %v", err)
	}
}

// vertexHarness is a harness serving the Vertex AI routes.
func vertexHarness(t *testing.T, cfg Config, v Vertex) *harness {
	t.Helper()
	h := newHarnessConfig(t, cfg)
	if err := h.srv.ServeVertex(v); err != nil {
		t.Fatal(err)
	}
	h.h = h.srv.Handler()
	return h
}

func TestVertexPredict(t *testing.T) {
	h := vertexHarness(t, Config{Alias: "stories260K"}, Vertex{HealthRoute: "/healthz", PredictRoute: "/predict"})
	direct := h.do(t, "POST", "/tokenize", `{"content":"Once upon","with_pieces":true}`).Body.String()
	rec := h.do(t, "POST", "/predict", `{"instances":[
		{"@requestFormat":"chatCompletions","max_tokens":8,"messages":[{"role":"user","content":"Say hello"}]},
		{"@requestFormat":"/v1/chat/completions","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"Say world"}]},
		{"content":"Once upon","@requestFormat":"tokenize","with_pieces":true},
		{"@requestFormat":"/tokenize","content":"Once upon","with_pieces":true},
		{"@requestFormat":"messages","max_tokens":2,"messages":[{"role":"user","content":"Hi"}]},
		{"@requestFormat":"chatCompletions","messages":"none"},
		{"@requestFormat":"props"},
		{"@requestFormat":"teleport"},
		{"@requestFormat":7},
		{"max_tokens":1},
		[1,2]
	],"parameters":{}}`)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("status %d %q: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	var resp struct {
		Predictions []json.RawMessage `json:"predictions"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || len(resp.Predictions) != 11 {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	p := func(i int) map[string]any { return decodeJSON(t, resp.Predictions[i]) }
	for i, n := range map[int]float64{0: 8, 1: 3} {
		c := p(i)
		if c["object"] != "chat.completion" || lookup(t, c, "choices.0.message.role") != "assistant" ||
			lookup(t, c, "choices.0.message.content").(string) == "" || lookup(t, c, "usage.completion_tokens") != n {
			t.Errorf("prediction %d: %s", i, resp.Predictions[i])
		}
	}
	for _, i := range []int{2, 3} {
		if string(resp.Predictions[i]) != strings.TrimSpace(direct) {
			t.Errorf("prediction %d: %s, want /tokenize's answer %s", i, resp.Predictions[i], direct)
		}
	}
	if m := p(4); m["type"] != "message" || lookup(t, m, "usage.output_tokens") != 2.0 {
		t.Errorf("prediction 4: %s", resp.Predictions[4])
	}
	if lookup(t, p(5), "error.code") != 400.0 {
		t.Errorf("prediction 5: %s", resp.Predictions[5])
	}
	if p(6)["model_alias"] != "stories260K" {
		t.Errorf("prediction 6 (GET /props): %s", resp.Predictions[6])
	}
	for i, want := range map[int]string{
		7:  `{"error":{"code":400,"message":"no handler registered for @requestFormat: teleport","type":"invalid_request_error"}}`,
		8:  `{"error":{"code":400,"message":"each instance must include a string @requestFormat","type":"invalid_request_error"}}`,
		9:  `{"error":{"code":400,"message":"each instance must include a string @requestFormat","type":"invalid_request_error"}}`,
		10: `{"error":{"code":400,"message":"each instance must be a JSON object","type":"invalid_request_error"}}`,
	} {
		if string(resp.Predictions[i]) != want {
			t.Errorf("prediction %d: %s, want %s", i, resp.Predictions[i], want)
		}
	}

	health := h.do(t, "GET", "/healthz", "")
	if health.Code != http.StatusOK || health.Body.String() != h.do(t, "GET", "/health", "").Body.String() {
		t.Errorf("GET /healthz: %d %s", health.Code, health.Body)
	}
	if rec := h.do(t, "GET", "/predict", ""); rec.Code != http.StatusNotFound {
		t.Errorf("GET /predict: %d", rec.Code)
	}
}

func TestVertexPredictErrors(t *testing.T) {
	h := vertexHarness(t, Config{Alias: "stories260K"}, Vertex{PredictRoute: "/predict"})
	many := "[" + strings.TrimSuffix(strings.Repeat(`{},`, maxInstances+1), ",") + "]"
	for _, tt := range []struct{ body, want string }{
		{`{"instances":`, "invalid JSON in the request body"},
		{`[{"instances":[]}]`, "request body must be a JSON object"},
		{`{"inputs":[]}`, "request body must include an array field named instances"},
		{`{"instances":{"a":1}}`, "request body must include an array field named instances"},
		{`{"instances":` + many + `}`, "instances array exceeds maximum size of 128"},
	} {
		rec := h.do(t, "POST", "/predict", tt.body)
		if rec.Code != http.StatusBadRequest || lookup(t, decodeJSON(t, rec.Body.Bytes()), "error.message") != tt.want &&
			!strings.HasPrefix(lookup(t, decodeJSON(t, rec.Body.Bytes()), "error.message").(string), tt.want) {
			t.Errorf("%.40s: %d %s", tt.body, rec.Code, rec.Body)
		}
	}
	if rec := h.do(t, "POST", "/predict", `{"instances":[]}`); rec.Code != http.StatusOK || rec.Body.String() != `{"predictions":[]}` {
		t.Errorf("no instances: %d %s", rec.Code, rec.Body)
	}
	if rec := newHarness(t).do(t, "POST", "/predict", `{"instances":[]}`); rec.Code != http.StatusNotFound {
		t.Errorf("without Vertex: %d %s", rec.Code, rec.Body)
	}

	// The predict and health routes need the API key; each instance reuses the request's.
	h = vertexHarness(t, Config{Alias: "stories260K", APIKeys: []string{"k"}}, Vertex{HealthRoute: "/hz", PredictRoute: "/predict"})
	body := `{"instances":[{"@requestFormat":"tokenize","content":"a"}]}`
	for _, path := range []string{"/predict", "/hz"} {
		if rec := h.do(t, "POST", path, body); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without a key: %d", path, rec.Code)
		}
	}
	rec := h.doWith(t, "POST", "/predict", body, http.Header{"Authorization": {"Bearer k"}})
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Body.String(), `{"predictions":[{"tokens":[`) {
		t.Errorf("with the key: %d %s", rec.Code, rec.Body)
	}
}
