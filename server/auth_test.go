package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
)

// specOperations lists every operation in openapi/openapi.yaml as "METHOD /path", with path
// parameters filled in, so that the API key test covers endpoints added later.
func specOperations(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../openapi/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pathRe := regexp.MustCompile(`^  (/\S*):$`)
	methodRe := regexp.MustCompile(`^    (get|post|put|patch|delete):$`)
	paramRe := regexp.MustCompile(`\{[^}]+\}`)
	var ops []string
	path := ""
	for _, line := range strings.Split(string(data), "\n") {
		if m := pathRe.FindStringSubmatch(line); m != nil {
			path = paramRe.ReplaceAllString(m[1], "0")
		} else if m := methodRe.FindStringSubmatch(line); m != nil && path != "" {
			ops = append(ops, strings.ToUpper(m[1])+" "+path)
		} else if strings.HasPrefix(line, "components:") {
			break
		}
	}
	if len(ops) < 15 {
		t.Fatalf("found only %d operations in the spec: %v", len(ops), ops)
	}
	return ops
}

func newKeyServer(t *testing.T, keys ...string) *httptest.Server {
	t.Helper()
	srv := New(Config{Alias: "stories260K", APIKeys: keys, Metrics: true, Props: true, SlotSavePath: t.TempDir()}, testLogger())
	srv.SetBackend(newFakeBackend(t))
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func do(t *testing.T, method, url, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(data)
}

const invalidKeyBody = `{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}`

// TestAPIKeyRequired: with --api-key, every endpoint but the public ones answers 401 with
// llama-server's body when the key is missing or wrong, and works with it.
func TestAPIKeyRequired(t *testing.T) {
	ts := newKeyServer(t, "key-one", "key-two")
	public := map[string]bool{"GET /health": true, "GET /v1/health": true, "GET /models": true, "GET /v1/models": true, "GET /api/tags": true}
	for _, op := range append(specOperations(t), "GET /nonexistent", "POST /props/x") {
		method, path, _ := strings.Cut(op, " ")
		for name, hdr := range map[string]map[string]string{
			"no key":        nil,
			"wrong key":     {"Authorization": "Bearer key-three"},
			"wrong x-key":   {"X-Api-Key": "key"},
			"key prefix":    {"Authorization": "Bearer key-on"},
			"empty bearer":  {"Authorization": "Bearer "},
			"key elsewhere": {"Cookie": "key-one"},
		} {
			status, h, body := do(t, method, ts.URL+path, "{}", hdr)
			if public[op] {
				if status != http.StatusOK {
					t.Errorf("%s (%s): public endpoint answered %d: %s", op, name, status, body)
				}
				continue
			}
			if status != http.StatusUnauthorized || body != invalidKeyBody {
				t.Errorf("%s (%s): %d %s, want 401 %s", op, name, status, body, invalidKeyBody)
			}
			if ct := h.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("%s: Content-Type %q", op, ct)
			}
		}
	}

	for name, hdr := range map[string]map[string]string{
		"bearer":             {"Authorization": "Bearer key-two"},
		"x-api-key":          {"X-Api-Key": "key-one"},
		"bare authorization": {"Authorization": "key-one"}, // llama-server strips "Bearer " only when present
	} {
		if status, _, body := do(t, "POST", ts.URL+"/tokenize", `{"content":"hi"}`, hdr); status != http.StatusOK {
			t.Errorf("%s: %d %s", name, status, body)
		}
	}
	// Authorization wins over X-Api-Key, as in llama-server.
	if status, _, _ := do(t, "POST", ts.URL+"/tokenize", `{}`, map[string]string{"Authorization": "Bearer nope", "X-Api-Key": "key-one"}); status != http.StatusUnauthorized {
		t.Errorf("a wrong Authorization with a right X-Api-Key: %d, want 401", status)
	}
	// "/" is public (for the web UI); without a UI it is simply not found.
	if status, _, body := do(t, "GET", ts.URL+"/", "", nil); status != http.StatusNotFound {
		t.Errorf("GET / without a key: %d %s, want 404", status, body)
	}
}

// TestCORSPreflightNeedsNoKey: browsers send OPTIONS without credentials; llama-server answers
// it before any check.
func TestCORSPreflightNeedsNoKey(t *testing.T) {
	ts := newKeyServer(t, "secret")
	status, h, body := do(t, "OPTIONS", ts.URL+"/v1/chat/completions", "", map[string]string{
		"Origin": "http://example.com", "Access-Control-Request-Method": "POST"})
	if status != http.StatusOK || body != "" {
		t.Fatalf("preflight: %d %q", status, body)
	}
	want := map[string]string{
		"Access-Control-Allow-Origin":      "http://example.com",
		"Access-Control-Allow-Credentials": "true",
		"Access-Control-Allow-Methods":     "GET, POST, DELETE, OPTIONS",
		"Access-Control-Allow-Headers":     "*",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	// A refused request still carries the CORS origin, so the browser can read the 401.
	_, h, _ = do(t, "GET", ts.URL+"/props", "", map[string]string{"Origin": "http://example.com"})
	if got := h.Get("Access-Control-Allow-Origin"); got != "http://example.com" {
		t.Errorf("401 response: Access-Control-Allow-Origin %q", got)
	}
}

// TestNoKeysConfigured: without --api-key nothing asks for one.
func TestNoKeysConfigured(t *testing.T) {
	ts := newKeyServer(t)
	if status, _, body := do(t, "GET", ts.URL+"/props", "", nil); status != http.StatusOK {
		t.Errorf("GET /props without keys configured: %d %s", status, body)
	}
}

// TestLoadingBeforeKey: while the model loads every request gets 503, key or not, as
// llama-server checks readiness before the key.
func TestLoadingBeforeKey(t *testing.T) {
	srv := New(Config{APIKeys: []string{"k"}}, testLogger())
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	if status, _, body := do(t, "GET", ts.URL+"/props", "", nil); status != http.StatusServiceUnavailable || !strings.Contains(body, "Loading model") {
		t.Errorf("GET /props while loading: %d %s", status, body)
	}
}
