package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// adapterServer serves stories260K with LoRA adapters A and B of the shared references (both
// at global scale 1) and metrics in vLLM's names too.
func adapterServer(t *testing.T, slots int) *httptest.Server {
	t.Helper()
	dir := shareddata.Path(t, "models", "lora")
	e := enginetest.LoadConfig(t, engine.Config{
		ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 4096 * slots, Slots: slots,
		Lora: []engine.LoraSpec{{Path: filepath.Join(dir, "stories260K-lora-A-F32.gguf"), Scale: 1}, {Path: filepath.Join(dir, "stories260K-lora-B-F32.gguf"), Scale: 1}},
	})
	srv := New(Config{Alias: "stories260K", Metrics: true, MetricsCompat: MetricsVLLM}, testLogger())
	srv.SetBackend(e)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	return ts
}

// TestAdapterByModelName: a request whose model field names an adapter runs that adapter alone
// (as the same request with a lora list naming it), on completions, chat and Anthropic
// messages; /v1/models lists each adapter with its parent; other model names keep the global
// scales.
func TestAdapterByModelName(t *testing.T) {
	ts := adapterServer(t, 1)
	post := func(path, body string) map[string]any {
		t.Helper()
		status, _, out := do(t, "POST", ts.URL+path, body, nil)
		if status != 200 {
			t.Fatalf("%s: %d %s", path, status, out)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	completion := func(fields string) string {
		v := post("/v1/completions", `{"prompt":"Once upon a time","max_tokens":24,"temperature":0,`+fields+`}`)
		return v["choices"].([]any)[0].(map[string]any)["text"].(string)
	}
	onlyA := completion(`"lora":[{"id":0,"scale":1}]`)
	both := completion(`"model":"stories260K"`)
	if onlyA == both {
		t.Fatalf("adapter A alone and both adapters give the same text %q: the test cannot tell them apart", onlyA)
	}
	if got := completion(`"model":"stories260K-lora-A-F32"`); got != onlyA {
		t.Errorf("model naming adapter A: %q, want adapter A's %q", got, onlyA)
	}
	if got := completion(`"model":"another-name"`); got != both {
		t.Errorf("a model name that is no adapter: %q, want the global scales' %q", got, both)
	}
	if got := completion(`"model":"stories260K-lora-A-F32","lora":[{"id":1,"scale":1}]`); got != completion(`"lora":[{"id":1,"scale":1}]`) {
		t.Errorf("a lora list beside an adapter's name: %q, want the list's adapters", got)
	}

	chat := func(fields string) string {
		v := post("/v1/chat/completions", `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":24,"temperature":0,`+fields+`}`)
		return v["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	}
	if got, want := chat(`"model":"stories260K-lora-B-F32"`), chat(`"lora":[{"id":1,"scale":1}]`); got != want {
		t.Errorf("chat with model naming adapter B: %q, want %q", got, want)
	}
	anthropic := func(model string) string {
		v := post("/v1/messages", `{"model":"`+model+`","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":24,"temperature":0}`)
		return v["content"].([]any)[0].(map[string]any)["text"].(string)
	}
	if got, want := anthropic("stories260K-lora-B-F32"), chat(`"lora":[{"id":1,"scale":1}]`); got != want {
		t.Errorf("messages with model naming adapter B: %q, want the chat's %q", got, want)
	}

	_, _, out := do(t, "GET", ts.URL+"/v1/models", "", nil)
	var models struct {
		Data []struct {
			ID     string `json:"id"`
			Parent string `json:"parent"`
			Root   string `json:"root"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &models); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range models.Data {
		listed = append(listed, m.ID+"<"+m.Parent+"<"+filepath.Base(m.Root))
	}
	if got, want := strings.Join(listed, " "), "stories260K<<. stories260K-lora-A-F32<stories260K<stories260K-lora-A-F32.gguf stories260K-lora-B-F32<stories260K<stories260K-lora-B-F32.gguf"; got != want {
		t.Errorf("/v1/models lists %s, want %s", got, want)
	}
}

// stream starts a streamed completion that runs until cancel; started yields nil once its
// first token has come (or the error that ended it before).
func stream(t *testing.T, url, body string) (cancel func(), started <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- err
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: {") {
				first <- nil
				break
			}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		first <- context.Canceled // no-op when the first token came: the channel is full
	}()
	return cancel, first
}

// waitStarted waits for a stream's first token.
func waitStarted(t *testing.T, started <-chan error) {
	t.Helper()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("the stream ended before its first token: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no first token in 60 s")
	}
}

// vllmGauges reads the gateway's series from one scrape.
type vllmGauges struct {
	running, waiting, kvUsage float64
	blockSize, blocks         string
	loraRunning, loraWaiting  string
	maxLora                   string
	loraStamp                 float64
}

func scrapeVLLM(t *testing.T, url string) vllmGauges {
	t.Helper()
	status, _, body := do(t, "GET", url+"/metrics", "", nil)
	if status != 200 {
		t.Fatalf("/metrics: %d %s", status, body)
	}
	m := parseMetrics(t, body)
	labels := func(name string) map[string]string {
		f := m[name]
		if f == nil || len(f.GetMetric()) != 1 || f.GetType() != dto.MetricType_GAUGE {
			t.Fatalf("%s: want one gauge series, have %v", name, f)
		}
		out := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			out[l.GetName()] = l.GetValue()
		}
		return out
	}
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} {
		if l := labels(name); l["model_name"] != "stories260K" {
			t.Fatalf("%s labels %v, want model_name=stories260K", name, l)
		}
	}
	for _, name := range []string{"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"} {
		if f := m[name]; f == nil || f.GetType() != dto.MetricType_COUNTER {
			t.Fatalf("%s: want a counter, have %v", name, f)
		}
	}
	cache, lora := labels("vllm:cache_config_info"), labels("vllm:lora_requests_info")
	return vllmGauges{
		running:     value(t, m, "vllm:num_requests_running"),
		waiting:     value(t, m, "vllm:num_requests_waiting"),
		kvUsage:     value(t, m, "vllm:kv_cache_usage_perc"),
		blockSize:   cache["block_size"],
		blocks:      cache["num_gpu_blocks"],
		loraRunning: lora["running_lora_adapters"],
		loraWaiting: lora["waiting_lora_adapters"],
		maxLora:     lora["max_lora"],
		loraStamp:   value(t, m, "vllm:lora_requests_info"),
	}
}

// TestMetricsVLLMUnderLoad: under --metrics-compat vllm, /metrics carries every series of the
// inference gateway's model server protocol with vLLM's names, types and labels, and their
// values follow the load: two slots running (one with adapter A, one with none), a third
// request (adapter B) queued, then nothing once they end. Scrapes run twenty times a second meanwhile.
func TestMetricsVLLMUnderLoad(t *testing.T) {
	ts := adapterServer(t, 2)
	idle := scrapeVLLM(t, ts.URL)
	if idle.running != 0 || idle.waiting != 0 || idle.kvUsage != 0 || idle.loraRunning != "" || idle.loraWaiting != "" || idle.maxLora != "2" {
		t.Errorf("idle: %+v", idle)
	}
	// 2 slots of 4096 rows in pages of 16.
	if idle.blockSize != "16" || idle.blocks != "512" {
		t.Errorf("cache_config_info block_size %s num_gpu_blocks %s, want 16 and 512", idle.blockSize, idle.blocks)
	}
	if now := float64(time.Now().Unix()); math.Abs(idle.loraStamp-now) > 600 {
		t.Errorf("lora_requests_info's value %v is no recent time (now %v)", idle.loraStamp, now)
	}

	stop := make(chan struct{})
	var scrapers sync.WaitGroup
	scrapers.Add(1)
	go func() { // a gateway's scrapes, racing the requests
		defer scrapers.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if resp, err := http.Get(ts.URL + "/metrics"); err == nil {
					resp.Body.Close()
				}
			}
		}
	}()
	defer func() { close(stop); scrapers.Wait() }()

	const long = `"max_tokens":-1,"ignore_eos":true,"temperature":0,"stream":true`
	stopA, startedA := stream(t, ts.URL, `{"prompt":"Once upon a time","model":"stories260K-lora-A-F32",`+long+`}`)
	defer stopA()
	waitStarted(t, startedA)
	stopBase, startedBase := stream(t, ts.URL, `{"prompt":"The cat sat","lora":[{"id":0,"scale":0}],`+long+`}`)
	defer stopBase()
	waitStarted(t, startedBase)
	stopB, startedB := stream(t, ts.URL, `{"prompt":"A dog","model":"stories260K-lora-B-F32",`+long+`}`)
	defer stopB()

	var busy vllmGauges
	for deadline := time.Now().Add(20 * time.Second); ; {
		busy = scrapeVLLM(t, ts.URL)
		if busy.waiting == 1 && busy.running == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if busy.running != 2 || busy.waiting != 1 {
		t.Fatalf("with two long generations and a third request: running %v waiting %v, want 2 and 1", busy.running, busy.waiting)
	}
	if busy.kvUsage <= 0 || busy.kvUsage > 1 {
		t.Errorf("kv_cache_usage_perc %v while generating, want in (0, 1]", busy.kvUsage)
	}
	if busy.loraRunning != "stories260K-lora-A-F32" || busy.loraWaiting != "stories260K-lora-B-F32" {
		t.Errorf("lora_requests_info running %q waiting %q, want adapter A running and B waiting", busy.loraRunning, busy.loraWaiting)
	}
	if busy.loraStamp < idle.loraStamp {
		t.Errorf("lora_requests_info's time went back: %v after %v", busy.loraStamp, idle.loraStamp)
	}

	stopA()
	stopBase()
	waitStarted(t, startedB)
	for deadline := time.Now().Add(20 * time.Second); ; {
		busy = scrapeVLLM(t, ts.URL)
		if busy.loraRunning == "stories260K-lora-B-F32" || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if busy.running != 1 || busy.waiting != 0 || busy.loraRunning != "stories260K-lora-B-F32" || busy.loraWaiting != "" {
		t.Errorf("after the first two ended: %+v, want adapter B's request running alone", busy)
	}
	stopB()
	for deadline := time.Now().Add(20 * time.Second); ; {
		busy = scrapeVLLM(t, ts.URL)
		if busy.running == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if busy.running != 0 || busy.waiting != 0 || busy.loraRunning != "" || busy.loraWaiting != "" {
		t.Errorf("after every request ended: %+v", busy)
	}
}
