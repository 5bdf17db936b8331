// Command wgpu-llama is llama-server remade in Go on WebGPU: it serves a GGUF model over
// llama-server's HTTP API, completes a prompt on the command line, inspects GGUF files and
// lists GPU adapters (see package cli).
package main

import (
	"os"

	"github.com/wgpu-llama/wgpu-llama/cmd/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
