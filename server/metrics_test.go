package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// parseMetrics parses a /metrics body with Prometheus' text parser.
func parseMetrics(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("Prometheus' parser refuses the metrics: %v\n%s", err, body)
	}
	return families
}

// value is the value of the family's series whose labels include labels.
func value(t *testing.T, families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f, ok := families[name]
	if !ok {
		t.Fatalf("no %s", name)
	}
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && have[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		}
		return m.GetUntyped().GetValue()
	}
	t.Fatalf("no %s series with labels %v", name, labels)
	return 0
}

// TestMetricsMatchCapture: the llamacpp: series are llama-server's, same names, help texts and
// types in the same order, and the whole body parses.
func TestMetricsMatchCapture(t *testing.T) {
	ts, _ := newFakeServer(t, Config{Metrics: true})
	c := loadCapture(t, "metrics")
	status, h, body := do(t, "GET", ts.URL+"/metrics", "", nil)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	if got, want := h.Get("Content-Type"), c.header.Get("Content-Type"); got != want {
		t.Errorf("Content-Type %q, want %q", got, want)
	}
	if h.Get("Process-Start-Time-Unix") != "1700000000" {
		t.Errorf("Process-Start-Time-Unix %q", h.Get("Process-Start-Time-Unix"))
	}
	comments := func(text string) []string {
		var out []string
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "# ") && strings.Contains(l, "llamacpp:") {
				out = append(out, l)
			}
		}
		return out
	}
	if w, g := strings.Join(comments(string(c.respBody)), "\n"), strings.Join(comments(body), "\n"); w != g {
		t.Errorf("HELP and TYPE lines differ from llama-server's:\n%s\nwant\n%s", g, w)
	}
	parseMetrics(t, body)
}

func TestMetricsDisabled(t *testing.T) {
	ts, _ := newFakeServer(t, Config{})
	const want = `{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with ` + "`--metrics`" + `","type":"not_supported_error"}}`
	if status, _, body := do(t, "GET", ts.URL+"/metrics", "", nil); status != 501 || body != want {
		t.Errorf("%d %s", status, body)
	}
}

// TestMetricsCountRequests runs real requests on the engine and checks the token and request
// counts /metrics reports against the responses' own counts.
func TestMetricsCountRequests(t *testing.T) {
	b := enginetest.Load(t, "models", "stories260K.gguf")
	srv := New(Config{Alias: "stories260K", Metrics: true}, testLogger())
	srv.SetBackend(b)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	var promptN, cacheN, predictedN int
	for _, prompt := range []string{"Once upon a time", "Once upon a time, there was", "The cat"} {
		status, _, body := do(t, "POST", ts.URL+"/completion", `{"prompt":"`+prompt+`","n_predict":8,"temperature":0}`, nil)
		if status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		var r struct {
			Timings struct {
				CacheN     int `json:"cache_n"`
				PromptN    int `json:"prompt_n"`
				PredictedN int `json:"predicted_n"`
			} `json:"timings"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		promptN, cacheN, predictedN = promptN+r.Timings.PromptN, cacheN+r.Timings.CacheN, predictedN+r.Timings.PredictedN
	}
	do(t, "GET", ts.URL+"/nonexistent", "", nil)

	_, _, body := do(t, "GET", ts.URL+"/metrics", "", nil)
	m := parseMetrics(t, body)
	for name, want := range map[string]float64{
		"llamacpp:prompt_tokens_total":        float64(promptN),
		"llamacpp:prompt_tokens_cached_total": float64(cacheN),
		"llamacpp:tokens_predicted_total":     float64(predictedN),
		"llamacpp:requests_processing":        0,
		"llamacpp:requests_deferred":          0,
		"llamacpp:n_busy_slots_per_decode":    1,
		"wgpu_llama_generations_total":        3,
		"wgpu_llama_kv_cache_capacity_tokens": 512,
	} {
		if got := value(t, m, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := value(t, m, "wgpu_llama_http_requests_total", "path", "/completion", "status", "200"); got != 3 {
		t.Errorf("completion requests counted %v, want 3", got)
	}
	if got := value(t, m, "wgpu_llama_http_requests_total", "path", "unmatched", "status", "404"); got != 1 {
		t.Errorf("unmatched requests counted %v, want 1", got)
	}
	if got := value(t, m, "llamacpp:n_decode_total"); got < float64(predictedN) {
		t.Errorf("n_decode_total %v, fewer than the %d generated tokens", got, predictedN)
	}
	if value(t, m, "llamacpp:prompt_tokens_seconds") <= 0 || value(t, m, "llamacpp:predicted_tokens_seconds") <= 0 {
		t.Error("throughput gauges are 0 after requests")
	}
	if kv := value(t, m, "wgpu_llama_kv_cache_tokens"); kv <= 0 || kv > 512 {
		t.Errorf("kv cache tokens %v", kv)
	}

	// The throughput gauges cover the time since the previous scrape, as llama-server's bucket.
	_, _, body = do(t, "GET", ts.URL+"/metrics", "", nil)
	m = parseMetrics(t, body)
	if got := value(t, m, "llamacpp:prompt_tokens_seconds"); got != 0 {
		t.Errorf("prompt throughput %v over a window without prompts, want 0", got)
	}
	if got := value(t, m, "llamacpp:tokens_predicted_total"); got != float64(predictedN) {
		t.Errorf("tokens_predicted_total %v after a second scrape, want %d", got, predictedN)
	}
	if got := value(t, m, "wgpu_llama_http_requests_total", "path", "/metrics", "status", "200"); got != 1 {
		t.Errorf("metrics requests counted %v, want 1 (the first scrape)", got)
	}
}

// TestMetricsSpeculative: speculative decoding's counters appear under llama-server's
// llamacpp:spec_decode_* names.
func TestMetricsSpeculative(t *testing.T) {
	var sb strings.Builder
	st := engine.Stats{Spec: engine.SpecStats{Drafts: 3, DraftTokens: 10, Accepted: 7}}
	writeLlamaMetrics(&sb, st, engine.Stats{})
	families := parseMetrics(t, sb.String())
	for name, want := range map[string]float64{
		"llamacpp:spec_decode_num_drafts_total":          3,
		"llamacpp:spec_decode_num_draft_tokens_total":    10,
		"llamacpp:spec_decode_num_accepted_tokens_total": 7,
	} {
		if got := value(t, families, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}
