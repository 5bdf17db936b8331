// Package static serves a built single-page web app (the web UI) from a file system: the
// index at "/", the other files at their paths, each with its content type, gzip when the
// client takes it, and caching fit for a bundler's output: files under /assets/ have content
// hashes in their names and are immutable for a year; everything else is revalidated (no-cache)
// against an ETag, so a new build shows on the next load.
package static

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// VersionPath answers the bundle's version, {"version": "..."}: a hash of every file, which
// changes with each build (llama-server's SvelteKit UI serves the same path).
const VersionPath = "/_app/version.json"

// Handler serves the files of one bundle.
type Handler struct {
	files fs.FS

	mu    sync.Mutex
	cache map[string]*entry // by file name, revalidated by size and modification time
}

// entry is a file as served: its bytes, their gzip (nil when it does not pay) and its ETag.
type entry struct {
	size    int64
	modTime time.Time
	body    []byte
	gz      []byte
	etag    string
	ctype   string
}

// New returns a handler for the bundle in files (index.html at its root).
func New(files fs.FS) *Handler {
	return &Handler{files: files, cache: map[string]*entry{}}
}

// Has reports whether the handler serves urlPath: "/" (when the bundle has an index), a file
// of the bundle, or VersionPath. Directories are not served.
func (h *Handler) Has(urlPath string) bool {
	_, err := h.lookup(urlPath)
	return err == nil
}

// lookup returns the entry served at urlPath, or an error (fs.ErrNotExist for paths the bundle
// does not hold).
func (h *Handler) lookup(urlPath string) (*entry, error) {
	if urlPath == VersionPath {
		return h.version()
	}
	name, ok := fileName(urlPath)
	if !ok {
		return nil, fs.ErrNotExist
	}
	return h.load(name)
}

// fileName maps a URL path to a file name of the bundle: "/" to index.html, others without the
// leading slash; paths that are not clean (dot segments, doubled slashes) are refused.
func fileName(urlPath string) (string, bool) {
	if urlPath == "/" {
		return "index.html", true
	}
	name := strings.TrimPrefix(urlPath, "/")
	if name == "" || path.Clean(urlPath) != urlPath || !fs.ValidPath(name) {
		return "", false
	}
	return name, true
}

// Wrap serves GET and HEAD of the bundle's paths itself and hands every other request to
// next. Servers put it before their API key check: the app's own files need none (llama-server:
// "/", "/sw.js", "/manifest.webmanifest", "/_app/version.json"); the app sends its key with its
// API requests. A nil handler (no UI) wraps nothing.
func (h *Handler) Wrap(next http.Handler) http.Handler {
	if h == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			if e, err := h.lookup(r.URL.Path); err == nil {
				h.serve(w, r, e)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP answers GET and HEAD for the bundle's paths (405 for other methods); a path that
// Has does not know answers 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	e, err := h.lookup(r.URL.Path)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	h.serve(w, r, e)
}

// serve writes e as the answer to r (a GET or HEAD of its path): caching and encoding headers,
// 304 for a matching If-None-Match, else the body (gzipped when the client takes it).
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, e *entry) {
	hdr := w.Header()
	hdr.Set("Content-Type", e.ctype)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("ETag", e.etag)
	if strings.HasPrefix(r.URL.Path, "/assets/") {
		hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hdr.Set("Cache-Control", "no-cache")
	}
	if e.gz != nil {
		hdr.Add("Vary", "Accept-Encoding")
	}
	if etagMatches(r.Header.Get("If-None-Match"), e.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := e.body
	if e.gz != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = e.gz
		hdr.Set("Content-Encoding", "gzip")
	}
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// load returns the file's entry, read (and compressed) again only when its size or
// modification time changed: once for an embedded bundle, after each rebuild for a directory.
func (h *Handler) load(name string) (*entry, error) {
	st, err := fs.Stat(h.files, name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fs.ErrNotExist
	}
	h.mu.Lock()
	e := h.cache[name]
	h.mu.Unlock()
	if e != nil && e.size == st.Size() && e.modTime.Equal(st.ModTime()) {
		return e, nil
	}
	body, err := fs.ReadFile(h.files, name)
	if err != nil {
		return nil, err
	}
	e = newEntry(body, contentType(name))
	e.size, e.modTime = st.Size(), st.ModTime()
	h.mu.Lock()
	h.cache[name] = e
	h.mu.Unlock()
	return e, nil
}

// version builds VersionPath's answer from the hashes of all the bundle's files.
func (h *Handler) version() (*entry, error) {
	var names []string
	err := fs.WalkDir(h.files, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	sum := sha256.New()
	for _, n := range names {
		e, err := h.load(n)
		if err != nil {
			return nil, err
		}
		sum.Write([]byte(n + "\x00" + e.etag + "\x00"))
	}
	body, _ := json.Marshal(map[string]string{"version": hex.EncodeToString(sum.Sum(nil))[:16]})
	return newEntry(body, "application/json"), nil
}

// newEntry hashes body for its ETag and gzips it when that makes it smaller by a tenth.
func newEntry(body []byte, ctype string) *entry {
	sum := sha256.Sum256(body)
	e := &entry{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	if len(body) >= 512 && compressible(ctype) {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(body)
		_ = zw.Close()
		if buf.Len() < len(body)*9/10 {
			e.gz = buf.Bytes()
		}
	}
	return e
}

// contentTypes are the types the bundle's files need whatever the system's MIME tables say.
var contentTypes = map[string]string{
	".html":        "text/html; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".mjs":         "text/javascript; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".json":        "application/json",
	".webmanifest": "application/manifest+json",
	".svg":         "image/svg+xml",
	".png":         "image/png",
	".ico":         "image/x-icon",
	".woff2":       "font/woff2",
	".woff":        "font/woff",
	".ttf":         "font/ttf",
	".txt":         "text/plain; charset=utf-8",
	".map":         "application/json",
	".wasm":        "application/wasm",
}

func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := contentTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

// compressible says whether gzip can shrink a type (already compressed images and fonts not).
func compressible(ctype string) bool {
	return strings.HasPrefix(ctype, "text/") || strings.HasPrefix(ctype, "application/json") ||
		strings.HasPrefix(ctype, "application/manifest+json") || ctype == "image/svg+xml" ||
		ctype == "application/wasm" || ctype == "font/ttf"
}

// acceptsGzip reads an Accept-Encoding header: gzip listed without q=0.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// etagMatches reads an If-None-Match header: "*" or a list holding etag (weak or strong).
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// LoadingPage is what "/" shows while the model loads (with status 503, as llama-server): it
// polls /health and reloads into the app when the server is ready.
//
//go:embed loading.html
var LoadingPage []byte
