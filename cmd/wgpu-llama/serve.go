package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/server"
)

// runServe implements the server: it listens first, so /health answers 503 "Loading model"
// while the model loads, then serves until interrupted and shuts down gracefully.
func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", "wgpu-llama [serve] -m FILE [--host H] [--port P] [-c N] [-a ALIAS] [--device N]", stderr)
	var (
		mf          modelFlags
		host, alias string
		port        int
	)
	mf.register(fs)
	stringVar(fs, &host, "127.0.0.1", "address to listen on", "host")
	intVar(fs, &port, 8080, "port to listen on", "port")
	stringVar(fs, &alias, "", "model name reported to clients (default: the file name)", "a", "alias")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger := newLogger(stderr, mf.verbose)
	cfg, err := mf.engineConfig(alias, logger)
	if err != nil {
		return err
	}
	srv := server.New(server.Config{Alias: alias}, logger)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	logger.Info("listening", "url", "http://"+ln.Addr().String())

	eng, err := engine.Load(ctx, cfg)
	if err != nil {
		httpSrv.Close()
		return err
	}
	defer eng.Close()
	srv.SetBackend(eng)
	logger.Info("ready", "model", eng.Info().Name)

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
