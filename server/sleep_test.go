package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// sleepyFake is the fake backend as a SleepBackend: asleep until Wake, which counts its calls
// and fails with wakeErr when set.
type sleepyFake struct {
	*fakeBackend
	asleep  atomic.Bool
	wakes   atomic.Int64
	wakeErr error
}

func (f *sleepyFake) Sleeping() bool { return f.asleep.Load() }

func (f *sleepyFake) Wake(context.Context) error {
	f.wakes.Add(1)
	if f.wakeErr != nil {
		return f.wakeErr
	}
	f.asleep.Store(false)
	return nil
}

func newSleepyHarness(t *testing.T, cfg Config) (*harness, *sleepyFake) {
	t.Helper()
	h := newHarnessConfig(t, cfg)
	f := &sleepyFake{fakeBackend: h.fake}
	f.asleep.Store(true)
	h.srv.SetBackend(f)
	return h, f
}

func TestReadOnlyRoutesLeaveTheModelAsleep(t *testing.T) {
	h, f := newSleepyHarness(t, Config{Alias: "stories260K", Metrics: true, APIKeys: []string{"k"}})
	auth := http.Header{"Authorization": {"Bearer k"}}
	for _, r := range []struct{ method, path string }{
		{"GET", "/health"}, {"GET", "/v1/health"}, {"GET", "/models"}, {"GET", "/v1/models"}, {"GET", "/api/tags"},
		{"GET", "/props"}, {"GET", "/metrics"}, {"GET", "/v1/streams?conversation_id=x"},
		{"GET", "/no/such/route"}, // 404: no route, nothing to wake for
	} {
		rec := h.doWith(t, r.method, r.path, "", auth)
		if rec.Code >= 500 {
			t.Errorf("%s %s: %d %s", r.method, r.path, rec.Code, rec.Body)
		}
	}
	// A request without the key is refused before it can wake anything.
	if rec := h.do(t, "POST", "/tokenize", `{"content":"hi"}`); rec.Code != http.StatusUnauthorized {
		t.Errorf("no key: %d", rec.Code)
	}
	if n := f.wakes.Load(); n != 0 || !f.Sleeping() {
		t.Fatalf("read-only routes woke the model: %d wakes, sleeping %v", n, f.Sleeping())
	}
	rec := h.doWith(t, "GET", "/props", "", auth)
	if v := lookup(t, decodeJSON(t, rec.Body.Bytes()), "is_sleeping"); v != true {
		t.Errorf("/props is_sleeping %v asleep, want true", v)
	}

	rec = h.doWith(t, "POST", "/tokenize", `{"content":"hi"}`, auth)
	if rec.Code != http.StatusOK || f.wakes.Load() != 1 || f.Sleeping() {
		t.Fatalf("/tokenize asleep: %d %s, %d wakes, sleeping %v; want 200 after one wake", rec.Code, rec.Body, f.wakes.Load(), f.Sleeping())
	}
	rec = h.doWith(t, "GET", "/props", "", auth)
	if v := lookup(t, decodeJSON(t, rec.Body.Bytes()), "is_sleeping"); v != false {
		t.Errorf("/props is_sleeping %v awake, want false", v)
	}
	// Awake, nothing calls Wake again.
	h.doWith(t, "POST", "/completion", `{"prompt":"Once","n_predict":2}`, auth)
	if n := f.wakes.Load(); n != 1 {
		t.Errorf("%d wakes, want 1", n)
	}
}

func TestWakeFailureAnswers500(t *testing.T) {
	h, f := newSleepyHarness(t, Config{Alias: "stories260K"})
	f.wakeErr = errors.New("load stories260K.gguf: out of device memory")
	rec := h.do(t, "POST", "/completion", `{"prompt":"Once","n_predict":2}`)
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	msg, _ := lookup(t, decodeJSON(t, rec.Body.Bytes()), "error.message").(string)
	if !strings.Contains(msg, "could not be loaded again after sleeping") || !strings.Contains(msg, "out of device memory") {
		t.Errorf("message %q", msg)
	}
	if rec := h.do(t, "GET", "/health", ""); rec.Code != http.StatusOK {
		t.Errorf("/health after a failed wake: %d", rec.Code)
	}
}

