package mcpservers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wgpu-llama/wgpu-llama/internal/procgroup"
	"github.com/wgpu-llama/wgpu-llama/tools"
)

// Timings of the servers' lives.
const (
	// warmupTimeout bounds starting a server and listing its tools at startup.
	warmupTimeout = 10 * time.Second
	// cooldown is how long a server that failed to start is left alone.
	cooldown = 5 * time.Second
	// closeGrace is how long a server gets to exit after its stdin closes, before it is killed.
	closeGrace = 2 * time.Second
)

// protocolVersion is the MCP revision we ask for: the newest whose handshake is initialize.
const protocolVersion = "2025-11-25"

// Manager runs the configured MCP servers.
type Manager struct {
	servers []*server
	logger  *log.Logger
	client  *mcp.Client
	ctx     context.Context // ends at Close: every call in flight fails at once
	cancel  context.CancelFunc
}

// server is one configured MCP server and its running instance, if any.
type server struct {
	cfg   Config
	tools []*mcp.Tool // as listed at startup

	mu      sync.Mutex
	live    *instance
	retryAt time.Time // after a failed start
}

// instance is a started server process and the session with it.
type instance struct {
	session *mcp.ClientSession
	cmd     *exec.Cmd
	done    chan struct{} // closed when the session ends (the process exited or was closed)
}

// Start starts every server once, concurrently, to list its tools, and returns the manager.
// A server that fails is logged and offers no tools; the others are unaffected.
func Start(ctx context.Context, configs []Config, logger *log.Logger) *Manager {
	m := &Manager{logger: logger, client: mcp.NewClient(&mcp.Implementation{Name: "wgpu-llama", Version: "1.0"}, nil)}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range configs {
		s := &server{cfg: c}
		m.servers = append(m.servers, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, cancel := context.WithTimeout(ctx, warmupTimeout)
			defer cancel()
			list, err := m.listTools(wctx, s)
			if err != nil {
				logger.Warn("MCP server failed to start", "server", c.Name, "err", err)
				return
			}
			s.tools = list
			logger.Info("MCP server ready", "server", c.Name, "tools", len(list))
		}()
	}
	wg.Wait()
	return m
}

// listTools starts s, lists its tools and stops it.
func (m *Manager) listTools(ctx context.Context, s *server) ([]*mcp.Tool, error) {
	in, err := m.start(ctx, s.cfg)
	if err != nil {
		return nil, err
	}
	defer in.close(true)
	var list []*mcp.Tool
	for t, err := range in.session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		list = append(list, t)
	}
	return list, nil
}

// start starts a server process and opens a session with it.
func (m *Manager) start(ctx context.Context, c Config) (*instance, error) {
	cmd := exec.Command(c.Command, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = os.Environ()
	for k, v := range c.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = &logWriter{logger: m.logger, server: c.Name}
	// A grandchild that inherited the pipes must not hold a stopped server's Wait.
	cmd.WaitDelay = 500 * time.Millisecond
	procgroup.Set(cmd)
	session, err := m.client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: closeGrace}, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if err != nil {
		if cmd.Process != nil {
			procgroup.Kill(cmd)
		}
		return nil, err
	}
	in := &instance{session: session, cmd: cmd, done: make(chan struct{})}
	go func() { session.Wait(); close(in.done) }()
	return in, nil
}

// close ends the session, graceful giving the process closeGrace (the transport's
// TerminateDuration) to exit after its stdin closes, then kills what is left of its process
// group (its children too).
func (in *instance) close(graceful bool) {
	if !graceful {
		procgroup.Kill(in.cmd)
	}
	in.session.Close()
	procgroup.Kill(in.cmd)
}

func (in *instance) alive() bool {
	select {
	case <-in.done:
		return false
	default:
		return true
	}
}

// Tools returns the servers' tools as tools of a set, in the servers' order.
func (m *Manager) Tools() []*tools.Tool {
	var out []*tools.Tool
	for _, s := range m.servers {
		for _, t := range s.tools {
			out = append(out, m.tool(s, t))
		}
	}
	return out
}

// tool is an MCP server's tool as a tools.Tool.
func (m *Manager) tool(s *server, t *mcp.Tool) *tools.Tool {
	params, _ := schemaMap(t.InputSchema)
	name := s.cfg.Name + "_" + t.Name
	return &tools.Tool{
		Name: name, DisplayName: name, Kind: "mcp",
		Description: t.Description, Parameters: params,
		Run: func(ctx context.Context, c tools.Call) (tools.Result, error) {
			return m.call(ctx, s, t.Name, c.Params)
		},
	}
}

// schemaMap is a tool's input schema as a JSON object, an empty object schema when it has none.
func schemaMap(v any) (map[string]any, error) {
	var out map[string]any
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, err
		}
	}
	if out == nil {
		out = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return out, nil
}

// call runs tool on s: the server's CallToolResult ({"content": [...], "isError"}), or
// {"error": why} when the server refused or failed.
func (m *Manager) call(ctx context.Context, s *server, tool string, args map[string]any) (tools.Result, error) {
	in, err := m.instance(ctx, s)
	if err != nil {
		return tools.Failed("MCP server unavailable: %s (%v)", s.cfg.Name, err), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()
	res, err := in.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	switch {
	case err == nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return tools.Failed("request timed out after %v", s.cfg.Timeout), nil
	case m.ctx.Err() != nil:
		return tools.Failed("the server is shutting down"), nil
	case ctx.Err() != nil:
		return tools.Failed("cancelled"), nil
	default:
		// A JSON-RPC error is the server's answer; anything else lost the connection, and the
		// next call starts the server again (a dead one may not have been noticed yet).
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) {
			s.drop(in)
		}
		return tools.Failed("%v", err), nil
	}
	var out tools.Result
	b, err := json.Marshal(res)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		return nil, fmt.Errorf("MCP server %s: reading its answer: %w", s.cfg.Name, err)
	}
	if _, ok := out["isError"]; !ok {
		out["isError"] = res.IsError
	}
	return out, nil
}

// instance returns s's running instance, starting it when there is none or it exited.
func (m *Manager) instance(ctx context.Context, s *server) (*instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.ctx.Err() != nil {
		return nil, errors.New("the server is shutting down")
	}
	if s.live != nil && s.live.alive() {
		return s.live, nil
	}
	if s.live != nil {
		m.logger.Warn("MCP server exited; starting it again", "server", s.cfg.Name)
		s.live.close(false)
		s.live = nil
	}
	if time.Now().Before(s.retryAt) {
		return nil, errors.New("it failed to start moments ago")
	}
	sctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()
	in, err := m.start(sctx, s.cfg)
	if err != nil {
		s.retryAt = time.Now().Add(cooldown)
		return nil, err
	}
	s.live = in
	return in, nil
}

// drop closes in if it is still s's running instance.
func (s *server) drop(in *instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == in {
		in.close(false)
		s.live = nil
	}
}

// Close fails the calls in flight and kills every running server.
func (m *Manager) Close() {
	m.cancel()
	for _, s := range m.servers {
		s.mu.Lock()
		if s.live != nil {
			s.live.close(false)
			s.live = nil
		}
		s.mu.Unlock()
	}
}

// logWriter passes a server's stderr to the log, a line at a time.
type logWriter struct {
	logger  *log.Logger
	server  string
	mu      sync.Mutex
	partial []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.logger.Debug("MCP server stderr", "server", w.server, "line", string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) > 4096 {
		w.logger.Debug("MCP server stderr", "server", w.server, "line", string(w.partial))
		w.partial = w.partial[:0]
	}
	return len(p), nil
}
