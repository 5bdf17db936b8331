package tools

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"sync"
	"time"

	"github.com/wgpu-llama/wgpu-llama/internal/procgroup"
)

// execResult is what a command printed (stdout and stderr together, or stdout alone) and how it
// ended.
type execResult struct {
	output   string
	exitCode int // -1 when it could not start or was killed
	timedOut bool
}

// pipeGrace is how long a finished command's pipes may stay open: a background grandchild that
// inherited them must not hold the tool (or the server's shutdown) until it exits.
const pipeGrace = 500 * time.Millisecond

// runCommand runs args (args[0] looked up in PATH) in dir with stdin as its input, keeping at
// most maxOutput bytes of its output (it is drained past that, so it never blocks on a full
// pipe), and kills it and its children after timeout, when ctx ends, or when chunk (called with
// each piece of output as it comes) returns false.
func runCommand(ctx context.Context, args []string, dir string, stdin []byte, maxOutput int, timeout time.Duration, combineStderr bool, chunk func(string) bool) execResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	procgroup.Set(cmd)
	cmd.Cancel = func() error { return procgroup.Kill(cmd) }
	cmd.WaitDelay = pipeGrace
	out := &cappedWriter{max: maxOutput, chunk: chunk, stop: cancel}
	cmd.Stdout = out
	if combineStderr {
		cmd.Stderr = out
	}
	if err := cmd.Start(); err != nil {
		return execResult{output: "failed to spawn process: " + err.Error(), exitCode: -1}
	}
	err := cmd.Wait()
	res := execResult{output: out.String(), exitCode: -1}
	if cmd.ProcessState != nil {
		res.exitCode = cmd.ProcessState.ExitCode()
	}
	res.timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	if err != nil && res.exitCode == 0 && !errors.Is(err, exec.ErrWaitDelay) {
		res.exitCode = -1
	}
	return res
}

// cappedWriter keeps the first max bytes written to it, passing each kept piece to chunk.
type cappedWriter struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
	chunk     func(string) bool
	stop      func()
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.truncated {
		return len(p), nil
	}
	keep := p
	if w.buf.Len()+len(p) > w.max {
		keep = p[:w.max-w.buf.Len()]
		w.truncated = true
	}
	w.buf.Write(keep)
	if w.chunk != nil && len(keep) > 0 && !w.chunk(string(keep)) {
		w.stop()
	}
	return len(p), nil
}

// String is what was kept, marked when output was cut.
func (w *cappedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.truncated {
		return w.buf.String() + "\n[output truncated]"
	}
	return w.buf.String()
}
