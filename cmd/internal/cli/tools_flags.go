package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/mcpservers"
	"github.com/wgpu-llama/wgpu-llama/server"
	"github.com/wgpu-llama/wgpu-llama/tools"
)

// toolFlags are llama-server's tool flags: --tools, --tools-runtime, --mcp-servers-config,
// --mcp-servers-json, --ui-mcp-proxy and -ag/--agent. Every one is off by default: tools read
// and write files and run commands, the proxy reaches other hosts.
type toolFlags struct {
	tools      string
	runtime    string
	mcpConfig  string
	mcpJSON    string
	uiMCPProxy bool
	agent      bool
	// mcpEndpoint serves the server's own MCP server at /mcp
	mcpEndpoint bool

	// the server-side agent loop (chat requests with server_tools)
	agentMaxRounds  int
	agentAllowWrite bool
	agentSessions   int
	agentSessionTTL int // seconds
}

func (t *toolFlags) register(fs *flag.FlagSet) {
	stringVar(fs, &t.tools, "", "built-in tools GET and POST /tools offer, comma-separated, or all: "+strings.Join(tools.Names(), ", ")+" (default: none)", "tools")
	stringVar(fs, &t.runtime, "", "where tools run: docker:IMAGE or podman:IMAGE (a container the server starts), docker-container:ID, podman-container:ID or ssh:[USER@]HOST (default: this machine)", "tools-runtime")
	stringVar(fs, &t.mcpConfig, "", "MCP servers to offer tools of, from a JSON file in Cursor's format {\"mcpServers\": {NAME: {command, args, env, cwd, timeout_ms}}}", "mcp-servers-config")
	stringVar(fs, &t.mcpJSON, "", "MCP servers as --mcp-servers-config, given as JSON on the command line", "mcp-servers-json")
	boolVar(fs, &t.uiMCPProxy, false, "enable /cors-proxy, through which the web UI reaches MCP servers and hosts that do not allow its origin", "ui-mcp-proxy")
	boolVar(fs, &t.agent, false, "same as --tools all --ui-mcp-proxy", "ag", "agent")
	boolVar(fs, &t.mcpEndpoint, false, "serve an MCP server at /mcp (Streamable HTTP) whose tools are the model's complete, chat and embed and the --tools built-in tools", "mcp-endpoint")
	intVar(fs, &t.agentMaxRounds, server.DefaultAgentMaxRounds, "rounds of server tool calls one chat request with server_tools may run", "agent-max-rounds")
	boolVar(fs, &t.agentAllowWrite, false, "let chat requests with server_tools run the tools that write files or run commands (write_file, edit_file, exec_shell_command)", "agent-allow-write")
	intVar(fs, &t.agentSessions, server.DefaultAgentSessions, "agent sessions (session_id) kept in memory; the least recently used goes first", "agent-sessions")
	intVar(fs, &t.agentSessionTTL, int(server.DefaultAgentSessionTTL/time.Second), "seconds an unused agent session is kept", "agent-session-ttl")
}

// apply sets the agent loop's settings of cfg, refusing values out of range.
func (t *toolFlags) apply(cfg *server.Config) error {
	switch {
	case t.agentMaxRounds < 1:
		return fmt.Errorf("--agent-max-rounds must be at least 1, got %d", t.agentMaxRounds)
	case t.agentSessions < 1:
		return fmt.Errorf("--agent-sessions must be at least 1, got %d", t.agentSessions)
	case t.agentSessionTTL < 1:
		return fmt.Errorf("--agent-session-ttl must be at least 1 second, got %d", t.agentSessionTTL)
	}
	cfg.MCPEndpoint = t.mcpEndpoint
	cfg.AgentMaxRounds, cfg.AgentAllowWrite = t.agentMaxRounds, t.agentAllowWrite
	cfg.AgentSessions, cfg.AgentSessionTTL = t.agentSessions, time.Duration(t.agentSessionTTL)*time.Second
	return nil
}

// enabled reports whether any tool or MCP server is configured.
func (t *toolFlags) enabled() bool {
	return t.tools != "" || t.agent || t.mcpConfig != "" || t.mcpJSON != ""
}

// proxy reports whether /cors-proxy is on.
func (t *toolFlags) proxy() bool { return t.uiMCPProxy || t.agent }

// toolsRun is what toolFlags start: the tools offered, and what must stop at exit.
type toolsRun struct {
	set     *tools.Set
	mcp     *mcpservers.Manager
	runtime *tools.Runtime
}

// Close stops the MCP servers (failing their calls in flight) and the tools runtime.
func (r *toolsRun) Close() {
	if r.mcp != nil {
		r.mcp.Close()
	}
	r.runtime.Close()
}

// start checks the flags, starts the runtime and the MCP servers (each once, to list its
// tools) and returns the set: nil, with the feature off, when no tool is configured. A bad
// config, an unknown tool or runtime is an error: the server does not start.
func (t *toolFlags) start(ctx context.Context, logger *log.Logger) (*toolsRun, error) {
	run := &toolsRun{}
	if !t.enabled() {
		if t.runtime != "" {
			return nil, fmt.Errorf("--tools-runtime needs --tools or MCP servers")
		}
		return run, nil
	}
	servers, warnings, err := mcpservers.Load(t.mcpConfig, t.mcpJSON)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		logger.Warn(w)
	}
	var names []string
	if t.agent {
		names = []string{"all"}
	} else if t.tools != "" {
		names = strings.Split(t.tools, ",")
	}
	if run.set, err = tools.NewSet(names); err != nil {
		return nil, fmt.Errorf("--tools: %w", err)
	}
	if t.runtime != "" {
		if run.runtime, err = tools.NewRuntime(t.runtime); err != nil {
			return nil, fmt.Errorf("--tools-runtime: %w", err)
		}
		run.set.Runtime = run.runtime
	}
	if len(servers) > 0 {
		run.mcp = mcpservers.Start(ctx, servers, logger)
		for _, name := range run.set.Add(run.mcp.Tools()...) {
			logger.Warn("an MCP tool's name is taken by another tool; skipping it", "tool", name)
		}
	}
	logger.Info("tools enabled", "tools", len(run.set.All()), "runtime", t.runtime)
	return run, nil
}
