package server

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// publicPaths answer without an API key, as llama-server's public_endpoints (ollama's
// /api/tags among them) and the web UI's "/".
var publicPaths = map[string]bool{
	"/health":    true,
	"/v1/health": true,
	"/models":    true,
	"/v1/models": true,
	"/api/tags":  true,
	"/":          true,
}

// errInvalidKey is llama-server's answer to a missing or wrong API key.
var errInvalidKey = &apiError{typ: errAuthentication, message: "Invalid API Key"}

// requireKey answers 401 "Invalid API Key" to requests for non-public paths that lack one of
// Config.APIKeys. CORS preflight requests never get here (cors answers them), as browsers send
// them without credentials.
func (s *Server) requireKey(next http.Handler) http.Handler {
	keys := make([][]byte, 0, len(s.cfg.APIKeys))
	for _, k := range s.cfg.APIKeys {
		if k != "" { // an empty key would let requests without one in
			keys = append(keys, []byte(k))
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(keys) == 0 || publicPaths[r.URL.Path] || validKey(keys, requestKey(r)) {
			next.ServeHTTP(w, r)
			return
		}
		s.logger.Warn("unauthorized: Invalid API Key", "path", r.URL.Path, "remote", r.RemoteAddr)
		writeError(w, errInvalidKey)
	})
}

// requestKey is the key a request presents: the Authorization header (without a "Bearer "
// prefix) or, when that is absent, X-Api-Key (Anthropic's header), as llama-server reads them.
func requestKey(r *http.Request) string {
	key := r.Header.Get("Authorization")
	if key == "" {
		key = r.Header.Get("X-Api-Key")
	}
	return strings.TrimPrefix(key, "Bearer ")
}

// validKey compares key with every accepted key in constant time, so that neither timing nor
// which key matched tells a caller anything but the lengths.
func validKey(keys [][]byte, key string) bool {
	match := 0
	for _, k := range keys {
		match |= subtle.ConstantTimeCompare(k, []byte(key))
	}
	return match == 1
}
