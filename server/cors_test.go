package server

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// corsHeaders are the CORS headers of a response, absent ones left out, so a test states
// exactly what is sent.
func corsHeaders(h http.Header) map[string][]string {
	got := map[string][]string{}
	for _, k := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials",
		"Access-Control-Allow-Methods", "Access-Control-Allow-Headers", "Vary"} {
		if v, ok := h[k]; ok {
			got[k] = v
		}
	}
	return got
}

// TestCORSPolicies pins the exact headers of each --cors-origins mode for allowed, refused and
// absent origins, on preflights and on ordinary requests.
func TestCORSPolicies(t *testing.T) {
	preflight := func(origin string, extra map[string][]string) map[string][]string {
		m := map[string][]string{
			"Access-Control-Allow-Credentials": {"true"},
			"Access-Control-Allow-Methods":     {"GET, POST, DELETE, OPTIONS"},
			"Access-Control-Allow-Headers":     {"*"},
		}
		if origin != "" {
			m["Access-Control-Allow-Origin"] = []string{origin}
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	vary := map[string][]string{"Vary": {"Origin"}}
	tests := []struct {
		name   string
		cors   CORS
		method string
		origin string
		want   map[string][]string
	}{
		// Default (*, with credentials): any origin is echoed, since browsers refuse a literal
		// * with credentials; no Origin gives no header rather than an empty one.
		{"default echoes origin", CORS{}, "OPTIONS", "web.mydomain.fr", preflight("web.mydomain.fr", vary)},
		{"default echoes bare localhost", CORS{}, "OPTIONS", "localhost", preflight("localhost", vary)},
		{"default without origin", CORS{}, "GET", "", vary},
		{"default GET", CORS{}, "GET", "http://a.test", map[string][]string{"Access-Control-Allow-Origin": {"http://a.test"}, "Vary": {"Origin"}}},
		{"* without credentials", CORS{Origins: "*", NoCredentials: true}, "OPTIONS", "http://a.test", map[string][]string{
			"Access-Control-Allow-Origin": {"*"}, "Access-Control-Allow-Credentials": {"false"},
			"Access-Control-Allow-Methods": {"GET, POST, DELETE, OPTIONS"}, "Access-Control-Allow-Headers": {"*"}}},

		{"localhost", CORS{Origins: "localhost"}, "OPTIONS", "http://localhost", preflight("http://localhost", vary)},
		{"localhost port", CORS{Origins: "localhost"}, "OPTIONS", "http://localhost:8080", preflight("http://localhost:8080", vary)},
		{"127.0.0.1 port", CORS{Origins: "localhost"}, "OPTIONS", "http://127.0.0.1:3000", preflight("http://127.0.0.1:3000", vary)},
		{"::1", CORS{Origins: "localhost"}, "OPTIONS", "http://[::1]", preflight("http://[::1]", vary)},
		{"::1 port https", CORS{Origins: "localhost"}, "OPTIONS", "https://[::1]:3000", preflight("https://[::1]:3000", vary)},
		{"localhost.evil.com", CORS{Origins: "localhost"}, "OPTIONS", "http://localhost.evil.com", preflight("", vary)},
		{"notlocalhost", CORS{Origins: "localhost"}, "OPTIONS", "http://notlocalhost", preflight("", vary)},
		{"evil.com", CORS{Origins: "localhost"}, "OPTIONS", "http://evil.com", preflight("", vary)},
		{"bare localhost is no origin URL", CORS{Origins: "localhost"}, "OPTIONS", "localhost", preflight("", vary)},
		{"localhost GET refused", CORS{Origins: "localhost"}, "GET", "http://evil.com", vary},

		{"one origin is sent as configured", CORS{Origins: "https://ui.example"}, "GET", "http://other.test",
			map[string][]string{"Access-Control-Allow-Origin": {"https://ui.example"}}},
		{"list reflects a listed origin", CORS{Origins: "https://a.test, https://b.test"}, "GET", "https://b.test",
			map[string][]string{"Access-Control-Allow-Origin": {"https://b.test"}, "Vary": {"Origin"}}},
		{"list refuses others", CORS{Origins: "https://a.test,https://b.test"}, "GET", "https://c.test", vary},

		{"custom methods and headers", CORS{Methods: "GET, POST", Headers: "Authorization, Content-Type"}, "OPTIONS", "http://a.test",
			map[string][]string{"Access-Control-Allow-Origin": {"http://a.test"}, "Access-Control-Allow-Credentials": {"true"},
				"Access-Control-Allow-Methods": {"GET, POST"}, "Access-Control-Allow-Headers": {"Authorization, Content-Type"}, "Vary": {"Origin"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessConfig(t, Config{Alias: "stories260K", CORS: tt.cors})
			req := httptest.NewRequest(tt.method, "/completions", nil)
			if tt.method == "GET" {
				req = httptest.NewRequest("GET", "/health", nil)
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			req.Header.Set("Access-Control-Request-Method", "POST")
			rec := httptest.NewRecorder()
			h.h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d, want 200", rec.Code)
			}
			if got := corsHeaders(rec.Header()); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("headers\n got  %v\n want %v", got, tt.want)
			}
			if tt.method == "OPTIONS" && rec.Body.Len() != 0 {
				t.Errorf("preflight body %q, want empty", rec.Body.String())
			}
		})
	}
}
