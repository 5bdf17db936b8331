package tools

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// Limits of exec_shell_command, as llama-server's.
const (
	shellMaxOutput      = 16 << 10
	shellDefaultTimeout = 10
	shellMaxTimeout     = 60
)

func execShellCommandTool() *Tool {
	return &Tool{
		Name: "exec_shell_command", DisplayName: "Execute shell command", Kind: "builtin", UsesCwd: true, Write: true, Streams: true,
		Description: "Execute a shell command and return its output (stdout and stderr combined).",
		Parameters: Schema(map[string]any{
			"command":         Prop("string", "Shell command to execute"),
			"timeout":         Prop("integer", fmt.Sprintf("Timeout in seconds (default %d, max %d)", shellDefaultTimeout, shellMaxTimeout)),
			"max_output_size": Prop("integer", fmt.Sprintf("Maximum output size in bytes (default %d)", shellMaxOutput)),
		}, "command"),
		Run: execShellCommand,
	}
}

func execShellCommand(ctx context.Context, c Call) (Result, error) {
	r := params{p: c.Params}
	command, timeout, maxOutput := r.str("command", true, ""), r.int("timeout", shellDefaultTimeout), r.int("max_output_size", shellMaxOutput)
	if r.err != nil {
		return nil, r.err
	}
	timeout = max(1, min(timeout, shellMaxTimeout))
	maxOutput = max(0, min(maxOutput, shellMaxOutput))
	io, err := newIO(c)
	if err != nil {
		return nil, err
	}
	res := io.run(ctx, []string{"sh", "-c", command}, maxOutput, time.Duration(timeout)*time.Second, c.Chunk)
	tail := fmt.Sprintf("\n[exit code: %d]", res.exitCode)
	if res.timedOut {
		tail += " [exit due to timed out]"
	}
	if c.Chunk != nil {
		if ctx.Err() == nil {
			c.Chunk(tail)
		}
		return nil, nil
	}
	return Result{"plain_text_response": res.output + tail}, nil
}

func getInfoTool() *Tool {
	return &Tool{
		Name: "get_info", DisplayName: "Get Runtime Info", Kind: "builtin", UsesCwd: true,
		Description: "Returns runtime info: the OS name/version and the current working directory",
		Parameters:  Schema(map[string]any{}),
		Run:         getInfo,
	}
}

func getInfo(ctx context.Context, c Call) (Result, error) {
	io, err := newIO(c)
	if err != nil {
		return nil, err
	}
	const limit, timeout = 4096, 5 * time.Second
	res := io.run(ctx, []string{"uname", "-a"}, limit, timeout, nil)
	osInfo := "unknown"
	if res.exitCode == 0 && !res.timedOut {
		osInfo = strings.TrimSpace(res.output)
	}
	cwd := c.Cwd
	switch {
	case cwd != "":
	case c.Runtime == "":
		cwd, _ = os.Getwd()
	default:
		cwd = "unknown"
		if pwd := io.run(ctx, []string{"pwd"}, limit, timeout, nil); pwd.exitCode == 0 && !pwd.timedOut {
			cwd = strings.TrimSpace(pwd.output)
		}
	}
	return Result{"os": osInfo, "cwd": cwd}, nil
}