// sleepingServer serves stories260K with a short idle timeout and metrics on.
func sleepingServer(t *testing.T) (string, *engine.Engine) {
	t.Helper()
	e := enginetest.LoadConfig(t, engine.Config{
		ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 512, Slots: 1,
		SleepIdle: 300 * time.Millisecond,
	})
	srv := New(Config{Alias: "stories260K", Metrics: true}, testLogger())
	t.Cleanup(srv.Close)
	srv.SetBackend(e)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL, e
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// propsSleeping reads /props' is_sleeping.
func propsSleeping(t *testing.T, url string) bool {
	t.Helper()
	code, body := get(t, url+"/props")
	var p struct {
		IsSleeping *bool `json:"is_sleeping"`
	}
	if err := json.Unmarshal([]byte(body), &p); code != http.StatusOK || err != nil || p.IsSleeping == nil {
		t.Fatalf("/props: %d %s (%v)", code, body, err)
	}
	return *p.IsSleeping
}

// metricValue reads an unlabelled series from /metrics text.
func metricValue(t *testing.T, text, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

func TestServerSleepsAndACompletionWakesIt(t *testing.T) {
	url, e := sleepingServer(t)
	const body = `{"prompt":"Once upon a time","n_predict":16,"temperature":0}`
	code, first := post(t, url+"/completion", body)
	if code != http.StatusOK {
		t.Fatalf("completion: %d %s", code, first)
	}
	var before struct{ Content string }
	if err := json.Unmarshal(first, &before); err != nil || before.Content == "" {
		t.Fatalf("completion %s (%v)", first, err)
	}

	for deadline := time.Now().Add(10 * time.Second); !propsSleeping(t, url); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("/props never said is_sleeping")
		}
	}
	if !e.Sleeping() {
		t.Fatal("/props says sleeping, the engine is awake")
	}
	if code, body := get(t, url+"/health"); code != http.StatusOK || body != `{"status":"ok"}` {
		t.Errorf("/health asleep: %d %s", code, body)
	}
	if code, body := get(t, url+"/v1/models"); code != http.StatusOK || !strings.Contains(body, `"id":"stories260K"`) {
		t.Errorf("/v1/models asleep: %d %s", code, body)
	}
	// The first scrape reports the last generation's throughput, later ones an empty window,
	// and a sleeping server's scrapes read the same whatever polled it meanwhile.
	_, m1 := get(t, url+"/metrics")
	if v := metricValue(t, m1, "llamacpp:predicted_tokens_seconds"); v <= 0 {
		t.Errorf("first scrape asleep: predicted_tokens_seconds %v, want > 0", v)
	}
	if v := metricValue(t, m1, "llamacpp:tokens_predicted_total"); v != 16 {
		t.Errorf("tokens_predicted_total %v asleep, want 16", v)
	}
	_, m2 := get(t, url+"/metrics")
	if v := metricValue(t, m2, "llamacpp:predicted_tokens_seconds"); v != 0 {
		t.Errorf("second scrape asleep: predicted_tokens_seconds %v, want 0", v)
	}
	propsSleeping(t, url)
	get(t, url+"/health")
	if _, m3 := get(t, url+"/metrics"); m3 != m2 {
		t.Errorf("scrapes of a sleeping server differ:\n%s\n---\n%s", m2, m3)
	}
	if !e.Sleeping() || !propsSleeping(t, url) {
		t.Fatal("read-only routes woke the engine")
	}

	code, second := post(t, url+"/completion", body)
	var after struct{ Content string }
	if err := json.Unmarshal(second, &after); code != http.StatusOK || err != nil {
		t.Fatalf("completion after sleeping: %d %s", code, second)
	}
	if after.Content != before.Content {
		t.Errorf("after waking: %q, before sleeping: %q", after.Content, before.Content)
	}
	if propsSleeping(t, url) || e.Sleeping() {
		t.Error("still sleeping after a completion")
	}
}

func TestTokenizeWakesTheServer(t *testing.T) {
	url, e := sleepingServer(t)
	for deadline := time.Now().Add(10 * time.Second); !e.Sleeping(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not fall asleep")
		}
	}
	code, body := post(t, url+"/tokenize", `{"content":"Hello"}`)
	if code != http.StatusOK || !strings.HasPrefix(string(body), `{"tokens":[`) {
		t.Fatalf("/tokenize: %d %s", code, body)
	}
	if propsSleeping(t, url) {
		t.Error("/tokenize left the server asleep (llama-server wakes for it)")
	}
}
