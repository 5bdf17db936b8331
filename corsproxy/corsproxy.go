// Package corsproxy is llama-server's /cors-proxy (--ui-mcp-proxy): the web UI reaches MCP
// servers and other hosts that do not allow its origin through the server. Only the headers
// the UI names with the x-llama-server-proxy-header- prefix go to the target, never the
// request's own Authorization, API key, cookies or proxy credentials.
package corsproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/internal/apijson"
)

// HeaderPrefix marks a request header to send to the target, without the prefix.
const HeaderPrefix = "x-llama-server-proxy-header-"

// timeout bounds a proxied exchange (llama-server's ten minutes: MCP streams run long).
const timeout = 10 * time.Minute

// dropped are the target's response headers not passed back: the connection's own, and its
// CORS headers (the server's CORS policy applies to the answer).
var dropped = map[string]bool{"Server": true, "Transfer-Encoding": true, "Content-Length": true, "Keep-Alive": true, "Connection": true}

// Handler serves GET and POST /cors-proxy?url=TARGET; when off it answers 403.
func Handler(on bool) http.Handler {
	client := &http.Client{Timeout: timeout}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !on {
			apijson.Disabled(w)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			w.Header().Set("Allow", "GET, POST")
			apijson.Error(w, http.StatusMethodNotAllowed, "invalid_request_error", "the proxy takes GET and POST")
			return
		}
		target, err := parseTarget(r.URL.Query().Get("url"))
		if err != nil {
			apijson.Error(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
		var body io.Reader
		if r.Method == http.MethodPost {
			body = r.Body
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), body)
		if err != nil {
			apijson.Error(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
		for name, values := range r.Header {
			h := strings.ToLower(name)
			if rest, ok := strings.CutPrefix(h, HeaderPrefix); ok && rest != "" {
				for _, v := range values {
					out.Header.Add(rest, v)
				}
			}
		}
		if out.Header.Get("Content-Type") == "" && r.Header.Get("Content-Type") != "" && body != nil {
			out.Header.Set("Content-Type", r.Header.Get("Content-Type"))
		}
		if out.Header.Get("User-Agent") == "" {
			out.Header.Set("User-Agent", "wgpu-llama-cors-proxy")
		}
		resp, err := client.Do(out)
		if err != nil {
			apijson.Error(w, http.StatusBadGateway, "server_error", "proxy error: "+err.Error())
			return
		}
		defer resp.Body.Close()
		for name, values := range resp.Header {
			if dropped[name] || strings.HasPrefix(name, "Access-Control-") {
				continue
			}
			w.Header()[name] = values
		}
		w.WriteHeader(resp.StatusCode)
		copyFlushing(w, resp.Body)
	})
}

// parseTarget checks the url parameter: an absolute http or https URL, without credentials.
func parseTarget(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("missing url parameter: /cors-proxy?url=http(s)://host/path")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid target URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("unsupported URL scheme in target URL: %q (http or https)", u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("invalid target URL: missing host")
	}
	if u.User != nil {
		return nil, fmt.Errorf("authentication in target URL is not supported")
	}
	if u.Path == "" {
		u.Path = "/"
	}
	return u, nil
}

// copyFlushing copies the target's body, flushing each piece: an event stream must arrive as
// it is written.
func copyFlushing(w http.ResponseWriter, body io.Reader) {
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
