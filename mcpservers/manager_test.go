package mcpservers

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wgpu-llama/wgpu-llama/tools"
)

// The test binary is also the MCP server the tests start: with MCPSERVERS_TEST_SERVER set it
// serves echo, sleep and crash over stdio (through the SDK's server) instead of testing.
func TestMain(m *testing.M) {
	if os.Getenv("MCPSERVERS_TEST_SERVER") != "" {
		serveTestServer()
		return
	}
	os.Exit(m.Run())
}

func serveTestServer() {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	type echoIn struct {
		Message string `json:"message" jsonschema:"the message to echo"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo back the input message"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, "echoing", in.Message) // stderr goes to the log
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Message}}}, nil, nil
	})
	type sleepIn struct {
		Seconds float64 `json:"seconds"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep"}, func(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
		time.Sleep(time.Duration(in.Seconds * float64(time.Second))) // deaf to cancellation, as a stuck server
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit at once"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		os.Exit(1)
		return nil, nil, nil
	})
	s.Run(context.Background(), &mcp.StdioTransport{})
}

// testServer is a config that starts the test binary as an MCP server.
func testServer(t *testing.T, name string, timeout time.Duration) Config {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{Name: name, Command: exe, Env: map[string]string{"MCPSERVERS_TEST_SERVER": "1"}, Timeout: timeout}
}

func TestParse(t *testing.T) {
	servers, skipped, err := Parse([]byte(`{"mcpServers": {"b": {"command": "x", "args": ["-y", "pkg"], "env": {"K": "V"}, "cwd": "/tmp", "timeout_ms": 500},
		"a": {"command": "y"}, "remote": {"url": "https://example.com/mcp"}, "empty": {}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]Config{
		{Name: "b", Command: "x", Args: []string{"-y", "pkg"}, Env: map[string]string{"K": "V"}, Dir: "/tmp", Timeout: 500 * time.Millisecond},
		{Name: "a", Command: "y", Timeout: DefaultTimeout},
	})
	if fmt.Sprint(servers) != want {
		t.Errorf("servers %v, want %v", servers, want)
	}
	if fmt.Sprint(skipped) != `[MCP server "remote" has a url, not a command: only stdio servers are supported, skipping MCP server "empty" has no command, skipping]` {
		t.Errorf("skipped %q", skipped)
	}
	for src, want := range map[string]string{
		`not valid json`: "failed to parse MCP config JSON: invalid character 'o' in literal null (expecting 'u')",
		`{"mcpServers": {"a": {"command": "x", "args": [1]}}}`:     `failed to parse MCP config JSON: server "a": json: cannot unmarshal number into Go struct field entry.args of type string`,
		`{"mcpServers": {"a": {"command": "x", "timeout_ms": 0}}}`: `MCP config: server "a": timeout_ms must be positive, not 0`,
		`{"mcpServers": []}`: "failed to parse MCP config JSON: mcpServers: not an object",
	} {
		if _, _, err := Parse([]byte(src)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
	if _, _, err := Load("/nonexistent/path.json", ""); err == nil || !strings.HasPrefix(err.Error(), "failed to open MCP config file: ") {
		t.Errorf("missing file: %v", err)
	}
	servers, warnings, err := Load("", `{"mcpServers": {"a": {"command": "x"}, "a ": {"command": "y"}}}`)
	if err == nil {
		t.Errorf("a name with a space: %v %v", servers, warnings)
	}
}

func call(t *testing.T, tool *tools.Tool, params map[string]any) tools.Result {
	t.Helper()
	res, err := tool.Run(context.Background(), tools.Call{Params: params})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestManager(t *testing.T) {
	logger := log.New(io.Discard)
	m := Start(context.Background(), []Config{testServer(t, "t", 5*time.Second), {Name: "bad", Command: "this_executable_does_not_exist_12345", Timeout: time.Second}}, logger)
	defer m.Close()
	byName := map[string]*tools.Tool{}
	var names []string
	for _, tool := range m.Tools() {
		byName[tool.Name] = tool
		names = append(names, tool.Name)
	}
	if fmt.Sprint(names) != "[t_crash t_echo t_sleep]" {
		t.Fatalf("tools %v", names)
	}
	def := byName["t_echo"].Definition()["function"].(map[string]any)
	params := def["parameters"].(map[string]any)
	if def["description"] != "Echo back the input message" || params["type"] != "object" || fmt.Sprint(params["required"]) != "[message]" || byName["t_echo"].Kind != "mcp" {
		t.Errorf("echo's definition %v", def)
	}
	res := call(t, byName["t_echo"], map[string]any{"message": "hello world"})
	if fmt.Sprint(res["content"]) != "[map[text:echo: hello world type:text]]" || res["isError"] != false {
		t.Errorf("echo: %v", res)
	}
	// Concurrent calls share the one instance.
	var wg sync.WaitGroup
	errs := make(chan string, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := call(t, byName["t_echo"], map[string]any{"message": fmt.Sprint(i)})
			if fmt.Sprint(res["content"]) != fmt.Sprintf("[map[text:echo: %d type:text]]", i) {
				errs <- fmt.Sprint(res)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("concurrent echo: %s", e)
	}
	// A server that exits is started again by the next call.
	if res := call(t, byName["t_crash"], nil); res["error"] == nil {
		t.Errorf("crash answered %v", res)
	}
	if res := call(t, byName["t_echo"], map[string]any{"message": "again"}); fmt.Sprint(res["content"]) != "[map[text:echo: again type:text]]" {
		t.Errorf("after the crash: %v", res)
	}
}

func TestManagerTimeoutAndClose(t *testing.T) {
	m := Start(context.Background(), []Config{testServer(t, "slow", 300*time.Millisecond)}, log.New(io.Discard))
	sleep := m.Tools()[2]
	if sleep.Name != "slow_sleep" {
		t.Fatalf("tool %s", sleep.Name)
	}
	if res := call(t, sleep, map[string]any{"seconds": 5}); res["error"] != "request timed out after 300ms" {
		t.Errorf("timeout: %v", res)
	}
	// Close fails a call in flight, whatever the call's own timeout.
	m2 := Start(context.Background(), []Config{testServer(t, "slow", 30*time.Second)}, log.New(io.Discard))
	done := make(chan tools.Result)
	go func() { done <- call(t, m2.Tools()[2], map[string]any{"seconds": 20}) }()
	time.Sleep(500 * time.Millisecond)
	m2.Close()
	// Had Close not ended it, the call would have answered "slept" after its 20 seconds.
	if res := <-done; res["error"] == nil {
		t.Errorf("the call in flight answered %v", res)
	}
	m.Close()
	if res := call(t, sleep, map[string]any{"seconds": 0}); res["error"] == nil {
		t.Errorf("a call after Close: %v", res)
	}
}
