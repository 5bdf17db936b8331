package cli

import (
	"context"
	"io"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/hf"
)

// hfFlags locate a model on the Hugging Face Hub: -hf, --hf-file, --hf-token, --offline.
type hfFlags struct {
	repo, file, token string
	offline           bool
}

// resolve returns the local path of the -hf model, from the Hub cache or, unless offline,
// downloaded into it with its progress on the console (see consoleProgress).
func (h hfFlags) resolve(ctx context.Context, console io.Writer, logger *log.Logger) (string, error) {
	logger.Info("resolving Hugging Face model", "repo", h.repo, "file", h.file, "offline", h.offline)
	bar, lines := consoleProgress(console, logger)
	path, err := hf.Resolve(ctx, h.repo, hf.Options{File: h.file, Token: h.token, Offline: h.offline, Progress: bar, OnProgress: lines, Logger: logger})
	if err != nil {
		return "", err
	}
	logger.Info("model file", "path", path)
	return path, nil
}
