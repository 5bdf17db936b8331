package server

import (
	"net/http"

	"github.com/wgpu-llama/wgpu-llama/corsproxy"
	"github.com/wgpu-llama/wgpu-llama/internal/apijson"
	"github.com/wgpu-llama/wgpu-llama/mcpendpoint"
	"github.com/wgpu-llama/wgpu-llama/tools"
)

// toolRoutes serves the routes that live outside the generated API: GET and POST /tools
// (Config.Tools), /cors-proxy (Config.CORSProxy) and /mcp (Config.MCPEndpoint), each 403 when
// off. They sit after the API key check and before the JSON body checks, which a proxied body
// need not pass.
func (s *Server) toolRoutes(next http.Handler) http.Handler {
	toolsHandler := tools.Handler(s.cfg.Tools, s.logger)
	proxy := corsproxy.Handler(s.cfg.CORSProxy)
	mcpHandler := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { apijson.Disabled(w) }))
	if s.cfg.MCPEndpoint {
		// The model's tools call the API in process, past the checks this request passed.
		api := chain(s.routes(), s.wakeBackend, s.limitBody, s.checkJSONBody, jsonBody)
		mcpHandler = mcpendpoint.New(api, s.cfg.Tools, s.cfg.SystemFingerprint)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/tools":
			toolsHandler.ServeHTTP(w, r)
		case "/cors-proxy":
			proxy.ServeHTTP(w, r)
		case "/mcp":
			mcpHandler.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
