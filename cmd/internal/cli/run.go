// Package cli is the wgpu-llama command line: the server (llama-server's flags), and the
// complete, inspect, tokenize, embed, bench, devices, download, quantize and gen-model
// commands. It is a package, not the main one, so that the desktop app serves with the very
// same flags (Serve's hooks give it the engine).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `usage: wgpu-llama [serve] -m FILE [--host H] [--port P] [-c N] ...   start the HTTP server
       wgpu-llama complete -m FILE -p PROMPT [-n N] [--temp T] [--seed S]  print a completion
       wgpu-llama inspect FILE                                             show GGUF metadata and tensors
       wgpu-llama tokenize -m FILE [--ids] [--no-bos] (TEXT | --stdin)     print the tokens of a text
       wgpu-llama embed -m FILE -p TEXT                                    print an encoder model's embedding
       wgpu-llama bench -m FILE [-p 512] [-n 128] [-r 5] [--json]          measure prompt and generation speed
       wgpu-llama devices                                                  list GPU adapters
       wgpu-llama download ORG/NAME[:QUANT]                                download a model into the Hugging Face cache
       wgpu-llama quantize IN.gguf OUT.gguf TYPE                           convert a model, like llama-quantize
       wgpu-llama gen-model [--preset NAME] [--type TYPE] --out FILE       write a random llama model
       wgpu-llama soak [--url URL] [--streams N] [--duration D] [--json]   soak a running server with mixed traffic

Run "wgpu-llama COMMAND -h" for a command's flags.
`

// run dispatches to a subcommand; with no subcommand (or flags first) it serves, as
// llama-server does.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return runServe(ctx, args, stderr, ServeHooks{})
	case "complete":
		return runComplete(ctx, args, stdout, stderr)
	case "inspect":
		return runInspect(args, stdout, stderr)
	case "tokenize":
		return runTokenize(args, stdout, stderr)
	case "embed":
		return runEmbed(args, stdout, stderr)
	case "bench":
		return runBench(args, stdout, stderr)
	case "devices":
		return runDevices(args, stdout, stderr)
	case "download":
		return runDownload(ctx, args, stdout, stderr)
	case "quantize":
		return runQuantize(args, stdout, stderr)
	case "gen-model":
		return runGenModel(args, stdout, stderr)
	case "soak":
		return runSoak(ctx, args, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// Main runs the command line with args (os.Args[1:]) and returns the process's exit status:
// 0, or 1 after printing the error. A first interrupt stops the command gracefully; a second
// ends the process at once, as in llama-server.
func Main(args []string) int {
	ctx, stop := signalContext()
	defer stop()
	go func() {
		<-forced(ctx)
		fmt.Fprintln(os.Stderr, "Received second interrupt, terminating immediately.")
		os.Exit(1)
	}()
	if err := run(ctx, args, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		return 1
	}
	return 0
}
