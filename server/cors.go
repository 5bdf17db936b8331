package server

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/charmbracelet/log"
)

// CORS defaults, llama-server's.
const (
	DefaultCORSOrigins = "*"
	DefaultCORSMethods = "GET, POST, DELETE, OPTIONS"
	DefaultCORSHeaders = "*"
)

// CORS is the cross-origin policy of llama-server's --cors-origins, --cors-methods,
// --cors-headers and --cors-credentials. The zero value is llama-server's default: any origin,
// with credentials.
type CORS struct {
	// Origins says which browser origins may read answers: "*" (or "") any, "localhost" only
	// origins whose host is localhost, 127.0.0.1 or ::1 (any scheme and port), else one origin
	// sent as it is, or a comma-separated list of origins, each reflected when it asks.
	Origins string
	// Methods is the preflight's Access-Control-Allow-Methods ("" is DefaultCORSMethods).
	Methods string
	// Headers is the preflight's Access-Control-Allow-Headers ("" is DefaultCORSHeaders).
	Headers string
	// NoCredentials is --no-cors-credentials: the preflight says credentials are not allowed,
	// and Origins "*" is sent as "*" instead of the request's origin.
	NoCredentials bool
}

// allowOrigin is the Access-Control-Allow-Origin for a request from origin ("" when it sent
// none): ok false sends no header, never an empty one. reflects says the answer depends on the
// request's Origin, so caches must key on it (Vary: Origin).
func (c CORS) allowOrigin(origin string) (value string, ok, reflects bool) {
	switch origins := strings.TrimSpace(c.Origins); {
	case origins == "" || origins == "*":
		if c.NoCredentials {
			return "*", true, false
		}
		// A literal "*" is refused by browsers when credentials are allowed: echo the origin.
		return origin, origin != "", true
	case origins == "localhost":
		return origin, origin != "" && originIsLocalhost(origin), true
	case !strings.Contains(origins, ","):
		return origins, true, false // one origin, sent as configured (llama-server's rule)
	default:
		for _, o := range strings.Split(origins, ",") {
			if o = strings.TrimSpace(o); o != "" && o == origin {
				return origin, true, true
			}
		}
		return "", false, true
	}
}

// originIsLocalhost reports whether an Origin header names the local machine: its host is
// localhost, 127.0.0.1 or ::1, whatever the scheme and port. "localhost" alone (no scheme) and
// hosts that merely contain the name (localhost.evil.com, notlocalhost) do not.
func originIsLocalhost(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return false
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// cors sets the CORS headers of every response and answers preflight (OPTIONS) requests for any
// path itself, before the loading and API key checks, as llama-server does (browsers send no
// credentials with a preflight).
func (s *Server) cors(next http.Handler) http.Handler { return CORSHandler(s.cfg.CORS, s.logger, next) }

// CORSHandler is the CORS layer of the server's handler for any other handler (a router's):
// it sets the CORS headers of every response and answers preflight requests itself.
func CORSHandler(c CORS, logger *log.Logger, next http.Handler) http.Handler {
	methods, headers := c.Methods, c.Headers
	if methods == "" {
		methods = DefaultCORSMethods
	}
	if headers == "" {
		headers = DefaultCORSHeaders
	}
	credentials := "true"
	if c.NoCredentials {
		credentials = "false"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Server", "wgpu-llama")
		origin := r.Header.Get("Origin")
		value, ok, reflects := c.allowOrigin(origin)
		if ok {
			h.Set("Access-Control-Allow-Origin", value)
		} else if origin != "" && strings.TrimSpace(c.Origins) == "localhost" {
			logger.Warn("(CORS) skip non-localhost origin", "origin", origin)
		}
		if reflects {
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Credentials", credentials)
			h.Set("Access-Control-Allow-Methods", methods)
			h.Set("Access-Control-Allow-Headers", headers)
			h.Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusOK)
			return
		}
		next.ServeHTTP(w, r)
	})
}
