package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/soak"
)

// soakFlags are `wgpu-llama soak`'s flags.
type soakFlags struct {
	cfg     soak.Config
	json    bool
	verbose bool
}

// parseSoakFlags parses soak's command line; the API key defaults to $LLAMA_API_KEY, as the
// server's --api-key does.
func parseSoakFlags(args []string, stderr io.Writer, getenv func(string) string) (*soakFlags, error) {
	fs := newFlagSet("soak", "wgpu-llama soak [--url URL] [--streams 64] [--duration 10m] [--seed N] [--json]", stderr)
	f := &soakFlags{}
	c := &f.cfg
	stringVar(fs, &c.URL, "http://127.0.0.1:8080", "base URL of the server to soak", "url")
	stringVar(fs, &c.APIKey, getenv("LLAMA_API_KEY"), "API key to send as a bearer token (default $LLAMA_API_KEY)", "api-key")
	intVar(fs, &c.Streams, 64, "concurrent request streams", "streams")
	fs.DurationVar(&c.Duration, "duration", 10*time.Minute, "how long to send traffic")
	fs.DurationVar(&c.WarmUp, "warm-up", 0, "traffic before the snapshot the end is compared with (0: a tenth of --duration, at most 1m)")
	fs.Int64Var(&c.Seed, "seed", 0, "seed of the traffic's random choices (0: from the clock)")
	intVar(fs, &c.MaxTokens, 32, "most tokens a request generates", "max-tokens")
	fs.DurationVar(&c.OverloadEvery, "overload-every", 30*time.Second, "period of the deliberate overload bursts (negative: none)")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", 2*time.Minute, "timeout of one request")
	boolVar(fs, &f.json, false, "print the report as JSON", "json")
	boolVar(fs, &f.verbose, false, "log at debug level", "v", "verbose")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if c.Streams <= 0 || c.Duration <= 0 || c.MaxTokens <= 0 {
		return nil, fmt.Errorf("soak: --streams, --duration and --max-tokens must be positive")
	}
	return f, nil
}

// runSoak implements `wgpu-llama soak`: mixed traffic against a running server, a report on
// stdout, and a non-zero exit status when the verdict fails.
func runSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseSoakFlags(args, stderr, os.Getenv)
	if err != nil {
		return err
	}
	f.cfg.Log = newLogger(stderr, f.verbose)
	f.cfg.Log.Info("soaking", "url", f.cfg.URL, "streams", f.cfg.Streams, "duration", f.cfg.Duration)
	rep, err := soak.Run(ctx, f.cfg)
	if err != nil {
		return err
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("soak failed: %s", strings.Join(rep.Failures, "; "))
	}
	return nil
}
