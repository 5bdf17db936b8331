package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/server"
)

func TestServeVertex(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	var logs bytes.Buffer
	logger := log.New(&logs)

	srv := server.New(server.Config{}, logger)
	if port, err := serveVertex(srv, 8160, env(nil), logger); port != 8160 || err != nil {
		t.Errorf("without AIP_MODE: port %d, %v", port, err)
	}
	// AIP_HTTP_PORT replaces --port, as in llama-server, and says so; its default is 8080.
	for _, tt := range []struct {
		env  map[string]string
		port int
	}{
		{map[string]string{"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": "9001"}, 9001},
		{map[string]string{"AIP_MODE": "PREDICTION"}, 8080},
	} {
		logs.Reset()
		port, err := serveVertex(server.New(server.Config{}, logger), 8160, env(tt.env), logger)
		if port != tt.port || err != nil || !strings.Contains(logs.String(), "AIP_HTTP_PORT replaces the server port") {
			t.Errorf("%v: port %d, %v; logs %q", tt.env, port, err, logs.String())
		}
	}
	for _, kv := range []map[string]string{
		{"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": "x"},
		{"AIP_MODE": "PREDICTION", "AIP_PREDICT_ROUTE": "completion"},
	} {
		if _, err := serveVertex(server.New(server.Config{}, logger), 8160, env(kv), logger); err == nil {
			t.Errorf("%v: no error", kv)
		}
	}
}
