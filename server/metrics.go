package server

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// metricsState is what /metrics keeps: this server's request counts (an atomic counter per
// route and status), and what the previous scrape saw (llama-server's throughput gauges
// average over the time since it, resetting their "bucket" at each scrape). Neither takes a
// lock, so that a gateway scraping twenty times a second never waits on requests or on the
// engine.
type metricsState struct {
	requests sync.Map // requestCount → *atomic.Uint64
	last     atomic.Pointer[scrape]
}

// scrape is what one scrape reported: the engine's counters, the request counts and the
// process's gauges.
type scrape struct {
	stats    engine.Stats
	requests map[requestCount]uint64
	proc     procStats
}

// requestCount labels the wgpu_llama_http_requests_total series.
type requestCount struct {
	path   string // the route's pattern, so that unknown paths share one series
	status int
}

// countRequest counts a finished request for path (a route pattern) and status.
func (s *Server) countRequest(path string, status int) {
	k := requestCount{path, status}
	c, ok := s.metrics.requests.Load(k)
	if !ok {
		c, _ = s.metrics.requests.LoadOrStore(k, new(atomic.Uint64))
	}
	c.(*atomic.Uint64).Add(1)
}

// requestCounts reads the request counters.
func (s *Server) requestCounts() map[requestCount]uint64 {
	out := map[requestCount]uint64{}
	s.metrics.requests.Range(func(k, v any) bool {
		out[k.(requestCount)] = v.(*atomic.Uint64).Load()
		return true
	})
	return out
}

// routeLabel is the path label of a request: its route's pattern (e.g. "/slots/{id_slot}"), or
// "unmatched" for paths no route serves, which keeps the label's values bounded.
func (s *Server) routeLabel(r *http.Request) string {
	for _, method := range []string{r.Method, http.MethodGet, http.MethodPost} {
		if route, ok := s.api.FindRoute(method, r.URL.Path); ok {
			return route.PathPattern()
		}
	}
	return "unmatched"
}

// GetMetrics implements GET /metrics in Prometheus' text format: llama-server's llamacpp:*
// series, with its names, help texts and types, then wgpu-llama's own wgpu_llama_* series.
// It answers 501 unless enabled (--metrics).
//
// A sleeping engine's counters are those it had on falling asleep, so scraping a sleeping
// server answers as llama-server's snapshot does: the gauges cover the window since the
// previous scrape (the last generation's throughput once, then nothing). Its request counts
// too stay as the previous scrape reported them once the engine has done nothing since:
// repeated scrapes of a sleeping server read the same, whatever polled its /health or /props
// meanwhile; they catch up once it wakes. So do the process's gauges (memory, goroutines,
// descriptors): llama-server's tests expect a sleeping server's scrape to be byte for byte
// the last one before it slept.
func (s *Server) GetMetrics(_ context.Context, w http.ResponseWriter) error {
	if !s.cfg.Metrics {
		return &apiError{typ: errNotSupported, message: "This server does not support metrics endpoint. Start it with `--metrics`"}
	}
	m := s.model()
	if m == nil {
		return errLoading
	}
	sb, ok := m.backend.(StatsBackend)
	if !ok {
		return &apiError{typ: errNotSupported, message: "this backend keeps no statistics"}
	}
	asleep := m.sleeping()
	now := &scrape{stats: sb.Stats()}
	prev := s.metrics.last.Load()
	if asleep && prev != nil && prev.stats == now.stats {
		now.requests, now.proc = prev.requests, prev.proc
	} else {
		now.requests, now.proc = s.requestCounts(), readProcStats()
	}
	if prev = s.metrics.last.Swap(now); prev == nil {
		prev = &scrape{}
	}

	var b strings.Builder
	writeLlamaMetrics(&b, now.stats, prev.stats)
	writeOwnMetrics(&b, now.stats, now.requests, now.proc)
	if s.cfg.MetricsCompat == MetricsVLLM {
		writeVLLMMetrics(&b, m, now.stats)
	}
	w.Header().Set("Process-Start-Time-Unix", strconv.FormatInt(now.stats.Start.Unix(), 10))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.WriteHeader(http.StatusOK)
	_, err := io.WriteString(w, b.String())
	return err
}

// metric is one unlabelled series.
type metric struct {
	name, help string
	value      float64
}

