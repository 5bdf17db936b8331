package cli

import (
	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/server"
)

// serveVertex turns on Google Cloud Vertex AI compatibility when the environment asks for it
// (AIP_MODE=PREDICTION, as llama-server): the predict and health routes, and the port from
// AIP_HTTP_PORT, which replaces port. It returns the port to listen on.
func serveVertex(srv *server.Server, port int, getenv func(string) string, logger *log.Logger) (int, error) {
	v, err := server.VertexFromEnv(getenv)
	if err != nil || v == nil {
		return port, err
	}
	if err := srv.ServeVertex(*v); err != nil {
		return port, err
	}
	if port != v.Port {
		logger.Warn("Google Cloud Vertex AI compat: AIP_HTTP_PORT replaces the server port", "port", port, "AIP_HTTP_PORT", v.Port)
	}
	return v.Port, nil
}
