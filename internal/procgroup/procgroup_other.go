//go:build !unix

// Package procgroup starts a command in a process group of its own and kills the group, so
// that stopping a tool's shell or an MCP server also stops the processes it started.
package procgroup

import "os/exec"

// Set does nothing where there are no process groups.
func Set(*exec.Cmd) {}

// Kill kills cmd's process; it does nothing before cmd starts.
func Kill(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}
