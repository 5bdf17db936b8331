package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/charmbracelet/log"
	"github.com/charmbracelet/x/term"

	"github.com/wgpu-llama/wgpu-llama/hf"
	"github.com/wgpu-llama/wgpu-llama/router"
)

// runDownload implements `wgpu-llama download [--progress-lines] ORG/NAME[:QUANT]`: the model
// is fetched into the Hugging Face cache as -hf fetches it (resuming a partial download,
// checking the Hub's sha256). With --progress-lines (a router's download child) the progress
// and the result go to stdout as the router's protocol lines (router.DownloadProgressLine,
// router.DownloadResultLine); otherwise the console shows them.
func runDownload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("download", "wgpu-llama download [--cache-dir DIR] [--hf-token T] [--offline] ORG/NAME[:QUANT]", stderr)
	var h hfFlags
	var cacheDir string
	var lines bool
	h.token = os.Getenv("HF_TOKEN")
	stringVar(fs, &h.file, "", "the repository's file to download, overriding the quant tag", "hff", "hf-file")
	stringVar(fs, &h.token, h.token, "Hugging Face access token (default: $HF_TOKEN)", "hft", "hf-token")
	stringVar(fs, &cacheDir, "", "the Hugging Face cache to download into (default: as -hf)", "cache-dir")
	boolVar(fs, &h.offline, false, "use the cache only", "offline")
	fs.BoolVar(&lines, "progress-lines", false, "internal: report to a router on stdout (progress and result lines)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return fmt.Errorf("download takes one model, ORG/NAME[:QUANT]; got %d arguments", len(pos))
	}
	logger := log.NewWithOptions(stderr, log.Options{ReportTimestamp: true})
	opt := hf.Options{File: h.file, Token: h.token, Offline: h.offline, CacheDir: cacheDir, Logger: logger}
	var mu sync.Mutex
	if lines {
		opt.OnProgress = func(p hf.Progress) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintln(stdout, router.DownloadProgressLine(p))
		}
	} else {
		opt.Progress, opt.OnProgress = consoleProgress(stderr, logger)
	}
	path, err := hf.Resolve(ctx, pos[0], opt)
	if lines {
		res := router.DownloadResult{Success: err == nil, Path: path}
		if err != nil {
			res.Error = err.Error()
		}
		fmt.Fprintln(stdout, router.DownloadResultLine(res))
	}
	if err != nil {
		return err
	}
	if !lines {
		fmt.Fprintln(stdout, path)
	}
	return nil
}

// consoleProgress is how downloads show on the console: a progress bar when w is a terminal,
// else log lines at every tenth.
func consoleProgress(w io.Writer, logger *log.Logger) (io.Writer, func(hf.Progress)) {
	if isTerminal(w) {
		return w, nil
	}
	return nil, hf.LogProgress(logger)
}

// isTerminal reports whether w is a terminal (where a progress bar can redraw its line).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}
