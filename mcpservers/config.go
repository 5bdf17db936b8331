// Package mcpservers runs the MCP servers a server is configured with (--mcp-servers-config,
// --mcp-servers-json, in Cursor's mcp.json format) and offers their tools as "<server>_<tool>"
// tools of type "mcp". It speaks MCP over stdio through the official Go SDK.
//
// Each server is started once at startup to list its tools, then again on the first call of
// one, and kept: calls share it (the SDK matches replies to requests), a server that exits is
// started again on the next call, and one that cannot be started is left alone for a few
// seconds before the next try.
package mcpservers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// DefaultTimeout bounds each request to a server whose config sets no timeout_ms.
const DefaultTimeout = 30 * time.Second

// Config is one MCP server: the command that starts it and how long a request may take.
type Config struct {
	Name    string
	Command string
	Args    []string
	// Env is added to the server's environment (the rest is this process's).
	Env map[string]string
	// Dir is its working directory; empty is this process's.
	Dir     string
	Timeout time.Duration
}

// entry is one server of the file, as Cursor's format has it.
type entry struct {
	Command   string            `json:"command"`
	Args      []string          `json:"args"`
	Env       map[string]string `json:"env"`
	Cwd       string            `json:"cwd"`
	TimeoutMS *int64            `json:"timeout_ms"`
	URL       string            `json:"url"`
}

// Parse reads a config ({"mcpServers": {"name": {"command", "args", "env", "cwd",
// "timeout_ms"}}}), keeping the servers in the order written. Servers without a command (a
// "url" server, which needs a transport we do not speak) are returned in skipped with why.
func Parse(data []byte) (servers []Config, skipped []string, err error) {
	var top struct {
		MCPServers json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, nil, fmt.Errorf("failed to parse MCP config JSON: %w", err)
	}
	if len(top.MCPServers) == 0 || string(top.MCPServers) == "null" {
		return nil, nil, nil
	}
	names, err := objectKeys(top.MCPServers)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to parse MCP config JSON: mcpServers: %w", err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(top.MCPServers, &all); err != nil {
		return nil, nil, fmt.Errorf("failed to parse MCP config JSON: mcpServers: %w", err)
	}
	for _, name := range names {
		var e entry
		dec := json.NewDecoder(bytes.NewReader(all[name]))
		if err := dec.Decode(&e); err != nil {
			return nil, nil, fmt.Errorf("failed to parse MCP config JSON: server %q: %w", name, err)
		}
		switch {
		case name == "" || strings.ContainsAny(name, " \t\r\n/"):
			return nil, nil, fmt.Errorf("MCP config: server name %q must be a non-empty word", name)
		case e.Command == "" && e.URL != "":
			skipped = append(skipped, fmt.Sprintf("MCP server %q has a url, not a command: only stdio servers are supported, skipping", name))
			continue
		case e.Command == "":
			skipped = append(skipped, fmt.Sprintf("MCP server %q has no command, skipping", name))
			continue
		}
		c := Config{Name: name, Command: e.Command, Args: e.Args, Env: e.Env, Dir: e.Cwd, Timeout: DefaultTimeout}
		if e.TimeoutMS != nil {
			if *e.TimeoutMS <= 0 {
				return nil, nil, fmt.Errorf("MCP config: server %q: timeout_ms must be positive, not %d", name, *e.TimeoutMS)
			}
			c.Timeout = time.Duration(*e.TimeoutMS) * time.Millisecond
		}
		servers = append(servers, c)
	}
	return servers, skipped, nil
}

// Load reads the servers of --mcp-servers-config (a file) and then --mcp-servers-json (either
// may be empty); a name given twice keeps its first config.
func Load(file, inline string) (servers []Config, warnings []string, err error) {
	var sources [][]byte
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to open MCP config file: %w", err)
		}
		sources = append(sources, b)
	}
	if inline != "" {
		sources = append(sources, []byte(inline))
	}
	seen := map[string]bool{}
	for _, src := range sources {
		list, skipped, err := Parse(src)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, skipped...)
		for _, c := range list {
			if seen[c.Name] {
				warnings = append(warnings, fmt.Sprintf("MCP config: duplicate server name %q, skipping", c.Name))
				continue
			}
			seen[c.Name] = true
			servers = append(servers, c)
		}
	}
	return servers, warnings, nil
}

// objectKeys returns the keys of a JSON object in the order written.
func objectKeys(obj json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not an object")
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}
