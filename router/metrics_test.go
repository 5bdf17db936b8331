package router

import (
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// scrapeRouter reads the router's /metrics with Prometheus' parser.
func scrapeRouter(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("Prometheus' parser refuses the router's metrics: %v\n%s", err, body)
	}
	return families
}

// labelled is the value of a family's series whose label name has value want, and whether
// there is one.
func labelled(f *dto.MetricFamily, name, want string) (float64, bool) {
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == want {
				if m.GetCounter() != nil {
					return m.GetCounter().GetValue(), true
				}
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestRouterMetrics: a router answers /metrics without ?model= with every loaded model's
// series labelled by model (vLLM's names included under --metrics-compat vllm), and its models
// by status; ?model= answers the model's own; without --metrics it answers 501.
func TestRouterMetrics(t *testing.T) {
	_, ts := startRouterWith(t, 4, map[string]string{"stories": "stories260K.gguf", "tiny": "llama-2-tiny-random.gguf"}, "--metrics", "--metrics-compat", "vllm")
	m := scrapeRouter(t, ts.URL)
	if v, _ := labelled(m["wgpu_llama_router_models"], "status", StatusUnloaded); v != 2 {
		t.Errorf("unloaded models %v, want 2", v)
	}
	if _, ok := m["vllm:num_requests_waiting"]; ok {
		t.Error("model series with no model loaded")
	}
	if code, body := chat(t, ts, "stories"); code != 200 {
		t.Fatalf("chat: %d %v", code, body)
	}
	m = scrapeRouter(t, ts.URL)
	if v, _ := labelled(m["wgpu_llama_router_models"], "status", StatusLoaded); v != 1 {
		t.Errorf("loaded models %v, want 1", v)
	}
	if v, ok := labelled(m["llamacpp:tokens_predicted_total"], "model", "stories"); !ok || v != 4 {
		t.Errorf("stories' tokens_predicted_total %v (%v), want 4", v, ok)
	}
	for _, name := range []string{"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:cache_config_info"} {
		if _, ok := labelled(m[name], "model", "stories"); !ok || m[name].GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s: no gauge for stories: %v", name, m[name])
		}
	}
	if _, ok := labelled(m["llamacpp:tokens_predicted_total"], "model", "tiny"); ok {
		t.Error("series for tiny, which is not loaded")
	}

	resp, err := http.Get(ts.URL + "/metrics?model=stories")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "\nllamacpp:tokens_predicted_total 4\n") {
		t.Errorf("?model=stories: %d, want the child's own unlabelled series:\n%s", resp.StatusCode, body)
	}

	_, plain := startRouter(t, 4, map[string]string{"stories": "stories260K.gguf"})
	resp, err = http.Get(plain.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("without --metrics: %d, want 501", resp.StatusCode)
	}
}
