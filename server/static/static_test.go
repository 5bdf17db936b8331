package static

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

var bundle = fstest.MapFS{
	"index.html":            {Data: []byte("<!doctype html><title>t</title>" + strings.Repeat("<p>x</p>", 200))},
	"assets/app-3f2a.js":    {Data: []byte(strings.Repeat("console.log('hi');\n", 100))},
	"assets/app-3f2a.css":   {Data: []byte("body{color:red}")},
	"assets/font.woff2":     {Data: bytes.Repeat([]byte{0x77}, 2000)},
	"manifest.webmanifest":  {Data: []byte(`{"name":"x"}`)},
	"sw.js":                 {Data: []byte("self.addEventListener('fetch', () => {});")},
	"icon.svg":              {Data: []byte("<svg/>")},
	"nested/dir/keep.txt":   {Data: []byte("k")},
	"assets/unused.unknown": {Data: []byte("?")},
}

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestServesFilesWithTypesAndCaching(t *testing.T) {
	h := New(bundle)
	for _, c := range []struct{ path, ctype, cache string }{
		{"/", "text/html; charset=utf-8", "no-cache"},
		{"/index.html", "text/html; charset=utf-8", "no-cache"},
		{"/assets/app-3f2a.js", "text/javascript; charset=utf-8", "public, max-age=31536000, immutable"},
		{"/assets/app-3f2a.css", "text/css; charset=utf-8", "public, max-age=31536000, immutable"},
		{"/assets/font.woff2", "font/woff2", "public, max-age=31536000, immutable"},
		{"/manifest.webmanifest", "application/manifest+json", "no-cache"},
		{"/sw.js", "text/javascript; charset=utf-8", "no-cache"},
		{"/icon.svg", "image/svg+xml", "no-cache"},
		{"/assets/unused.unknown", "application/octet-stream", "public, max-age=31536000, immutable"},
	} {
		if !h.Has(c.path) {
			t.Errorf("Has(%q) = false", c.path)
		}
		rec := get(t, h, http.MethodGet, c.path, nil)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != c.ctype || rec.Header().Get("Cache-Control") != c.cache {
			t.Errorf("%s: %d %q %q, want 200 %q %q", c.path, rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"), c.ctype, c.cache)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", c.path)
		}
	}
	want, _ := bundle.ReadFile("assets/app-3f2a.js")
	if rec := get(t, h, http.MethodGet, "/assets/app-3f2a.js", nil); !bytes.Equal(rec.Body.Bytes(), want) || rec.Header().Get("Content-Length") != "1900" {
		t.Errorf("plain body: %d bytes, Content-Length %q", rec.Body.Len(), rec.Header().Get("Content-Length"))
	}
}

func TestUnknownAndUncleanPaths(t *testing.T) {
	h := New(bundle)
	for _, p := range []string{"/missing.js", "/assets", "/assets/", "/nested/dir", "/../index.html", "/assets/../index.html", "//index.html", "/health", "/index.html/"} {
		if h.Has(p) {
			t.Errorf("Has(%q) = true", p)
		}
		if rec := get(t, h, http.MethodGet, p, nil); rec.Code != http.StatusNotFound {
			t.Errorf("GET %q: %d, want 404", p, rec.Code)
		}
	}
	if rec := get(t, h, http.MethodPost, "/", nil); rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}

