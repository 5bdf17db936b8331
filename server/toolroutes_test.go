package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wgpu-llama/wgpu-llama/tools"
)

// A server started without the tool flags answers 403 on each of their routes.
func TestToolRoutesOff(t *testing.T) {
	srv := New(Config{}, testLogger())
	srv.SetBackend(newFakeBackend(t))
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for _, c := range []struct{ method, path string }{{"GET", "/tools"}, {"POST", "/tools"}, {"GET", "/cors-proxy?url=http://127.0.0.1:1/"}, {"POST", "/mcp"}, {"GET", "/mcp"}} {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(`{}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || strings.TrimSpace(string(b)) != `{"error":{"message":"this feature is disabled","type":"feature_disabled"}}` {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
}

// The official SDK's client lists /mcp's tools and calls them: the model's completion equals
// the one POST /completion answers, and a built-in tool runs.
func TestMCPEndpoint(t *testing.T) {
	set, _ := tools.NewSet([]string{"get_info"})
	_, ts := agentServer(t, Config{Tools: set, MCPEndpoint: true})
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	var names []string
	for tool, err := range session.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if strings.Join(names, " ") != "chat complete embed get_info" {
		t.Errorf("tools %v", names)
	}
	textOf := func(res *mcp.CallToolResult, err error) (string, bool) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	got, isErr := textOf(session.CallTool(ctx, &mcp.CallToolParams{Name: "complete", Arguments: map[string]any{"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}}))
	resp, err := http.Post(ts.URL+"/completion", "application/json", strings.NewReader(`{"prompt":"Once upon a time","n_predict":12,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	var direct struct{ Content string }
	json.NewDecoder(resp.Body).Decode(&direct)
	resp.Body.Close()
	if isErr || got == "" || got != direct.Content {
		t.Errorf("complete %q (error %v), POST /completion %q", got, isErr, direct.Content)
	}
	if got, isErr := textOf(session.CallTool(ctx, &mcp.CallToolParams{Name: "chat", Arguments: map[string]any{"message": "Hello", "max_tokens": 8, "temperature": 0}})); isErr || got == "" {
		t.Errorf("chat %q (error %v)", got, isErr)
	}
	if got, isErr := textOf(session.CallTool(ctx, &mcp.CallToolParams{Name: "get_info", Arguments: map[string]any{}})); isErr || !strings.Contains(got, `"os":"`) {
		t.Errorf("get_info %q (error %v)", got, isErr)
	}
	if got, isErr := textOf(session.CallTool(ctx, &mcp.CallToolParams{Name: "complete", Arguments: map[string]any{}})); !isErr || got != "missing prompt" {
		t.Errorf("complete without a prompt: %q (error %v)", got, isErr)
	}
}

// /props tells the web UI whether /tools and /mcp are served: present when on, absent (as in
// llama-server's /props) when off.
func TestPropsToolEndpoints(t *testing.T) {
	set, _ := tools.NewSet([]string{"get_info"})
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "<nil> <nil> false"},
		{Config{Tools: set, MCPEndpoint: true, CORSProxy: true}, "true true true"},
	} {
		srv := New(c.cfg, testLogger())
		srv.SetBackend(newFakeBackend(t))
		ts := httptest.NewServer(srv.Handler())
		resp, err := http.Get(ts.URL + "/props")
		if err != nil {
			t.Fatal(err)
		}
		var props map[string]any
		json.NewDecoder(resp.Body).Decode(&props)
		resp.Body.Close()
		ts.Close()
		if got := fmt.Sprint(props["endpoint_tools"], props["endpoint_mcp"], props["cors_proxy_enabled"]); got != c.want {
			t.Errorf("%+v: endpoint_tools, endpoint_mcp, cors_proxy_enabled = %s, want %s", c.cfg, got, c.want)
		}
	}
}
