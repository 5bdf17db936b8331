package soak

import (
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// TestHistogramPercentiles checks the bounded histogram against exact percentiles of
// 1..1000 ms: within its 2% bucket width, never below the truth, and an exact maximum.
func TestHistogramPercentiles(t *testing.T) {
	var h histogram
	if p := h.percentiles(); p != (Percentiles{}) {
		t.Errorf("empty: %+v", p)
	}
	for i := 1000; i >= 1; i-- {
		h.add(time.Duration(i) * time.Millisecond)
	}
	p := h.percentiles()
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", p.P50, 500}, {"p90", p.P90, 900}, {"p99", p.P99, 990}, {"mean", p.Mean, 500.5}} {
		if c.got < c.want || c.got > c.want*1.021 {
			t.Errorf("%s = %.3f, want %.0f..%.0f", c.name, c.got, c.want, c.want*1.02)
		}
	}
	if p.Max != 1000 || p.Count != 1000 {
		t.Errorf("max %v count %d", p.Max, p.Count)
	}
	// Out of range: below the first bucket and beyond the last.
	var e histogram
	e.add(time.Microsecond)
	e.add(100 * time.Hour)
	if q := e.quantile(0.5); q != histMin {
		t.Errorf("tiny: %v", q)
	}
	if q := e.quantile(1); q != 100*time.Hour {
		t.Errorf("huge: %v", q)
	}
	if upperBound(histBuckets-1) < time.Hour {
		t.Errorf("the buckets end at %v, before an hour", upperBound(histBuckets-1))
	}
}

// TestSSEReader checks event splitting and the byte offsets a reattach starts from.
func TestSSEReader(t *testing.T) {
	const a = "data: {\"a\":1}\n\n"
	const ping = ":\n\n"
	const b = "event: x\r\ndata: line1\r\ndata:line2\r\n\r\n"
	const done = "data: [DONE]\n\n"
	r := newSSEReader(strings.NewReader(a + ping + b + done))
	for _, want := range []struct {
		data string
		n    int
	}{{`{"a":1}`, len(a)}, {"line1\nline2", len(a + ping + b)}, {"[DONE]", len(a + ping + b + done)}} {
		d, err := r.next()
		if err != nil || d != want.data || r.n != int64(want.n) {
			t.Fatalf("next = %q, %v at %d; want %q at %d", d, err, r.n, want.data, want.n)
		}
	}
	if _, err := r.next(); !errors.Is(err, io.EOF) {
		t.Errorf("at the end: %v", err)
	}
	for _, cut := range []string{"data: {\"a\":1}\n", "data: {\"a\""} {
		if _, err := newSSEReader(strings.NewReader(cut)).next(); !errors.Is(err, errBadSSE) {
			t.Errorf("%q: %v, want bad SSE", cut, err)
		}
	}
	events, err := parseEvents([]byte(ping + a + done))
	if err != nil || len(events) != 2 || events[1] != "[DONE]" {
		t.Errorf("parseEvents: %q %v", events, err)
	}
}

// chatSSE is a chat stream as the server sends it (abridged): role, tokens, finish, usage.
const chatSSE = `data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}]}

data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"S"}}]}

data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"u"}}]}

:

data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"re"}}]}

data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],"timings":{"predicted_n":3}}

data: {"choices":[],"usage":{"completion_tokens":3,"prompt_tokens":42}}

data: [DONE]

`

