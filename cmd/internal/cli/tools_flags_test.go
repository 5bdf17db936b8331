package cli

import (
	"context"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/server"
)

func noEnv(string) string { return "" }

// Tools and MCP servers make localhost the default CORS origin, unless --cors-origins (or its
// variable) says otherwise; the proxy alone does not.
func TestToolFlagsCORSDefault(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{nil, "", "*"},
		{[]string{"--ui-mcp-proxy"}, "", "*"},
		{[]string{"--tools", "all"}, "", "localhost"},
		{[]string{"--agent"}, "", "localhost"},
		{[]string{"--mcp-servers-json", `{"mcpServers":{}}`}, "", "localhost"},
		{[]string{"--tools", "read_file", "--cors-origins", "*"}, "", "*"},
		{[]string{"--tools", "read_file"}, "https://app.example", "https://app.example"},
	} {
		sf, err := parseServeFlags(c.args, io.Discard, func(k string) string {
			if k == "LLAMA_ARG_CORS_ORIGINS" {
				return c.env
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		if sf.cors.origins != c.want {
			t.Errorf("%q (env %q): origins %q, want %q", c.args, c.env, sf.cors.origins, c.want)
		}
	}
}

func TestToolFlagsStart(t *testing.T) {
	logger := log.New(io.Discard)
	sf, err := parseServeFlags(nil, io.Discard, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	run, err := sf.tools.start(context.Background(), logger)
	if err != nil || run.set != nil || sf.tools.proxy() {
		t.Errorf("no tool flags: set %v, proxy %v, err %v", run.set, sf.tools.proxy(), err)
	}
	sf, _ = parseServeFlags([]string{"--agent"}, io.Discard, noEnv)
	run, err = sf.tools.start(context.Background(), logger)
	if err != nil || len(run.set.All()) != 7 || !sf.tools.proxy() {
		t.Errorf("--agent: %v tools, proxy %v, err %v", len(run.set.All()), sf.tools.proxy(), err)
	}
	for args, want := range map[string]string{
		"--tools read_file,rm":                        `--tools: unknown tool "rm". available tools: read_file, file_glob_search, grep_search, exec_shell_command, write_file, edit_file, get_info`,
		"--tools-runtime ssh:host":                    "--tools-runtime needs --tools or MCP servers",
		"--tools all --tools-runtime x:":              "--tools-runtime: unknown tool runtime: x:",
		"--mcp-servers-json nope":                     "failed to parse MCP config JSON: invalid character 'o' in literal null (expecting 'u')",
		"--mcp-servers-config /nonexistent/path.json": "failed to open MCP config file: open /nonexistent/path.json: no such file or directory",
	} {
		sf, err := parseServeFlags(strings.Fields(args), io.Discard, noEnv)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sf.tools.start(context.Background(), logger); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// A router offers the tools itself: its children get none of the tool flags.
func TestToolFlagsNotInherited(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	(&serveFlags{}).register(fs)
	args := []string{"--tools", "all", "-c", "512", "--mcp-servers-json", "{}", "--ui-mcp-proxy", "--tools-runtime", "ssh:h", "--agent", "--mcp-servers-config", "f"}
	if got := inheritedArgs(fs, dashFlagNames(fs, args)); !reflect.DeepEqual(got, []string{"-c", "512"}) {
		t.Errorf("inherited %q", got)
	}
}

func TestAgentFlags(t *testing.T) {
	sf, err := parseServeFlags(strings.Fields("--tools all --agent-max-rounds 3 --agent-allow-write --agent-sessions 5 --agent-session-ttl 60 --mcp-endpoint"), io.Discard, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	var cfg server.Config
	if err := sf.tools.apply(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.AgentMaxRounds != 3 || !cfg.AgentAllowWrite || cfg.AgentSessions != 5 || cfg.AgentSessionTTL != time.Minute || !cfg.MCPEndpoint {
		t.Errorf("config %+v", cfg)
	}
	for args, want := range map[string]string{
		"--agent-max-rounds 0":   "--agent-max-rounds must be at least 1, got 0",
		"--agent-sessions 0":     "--agent-sessions must be at least 1, got 0",
		"--agent-session-ttl -1": "--agent-session-ttl must be at least 1 second, got -1",
	} {
		sf, _ := parseServeFlags(strings.Fields(args), io.Discard, noEnv)
		if err := sf.tools.apply(&cfg); err == nil || err.Error() != want {
			t.Errorf("%s: %v", args, err)
		}
	}
}
