package corsproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestProxy(t *testing.T) {
	var got http.Header
	var gotBody string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		gotBody = r.Method + " " + r.URL.RequestURI() + " " + string(b)
		switch r.URL.Path {
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Access-Control-Allow-Origin", "*")
			w.Header().Set("Mcp-Session-Id", "abc")
			for i := range 3 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(20 * time.Millisecond)
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"ok":true}`)
		}
	}))
	defer target.Close()
	proxy := httptest.NewServer(Handler(true))
	defer proxy.Close()
	do := func(method, path, body string, header map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, proxy.URL+"/cors-proxy?url="+url.QueryEscape(target.URL+path), strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := do("POST", "/mcp?x=1", `{"jsonrpc":"2.0"}`, map[string]string{
		"Authorization": "Bearer server-key", "X-Api-Key": "server-key", "Cookie": "s=1", "Proxy-Authorization": "Basic x",
		HeaderPrefix + "authorization": "Bearer target-key", HeaderPrefix + "mcp-session-id": "abc", "Content-Type": "application/json",
	})
	if resp.StatusCode != 201 || body != `{"ok":true}` || gotBody != `POST /mcp?x=1 {"jsonrpc":"2.0"}` {
		t.Errorf("POST: %d %s; target saw %s", resp.StatusCode, body, gotBody)
	}
	if got.Get("Authorization") != "Bearer target-key" || got.Get("Mcp-Session-Id") != "abc" || got.Get("X-Api-Key") != "" || got.Get("Cookie") != "" || got.Get("Proxy-Authorization") != "" || got.Get("Content-Type") != "application/json" {
		t.Errorf("the target got headers %v", got)
	}
	if resp, body := do("GET", "/empty", "", nil); resp.StatusCode != 204 || body != "" {
		t.Errorf("no content: %d %q", resp.StatusCode, body)
	}
	resp, body = do("GET", "/events", "", nil)
	if body != "data: 0\n\ndata: 1\n\ndata: 2\n\n" || resp.Header.Get("Mcp-Session-Id") != "abc" || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("events: %q %v", body, resp.Header)
	}
}

func TestProxyRefuses(t *testing.T) {
	for _, c := range []struct {
		on          bool
		method, url string
		code        int
		want        string
	}{
		{false, "GET", "http://127.0.0.1:1/", 403, `{"error":{"message":"this feature is disabled","type":"feature_disabled"}}`},
		{true, "GET", "", 400, `{"error":{"code":400,"message":"missing url parameter: /cors-proxy?url=http(s)://host/path","type":"invalid_request_error"}}`},
		{true, "GET", "file:///etc/passwd", 400, `{"error":{"code":400,"message":"unsupported URL scheme in target URL: \"file\" (http or https)","type":"invalid_request_error"}}`},
		{true, "GET", "http://user:pw@host/", 400, `{"error":{"code":400,"message":"authentication in target URL is not supported","type":"invalid_request_error"}}`},
		{true, "GET", "http:///x", 400, `{"error":{"code":400,"message":"invalid target URL: missing host","type":"invalid_request_error"}}`},
		{true, "DELETE", "http://127.0.0.1:1/", 405, `{"error":{"code":405,"message":"the proxy takes GET and POST","type":"invalid_request_error"}}`},
		{true, "GET", "http://127.0.0.1:1/", 502, ""},
	} {
		req := httptest.NewRequest(c.method, "/cors-proxy?url="+url.QueryEscape(c.url), nil)
		rec := httptest.NewRecorder()
		Handler(c.on).ServeHTTP(rec, req)
		body := strings.TrimSpace(rec.Body.String())
		if rec.Code != c.code || c.want != "" && body != c.want || c.code == 502 && !strings.Contains(body, "proxy error: ") {
			t.Errorf("%v %s %q: %d %s", c.on, c.method, c.url, rec.Code, body)
		}
	}
}