// TestReadChat checks reading chat streams: tokens, timings, cuts and malformed streams.
func TestReadChat(t *testing.T) {
	st, err := readChat(newSSEReader(strings.NewReader(chatSSE)), time.Now(), 0)
	if err != nil || !st.done || st.chunks != 3 || st.tokens != 3 || st.ttft <= 0 || len(st.gaps) != 2 {
		t.Fatalf("whole: %+v %v", st, err)
	}
	st, err = readChat(newSSEReader(strings.NewReader(chatSSE)), time.Now(), 2)
	if err != nil || st.done || !st.stopped || st.chunks != 2 || st.tokens != 2 {
		t.Errorf("cut after 2: %+v %v", st, err)
	}
	for name, c := range map[string]struct {
		stream string
		kind   string
	}{
		"no [DONE]":   {chatSSE[:strings.Index(chatSSE, "data: [DONE]")], "bad SSE /r"},
		"no finish":   {"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n", "bad SSE /r"},
		"not JSON":    {"data: {oops\n\n", "bad SSE /r"},
		"error event": {"data: {\"error\":{\"code\":500,\"message\":\"boom\"}}\n\n", "stream error /r"},
	} {
		_, err := readChat(newSSEReader(strings.NewReader(c.stream)), time.Now(), 0)
		if f := classify("/r", err); err == nil || f.kind != c.kind {
			t.Errorf("%s: %v classified %+v, want %s", name, err, f, c.kind)
		}
	}
}

