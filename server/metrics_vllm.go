package server

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// MetricsVLLM is --metrics-compat's value that has /metrics also write vLLM's names for what
// an inference gateway schedules by (the Gateway API Inference Extension's model server
// protocol, whose Endpoint Picker reads vLLM's names with no configuration): the requests
// queued and running, KV cache use and its pages, and the LoRA adapters in use.
const MetricsVLLM = "vllm"

// AdapterUseBackend is a Backend that counts the requests of each LoRA adapter (the engine).
type AdapterUseBackend interface {
	// AdapterUse lists the loaded adapters with their queued and running requests, and
	// when those counts last changed.
	AdapterUse() ([]engine.AdapterUse, time.Time)
}

// writeVLLMMetrics writes vLLM's series for the loaded model m from its counters st, each with
// vLLM's model_name label.
func writeVLLMMetrics(w io.Writer, m *loaded, st engine.Stats) {
	label := fmt.Sprintf("{model_name=%s}", strconv.Quote(m.name))
	usage := 0.0
	if st.KVCapacity > 0 {
		usage = float64(st.KVTokens) / float64(st.KVCapacity)
	}
	for _, g := range []metric{
		{"num_requests_running", "Number of requests in model execution batches.", float64(st.Processing)},
		{"num_requests_waiting", "Number of requests waiting to be processed.", float64(st.Deferred)},
		{"kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", usage},
	} {
		writeSeries(w, "vllm:"+g.name, g.help, "gauge", label, formatValue(g.value))
	}
	prompt := float64(st.PromptTokens + st.PromptCached)
	for _, c := range []metric{
		{"prompt_tokens_total", "Number of prefill tokens processed.", prompt},
		{"generation_tokens_total", "Number of generation tokens processed.", float64(st.PredictedTokens)},
		{"prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", prompt},
		{"prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", float64(st.PromptCached)},
	} {
		writeSeries(w, "vllm:"+c.name, c.help, "counter", label, formatValue(c.value))
	}
	// The cache's unit is the KV page: what slots take, and share between equal prefixes.
	writeSeries(w, "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", "gauge",
		fmt.Sprintf("{block_size=\"%d\",num_gpu_blocks=\"%d\",enable_prefix_caching=\"True\"}", st.KVPageSize, st.KVPages), "1")

	ab, ok := m.backend.(AdapterUseBackend)
	if !ok {
		return
	}
	use, changed := ab.AdapterUse()
	if len(use) == 0 {
		return
	}
	var running, waiting []string
	for _, a := range use {
		if a.Running > 0 {
			running = append(running, a.Name)
		}
		if a.Waiting > 0 {
			waiting = append(waiting, a.Name)
		}
	}
	// Every loaded adapter is resident, so max_lora is their number: naming any of them
	// never makes the server load or evict one. The value is when the lists last changed
	// (vLLM's), by which a gateway keeps the newest.
	writeSeries(w, "vllm:lora_requests_info", "Running stats on lora requests.", "gauge",
		fmt.Sprintf("{max_lora=\"%d\",running_lora_adapters=%s,waiting_lora_adapters=%s}",
			len(use), strconv.Quote(strings.Join(running, ",")), strconv.Quote(strings.Join(waiting, ","))),
		strconv.FormatFloat(float64(changed.UnixMilli())/1e3, 'f', 3, 64))
}
