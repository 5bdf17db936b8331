package server

import (
	"net/http"

	"github.com/wgpu-llama/wgpu-llama/corsproxy"
	"github.com/wgpu-llama/wgpu-llama/tools"
)

// toolRoutes serves the routes that live outside the generated API: GET and POST /tools
// (Config.Tools; 403 without) and /cors-proxy (Config.CORSProxy; 403 without). They sit after
// the API key check and before the JSON body checks, which a proxied body need not pass.
func (s *Server) toolRoutes(next http.Handler) http.Handler {
	toolsHandler := tools.Handler(s.cfg.Tools, s.logger)
	proxy := corsproxy.Handler(s.cfg.CORSProxy)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/tools":
			toolsHandler.ServeHTTP(w, r)
		case "/cors-proxy":
			proxy.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
