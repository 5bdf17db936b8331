//go:build unix

// Package procgroup starts a command in a process group of its own and kills the group, so
// that stopping a tool's shell or an MCP server also stops the processes it started.
package procgroup

import (
	"os/exec"
	"syscall"
)

// Set makes cmd start in a new process group (call it before Start).
func Set(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// Kill kills cmd's process group; it does nothing before cmd starts.
func Kill(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
