package server

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

func newFakeServer(t *testing.T, cfg Config) (*httptest.Server, *fakeBackend) {
	t.Helper()
	if cfg.Alias == "" {
		cfg.Alias = "stories260K"
	}
	fb := newFakeBackend(t)
	srv := New(cfg, testLogger())
	srv.SetBackend(fb)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, fb
}

// TestPropsMatchesCapture compares GET /props with llama-server's: every key with the same
// type, and the values that do not depend on the build.
func TestPropsMatchesCapture(t *testing.T) {
	defaults := engine.DefaultParams()
	defaults.Seed = 42
	ts, _ := newFakeServer(t, Config{Metrics: true, Defaults: &defaults, SystemFingerprint: "b10587-3f545becc"})
	c := loadCapture(t, "props")
	status, h, body := do(t, "GET", ts.URL+"/props", "", nil)
	if status != http.StatusOK || h.Get("Content-Type") != c.header.Get("Content-Type") {
		t.Fatalf("%d %s: %s", status, h.Get("Content-Type"), body)
	}
	want, got := decodeAny(t, c.respBody), decodeAny(t, []byte(body))
	compareShape(t, "props", want, got)
	for _, path := range []string{
		"default_generation_settings.params", "model_alias", "modalities", "endpoint_slots",
		"endpoint_props", "endpoint_metrics", "ui_settings", "chat_template", "chat_template_caps",
		"bos_token", "eos_token", "build_info", "is_sleeping", "cors_proxy_enabled", "total_slots",
	} {
		if w, g := mustMarshal(t, lookup(t, want, path)), mustMarshal(t, lookup(t, got, path)); string(w) != string(g) {
			t.Errorf("%s = %s, llama-server has %s", path, g, w)
		}
	}
	if n := lookup(t, got, "default_generation_settings.n_ctx"); n != float64(256) {
		t.Errorf("n_ctx %v, want the slot context 256", n)
	}
	if m := lookup(t, got, "media_marker").(string); !regexp.MustCompile(`^<__media_[A-Za-z0-9]{32}__>$`).MatchString(m) {
		t.Errorf("media_marker %q", m)
	}
}

func TestPostProps(t *testing.T) {
	ts, _ := newFakeServer(t, Config{})
	const off = `{"error":{"code":501,"message":"This server does not support changing global properties. Start it with ` + "`--props`" + `","type":"not_supported_error"}}`
	if status, _, body := do(t, "POST", ts.URL+"/props", `{"n_ctx": 4}`, nil); status != 501 || body != off {
		t.Errorf("POST /props without --props: %d %s", status, body)
	}
	ts, _ = newFakeServer(t, Config{Props: true})
	for _, body := range []string{`{"anything": 1}`, ``} {
		if status, _, got := do(t, "POST", ts.URL+"/props", body, nil); status != 200 || got != `{"success":true}` {
			t.Errorf("POST /props %q with --props: %d %s", body, status, got)
		}
	}
	if status, _, _ := do(t, "GET", ts.URL+"/props", "", nil); status != 200 {
		t.Errorf("GET /props: %d", status)
	}
}

// TestServerDefaultsApply: requests without sampling fields take the configured defaults (the
// CLI's -n, --temp, --top-k, --top-p, --min-p, --seed), and fields they set still win.
func TestServerDefaultsApply(t *testing.T) {
	d := engine.DefaultParams()
	d.NPredict, d.Temperature, d.TopK, d.TopP, d.MinP, d.Seed = 3, 0.25, 7, 0.5, 0.2, 99
	ts, fb := newFakeServer(t, Config{Defaults: &d})
	if status, _, body := do(t, "POST", ts.URL+"/completion", `{"prompt":"hi"}`, nil); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	p := fb.lastTask(t).Params
	if p.NPredict != 3 || p.Temperature != 0.25 || p.TopK != 7 || p.TopP != 0.5 || p.MinP != 0.2 || p.Seed != 99 {
		t.Errorf("params %+v, want the server defaults", p)
	}
	if status, _, body := do(t, "POST", ts.URL+"/completion", `{"prompt":"hi","n_predict":2,"temperature":0,"seed":5,"stop":["x"]}`, nil); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	p = fb.lastTask(t).Params
	if p.NPredict != 2 || p.Temperature != 0 || p.Seed != 5 || p.TopK != 7 {
		t.Errorf("params %+v, want the request's fields over the defaults", p)
	}
	if d.Stop != nil {
		t.Errorf("a request's stop strings leaked into the defaults: %q", d.Stop)
	}
}