func TestGzipAndConditionalRequests(t *testing.T) {
	h := New(bundle)
	rec := get(t, h, http.MethodGet, "/assets/app-3f2a.js", map[string]string{"Accept-Encoding": "br, gzip;q=0.8"})
	if rec.Header().Get("Content-Encoding") != "gzip" || rec.Header().Get("Vary") != "Accept-Encoding" {
		t.Fatalf("no gzip: %v", rec.Header())
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if want, _ := bundle.ReadFile("assets/app-3f2a.js"); !bytes.Equal(plain, want) {
		t.Error("gzip body does not decompress to the file")
	}
	if rec := get(t, h, http.MethodGet, "/assets/app-3f2a.js", map[string]string{"Accept-Encoding": "gzip;q=0"}); rec.Header().Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 got gzip")
	}
	// Too small to gain, or already compressed: never gzipped.
	for _, p := range []string{"/assets/app-3f2a.css", "/assets/font.woff2"} {
		if rec := get(t, h, http.MethodGet, p, map[string]string{"Accept-Encoding": "gzip"}); rec.Header().Get("Content-Encoding") != "" || rec.Header().Get("Vary") != "" {
			t.Errorf("%s gzipped", p)
		}
	}
	etag := rec.Header().Get("ETag")
	if !strings.HasPrefix(etag, `"`) || len(etag) != 18 {
		t.Fatalf("ETag %q", etag)
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		if rec := get(t, h, http.MethodGet, "/assets/app-3f2a.js", map[string]string{"If-None-Match": inm}); rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
			t.Errorf("If-None-Match %s: %d", inm, rec.Code)
		}
	}
	if rec := get(t, h, http.MethodGet, "/assets/app-3f2a.js", map[string]string{"If-None-Match": `"other"`}); rec.Code != 200 {
		t.Errorf("stale If-None-Match: %d", rec.Code)
	}
	if rec := get(t, h, http.MethodHead, "/", nil); rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") == "" {
		t.Errorf("HEAD /: %d, %d bytes, Content-Length %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
	}
}

func TestVersionChangesWithTheBundle(t *testing.T) {
	v1 := get(t, New(bundle), http.MethodGet, VersionPath, nil)
	if v1.Code != 200 || v1.Header().Get("Content-Type") != "application/json" || !strings.HasPrefix(v1.Body.String(), `{"version":"`) {
		t.Fatalf("%d %q %s", v1.Code, v1.Header().Get("Content-Type"), v1.Body)
	}
	changed := fstest.MapFS{}
	for k, v := range bundle {
		changed[k] = v
	}
	changed["sw.js"] = &fstest.MapFile{Data: []byte("// new")}
	if v2 := get(t, New(changed), http.MethodGet, VersionPath, nil); v2.Body.String() == v1.Body.String() {
		t.Errorf("version unchanged after a file changed: %s", v2.Body)
	}
}

// A directory bundle (--path) is read again after it changes.
func TestDirectoryRebuildIsServed(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "index.html")
	if err := os.WriteFile(file, []byte("<!doctype html>one"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := New(os.DirFS(dir))
	first := get(t, h, http.MethodGet, "/", nil)
	if err := os.WriteFile(file, []byte("<!doctype html>two!"), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(file, later, later); err != nil {
		t.Fatal(err)
	}
	second := get(t, h, http.MethodGet, "/", nil)
	if first.Body.String() != "<!doctype html>one" || second.Body.String() != "<!doctype html>two!" || first.Header().Get("ETag") == second.Header().Get("ETag") {
		t.Errorf("served %q then %q", first.Body, second.Body)
	}
}

func TestLoadingPagePollsHealth(t *testing.T) {
	if !bytes.Contains(LoadingPage, []byte("<!doctype html>")) || !bytes.Contains(LoadingPage, []byte(`fetch("/health"`)) {
		t.Error("the loading page must be HTML that polls /health")
	}
}

// Wrap serves the bundle's GET and HEAD and passes the rest on; a nil handler passes all.
func TestWrap(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := New(bundle).Wrap(next)
	for _, c := range []struct {
		method, path string
		want         int
	}{{"GET", "/", 200}, {"HEAD", "/sw.js", 200}, {"GET", VersionPath, 200}, {"POST", "/", http.StatusTeapot}, {"GET", "/health", http.StatusTeapot}, {"GET", "/assets/", http.StatusTeapot}} {
		if rec := get(t, h, c.method, c.path, nil); rec.Code != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, rec.Code, c.want)
		}
	}
	var none *Handler
	if rec := get(t, none.Wrap(next), "GET", "/", nil); rec.Code != http.StatusTeapot {
		t.Errorf("nil handler: GET / %d, want next's", rec.Code)
	}
}