// writeLlamaMetrics writes llama-server's series (server_task_result_metrics::to_metrics):
// counters, then gauges. The throughput gauges cover the time since the previous scrape.
func writeLlamaMetrics(w io.Writer, st, prev engine.Stats) {
	rate := func(n, prevN uint64, t, prevT float64) float64 {
		if t-prevT <= 0 {
			return 0
		}
		return float64(n-prevN) / (t - prevT)
	}
	counters := []metric{
		{"prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", float64(st.PromptTokens)},
		{"prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", float64(st.PromptCached)},
		{"prompt_seconds_total", "Total time spent processing prompts", st.PromptTime.Seconds()},
		{"tokens_predicted_total", "Number of generation tokens processed", float64(st.PredictedTokens)},
		{"tokens_predicted_seconds_total", "Total time spent generating tokens", st.PredictedTime.Seconds()},
		{"n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding", float64(st.Decodes)},
		{"n_tokens_max", "Largest observed sequence length (prompt + generation)", float64(st.TokensMax)},
		{"spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", float64(st.Spec.DraftTokens)},
		{"spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", float64(st.Spec.Accepted)},
		{"spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", float64(st.Spec.Drafts)},
	}
	gauges := []metric{
		{"prompt_tokens_seconds", "Average prompt throughput in tokens/s",
			rate(st.PromptTokens, prev.PromptTokens, st.PromptTime.Seconds(), prev.PromptTime.Seconds())},
		{"predicted_tokens_seconds", "Average generation throughput in tokens/s",
			rate(st.PredictedSteps, prev.PredictedSteps, st.PredictedTime.Seconds(), prev.PredictedTime.Seconds())},
		{"requests_processing", "Number of requests processing", float64(st.Processing)},
		{"requests_deferred", "Number of requests deferred", float64(st.Deferred)},
		{"n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call",
			float64(st.BusySlots) / math.Max(float64(st.Decodes), 1)},
	}
	for _, m := range counters {
		writeMetric(w, "llamacpp:"+m.name, m.help, "counter", m.value)
	}
	for _, m := range gauges {
		writeMetric(w, "llamacpp:"+m.name, m.help, "gauge", m.value)
	}
}

// writeOwnMetrics writes wgpu-llama's series: HTTP requests by route and status, finished
// generations, load shedding, KV cache and device memory use, device recoveries, and the
// process's memory, goroutines and descriptors.
func writeOwnMetrics(w io.Writer, st engine.Stats, requests map[requestCount]uint64, p procStats) {
	fmt.Fprint(w, "# HELP wgpu_llama_http_requests_total HTTP requests by route and status (0: the client left before an answer)\n"+
		"# TYPE wgpu_llama_http_requests_total counter\n")
	keys := make([]requestCount, 0, len(requests))
	for k := range requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b requestCount) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return a.status - b.status
	})
	for _, k := range keys {
		fmt.Fprintf(w, "wgpu_llama_http_requests_total{path=%s,status=\"%d\"} %d\n", strconv.Quote(k.path), k.status, requests[k])
	}
	writeMetric(w, "wgpu_llama_generations_total", "Generation requests finished, whatever their outcome", "counter", float64(st.Generations))
	writeMetric(w, "wgpu_llama_requests_shed_total", "Requests answered 503 at once because --max-queue requests were waiting for a slot", "counter", float64(st.Shed))
	writeMetric(w, "wgpu_llama_queue_limit", "Most requests that may wait for a slot (--max-queue; 0: no limit)", "gauge", float64(st.MaxQueue))
	writeMetric(w, "wgpu_llama_kv_cache_tokens", "KV cache rows in use (the pages the slots hold; shared prompt prefixes count once)", "gauge", float64(st.KVTokens))
	writeMetric(w, "wgpu_llama_kv_cache_capacity_tokens", "KV cache rows in all", "gauge", float64(st.KVCapacity))
	usage := 0.0
	if st.KVCapacity > 0 {
		usage = float64(st.KVTokens) / float64(st.KVCapacity)
	}
	writeMetric(w, "wgpu_llama_kv_cache_usage_ratio", "KV cache use, 1 meaning full", "gauge", usage)
	writeMetric(w, "wgpu_llama_kv_pages_adrift", "KV cache pages whose users differ from the slots and prompt cache entries holding them (a leak when not 0)", "gauge", float64(st.KVPagesAdrift))
	writeMetric(w, "wgpu_llama_gpu_memory_bytes", "Device memory the model, KV cache and activations take (0 while asleep)", "gauge", float64(st.GPUMemory))
	writeMetric(w, "wgpu_llama_device_recoveries_total", "GPU device losses the engine reopened the device and reloaded the model after", "counter", float64(st.Recoveries))
	if p.rss > 0 {
		writeMetric(w, "wgpu_llama_process_resident_bytes", "Resident memory of the server process", "gauge", float64(p.rss))
	}
	writeMetric(w, "wgpu_llama_goroutines", "Goroutines in the server process", "gauge", float64(p.goroutines))
	if p.fds >= 0 {
		writeMetric(w, "wgpu_llama_open_fds", "Open file descriptors of the server process", "gauge", float64(p.fds))
	}
}

// writeMetric writes one unlabelled series with its HELP and TYPE lines.
func writeMetric(w io.Writer, name, help, typ string, v float64) {
	writeSeries(w, name, help, typ, "", formatValue(v))
}

// writeSeries writes one series, its labels in braces (or ""), with its HELP and TYPE lines.
func writeSeries(w io.Writer, name, help, typ, labels, value string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s%s %s\n", name, help, name, typ, name, labels, value)
}

// formatValue writes whole numbers in full and others with six significant digits, as
// llama-server's stream output does (0.186487, 895.505), without its loss of precision on
// large counts.
func formatValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}