// TestParseMetrics checks the Prometheus text parser on labels, sums and oddities.
func TestParseMetrics(t *testing.T) {
	const text = `# HELP wgpu_llama_gpu_memory_bytes GPU memory
# TYPE wgpu_llama_gpu_memory_bytes gauge
wgpu_llama_gpu_memory_bytes{kind="weights"} 1000
wgpu_llama_gpu_memory_bytes{kind="kv {cache}",note="a \"q\""} 24 1700000000000
llamacpp:requests_processing 2
wgpu_llama_goroutines 1.5e+02
wgpu_llama_http_requests_total{path="/completion",status="200"} 3
broken{ 5
nothing
wgpu_llama_open_fds notanumber
`
	m := parseMetrics(text)
	want := map[string]float64{"wgpu_llama_gpu_memory_bytes": 1024, "llamacpp:requests_processing": 2,
		"wgpu_llama_goroutines": 150, "wgpu_llama_http_requests_total": 3}
	if len(m) != len(want) {
		t.Errorf("parsed %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
}

// TestStatusOutcome checks how non-200 answers are counted.
func TestStatusOutcome(t *testing.T) {
	shed := statusOutcome("/completion", 503, `{"error":{"code":503,"message":"the server is busy: too many requests are waiting for a slot (--max-queue); retry later","type":"unavailable_error"}}`)
	if !shed.shed {
		t.Errorf("queue full: %+v", shed)
	}
	for _, body := range []string{
		"{\"error\":{\"code\":501,\"message\":\"This server does not support embeddings. Start it with `--embeddings`\",\"type\":\"not_supported_error\"}}",
	} {
		if o := statusOutcome("/v1/embeddings", 501, body); o.skip == "" || o.fail != nil {
			t.Errorf("501: %+v", o)
		}
	}
	if o := statusOutcome("/v1/embeddings", 400, `{"error":{"code":400,"message":"Pooling type 'none' is not OAI compatible. Please use a different pooling type","type":"invalid_request_error"}}`); o.skip == "" {
		t.Errorf("pooling none: %+v", o)
	}
	if o := statusOutcome("/v1/chat/completions", 503, `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`); o.shed || o.fail == nil || o.fail.kind != "http 503 /v1/chat/completions" {
		t.Errorf("loading: %+v", o)
	}
	if o := statusOutcome("/completion", 500, "oops"); o.fail == nil || o.fail.kind != "http 500 /completion" || !strings.Contains(o.fail.msg, "oops") {
		t.Errorf("500: %+v", o)
	}
}

// TestTally checks the counting of outcomes: provoked shedding is no error, unprovoked is.
func TestTally(t *testing.T) {
	tl := newTally()
	ok := true
	tl.record(KindChat, outcome{tokens: 5, ttft: time.Millisecond, gaps: []time.Duration{time.Millisecond}}, false)
	tl.record(KindReattach, outcome{tokens: 2, reattach: &ok}, false)
	tl.record(KindOverload, outcome{shed: true, fail: &failure{"shed", "503"}}, true)
	tl.record(KindCompletion, outcome{shed: true, fail: &failure{"shed", "503"}}, false)
	tl.record(KindCompletion, outcome{fail: &failure{"timeout", "/completion: deadline"}}, false)
	tl.record(KindCompletion, outcome{fail: &failure{"timeout", "/completion: again"}}, false)
	tl.record(KindEmbeddings, outcome{skip: "not supported"}, false)
	if tl.requests != 7 || tl.failed != 3 || tl.shedProvoked != 1 || tl.tokens != 7 || tl.reattachOK != 1 {
		t.Errorf("totals: %d requests, %d failed, %d provoked, %d tokens, %d reattached", tl.requests, tl.failed, tl.shedProvoked, tl.tokens, tl.reattachOK)
	}
	if e := tl.errors["timeout"]; e == nil || e.Count != 2 || e.First != "completion: /completion: deadline" {
		t.Errorf("timeouts: %+v", e)
	}
	if e := tl.errors["shed (unprovoked)"]; e == nil || e.Count != 1 {
		t.Errorf("unprovoked: %+v", e)
	}
	if k := tl.kinds[KindCompletion]; k.Requests != 3 || k.Errors != 3 || k.Shed != 1 || k.OK != 0 {
		t.Errorf("completion: %+v", k)
	}
	if k := tl.kinds[KindOverload]; k.Shed != 1 || k.Errors != 0 {
		t.Errorf("overload: %+v", k)
	}
	if k := tl.kinds[KindEmbeddings]; k.Skipped != "not supported" || k.Errors != 0 {
		t.Errorf("embeddings: %+v", k)
	}
}

// TestJudge checks the verdict and the leak flags on fixed snapshots.
func TestJudge(t *testing.T) {
	snap := func(rss, goroutines, fds, processing float64) Snapshot {
		return Snapshot{Metrics: map[string]float64{metricRSS: rss, metricGoroutines: goroutines, metricFDs: fds, metricProcessing: processing}}
	}
	good := &Report{Slots: 4, SlotsBusy: []int{}}
	good.judge(snap(100<<20, 50, 20, 0), snap(105<<20, 60, 25, 0))
	if !good.OK() || len(good.Leaks) != 0 || good.RSSGrowthPercent == nil || math.Abs(*good.RSSGrowthPercent-5) > 1e-9 {
		t.Errorf("good: %+v", good)
	}
	bad := &Report{Slots: 4, SlotsBusy: []int{2}, ErrorCount: 3}
	bad.judge(snap(100<<20, 50, 20, 0), snap(120<<20, 200, 100, 1))
	if bad.OK() || len(bad.Leaks) != 4 || len(bad.Failures) != 6 {
		t.Errorf("bad: leaks %q, failures %q", bad.Leaks, bad.Failures)
	}
	// Without metrics, only what is known judges.
	none := &Report{SlotsBusy: []int{}}
	none.judge(Snapshot{MetricsError: "501"}, Snapshot{MetricsError: "501"})
	if !none.OK() || none.RSSGrowthPercent != nil {
		t.Errorf("no metrics: %+v", none)
	}
}

// TestWriteTable checks the table's rows on a fixed report.
func TestWriteTable(t *testing.T) {
	rep := &Report{URL: "http://x", Streams: 2, DurationSeconds: 3, Kinds: map[string]*KindStats{},
		Errors: map[string]*ErrorKind{"timeout": {Count: 1, First: "chat-stream: /v1/chat/completions: deadline"}}, ErrorCount: 1,
		Start: Snapshot{Metrics: map[string]float64{metricRSS: 1 << 20}}, End: Snapshot{Metrics: map[string]float64{metricRSS: 2 << 20}},
		Slots: 2, SlotsBusy: []int{}}
	for _, k := range allKinds() {
		rep.Kinds[k] = &KindStats{Requests: 1, OK: 1}
	}
	rep.Kinds[KindEmbeddings] = &KindStats{Skipped: "not supported"}
	rep.judge(rep.Start, rep.End)
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"verdict  FAIL: 1 errors; resident memory grew 100.0%", "\nchat-stream ", "skipped: not supported",
		"\n  timeout ", "\nrss ", "1.0 MiB", "+100.0%", "\ngoroutines ", "\nslots at end ", "2 idle of 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}
