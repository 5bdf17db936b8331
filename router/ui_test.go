package router

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"
)

// The router serves the web UI as a single server does: its files need no API key, the
// router's endpoints still do, and other paths go on to the router (here: no model named).
func TestRouterServesUI(t *testing.T) {
	ui := fstest.MapFS{
		"index.html": {Data: []byte("<!doctype html><title>ui</title>")},
		"sw.js":      {Data: []byte("self.addEventListener('fetch', () => {});")},
	}
	_, ts := serveRouter(t, Config{Catalog: Catalog{ModelsDir: t.TempDir()}, APIKeys: []string{"sesame"}, UI: ui})
	get := func(path, key string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/", "/sw.js", "/_app/version.json"} {
		if code, body := get(p, ""); code != 200 || strings.Contains(body, `"error"`) {
			t.Errorf("GET %s without a key: %d %s", p, code, body)
		}
	}
	if code, body := get("/", ""); !strings.Contains(body, "<!doctype html>") {
		t.Errorf("GET /: %d %s", code, body)
	}
	if code, _ := get("/slots", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /slots without a key: %d, want 401", code)
	}
	if code, body := get("/slots", "sesame"); code != http.StatusBadRequest || !strings.Contains(body, "model") {
		t.Errorf("GET /slots with the key and no model: %d %s", code, body)
	}
}
