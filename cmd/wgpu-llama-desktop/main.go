// Command wgpu-llama-desktop is the server in a window: it takes every flag of `wgpu-llama
// serve`, runs the server in-process and opens a window with a live view of what the engine
// and the GPU are doing (package debugview), drawn by wgpu on the window's surface. The
// server binary itself links no windowing library; this one does.
//
// Keys: P pauses the view, F12 saves a PNG of the window, O opens the web UI in the browser,
// Tab and a click select a slot, the arrow keys pick the attention panel's layer and head, A
// hides or shows its strip (and turns the engine's probe off or on), Escape closes.
// --screenshot FILE --after N renders until N forward passes have run and the engine is idle
// again, saves the window as FILE (and what it drew, as JSON, beside it) and exits.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/wgpu-llama/wgpu-llama/cmd/internal/cli"
)

// GLFW must be called from the process's main thread.
func init() { runtime.LockOSThread() }

func main() {
	args := os.Args[1:]
	if headless(args) {
		// a router's children and downloads run as this binary, without windows
		os.Exit(cli.Main(args))
	}
	opts, rest, err := parseDesktopFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runDesktop(ctx, opts, rest); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// headless reports whether args are a command other than serving: the router starts its
// children as `serve --router-child` and downloads as `download`, with this binary.
func headless(args []string) bool {
	if len(args) == 0 || len(args[0]) == 0 || args[0][0] == '-' {
		return false
	}
	if args[0] != "serve" {
		return true
	}
	for _, a := range args[1:] {
		if a == "--router-child" {
			return true
		}
	}
	return false
}
