package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

var testUI = fstest.MapFS{
	"index.html":           {Data: []byte("<!doctype html><title>ui</title>")},
	"sw.js":                {Data: []byte("self.addEventListener('fetch', () => {});")},
	"manifest.webmanifest": {Data: []byte(`{"name":"wgpu-llama"}`)},
	"assets/app-1a2b.js":   {Data: []byte("console.log(1)")},
}

func newUIServer(t *testing.T, ui fstest.MapFS, ready bool, keys ...string) *httptest.Server {
	t.Helper()
	cfg := Config{Alias: "stories260K", APIKeys: keys}
	if ui != nil {
		cfg.UI = ui
	}
	srv := New(cfg, testLogger())
	if ready {
		srv.SetBackend(newFakeBackend(t))
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// The UI's files answer without the API key (llama-server's test_access_static_assets_without_api_key),
// the API still needs it, and a POST to "/" is not the UI's.
func TestUIFilesNeedNoKey(t *testing.T) {
	ts := newUIServer(t, testUI, true, "secret")
	for _, p := range []string{"/", "/sw.js", "/manifest.webmanifest", "/_app/version.json", "/assets/app-1a2b.js"} {
		code, hdr, body := do(t, http.MethodGet, ts.URL+p, "", nil)
		if code != http.StatusOK || strings.Contains(body, "error") {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
		if p == "/" && (hdr.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(body, "<!doctype html>")) {
			t.Errorf("GET /: %q %q", hdr.Get("Content-Type"), body)
		}
	}
	if code, _, body := do(t, http.MethodGet, ts.URL+"/props", "", nil); code != http.StatusUnauthorized || !strings.Contains(body, "Invalid API Key") {
		t.Errorf("GET /props without the key: %d %s", code, body)
	}
	if code, _, _ := do(t, http.MethodGet, ts.URL+"/props", "", map[string]string{"Authorization": "Bearer secret"}); code != http.StatusOK {
		t.Errorf("GET /props with the key: %d", code)
	}
	if code, _, body := do(t, http.MethodGet, ts.URL+"/missing.js", "", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /missing.js (no UI file, so the API's, which wants the key): %d %s", code, body)
	}
	if code, _, body := do(t, http.MethodGet, ts.URL+"/missing.js", "", map[string]string{"Authorization": "Bearer secret"}); code != http.StatusNotFound || !strings.Contains(body, "File Not Found") {
		t.Errorf("GET /missing.js with the key: %d %s", code, body)
	}
}

// Without a UI (--no-ui) "/" is llama-server's 404.
func TestNoUI(t *testing.T) {
	ts := newUIServer(t, nil, true)
	code, _, body := do(t, http.MethodGet, ts.URL+"/", "", nil)
	if code != http.StatusNotFound || !strings.Contains(body, `"code":404`) {
		t.Errorf("GET / with no UI: %d %s", code, body)
	}
}

// While the model loads, "/" answers 503 with the loading page and the API its JSON error.
func TestUILoadingPage(t *testing.T) {
	ts := newUIServer(t, testUI, false)
	code, hdr, body := do(t, http.MethodGet, ts.URL+"/", "", nil)
	if code != http.StatusServiceUnavailable || hdr.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(body, "Loading model") || !strings.Contains(body, "/health") {
		t.Errorf("GET / while loading: %d %q %.80s", code, hdr.Get("Content-Type"), body)
	}
	code, _, body = do(t, http.MethodGet, ts.URL+"/health", "", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "Loading model") || strings.Contains(body, "<html") {
		t.Errorf("GET /health while loading: %d %s", code, body)
	}
	// Without a UI there is no page: the JSON error.
	ts = newUIServer(t, nil, false)
	if code, _, body := do(t, http.MethodGet, ts.URL+"/", "", nil); code != http.StatusServiceUnavailable || strings.Contains(body, "<html") {
		t.Errorf("GET / while loading, no UI: %d %s", code, body)
	}
}
