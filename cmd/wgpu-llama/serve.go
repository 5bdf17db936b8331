package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/server"
)

// runServe implements the server: it listens first, so /health answers 503 "Loading model"
// while the model loads, then serves until interrupted and shuts down gracefully.
func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", "wgpu-llama [serve] -m FILE [--host H] [--port P] [-c N] [-a ALIAS] [--device N] [--chat-template NAME|FILE] [--embeddings [--pooling TYPE] | --reranking]", stderr)
	var (
		mf                 modelFlags
		sf                 specFlags
		host, alias        string
		port               int
		tmplName, tmplFile string
		jinja              bool
		ef                 embedFlags
		cf                 chatFlags
	)
	mf.register(fs)
	sf.register(fs)
	cf.register(fs)
	stringVar(fs, &host, "127.0.0.1", "address to listen on", "host")
	intVar(fs, &port, 8080, "port to listen on", "port")
	stringVar(fs, &alias, "", "model name reported to clients (default: the file name)", "a", "alias")
	stringVar(fs, &tmplName, "", "chat template instead of the model's: a built-in name ("+strings.Join(chat.BuiltinNames(), ", ")+") or a Jinja file", "chat-template")
	stringVar(fs, &tmplFile, "", "chat template instead of the model's, read from a Jinja file", "chat-template-file")
	fs.BoolVar(&jinja, "jinja", false, "accepted for llama-server compatibility; chat templates always run as Jinja")
	ef.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tmpl, err := chatTemplateFlag(tmplName, tmplFile)
	if err != nil {
		return err
	}
	srvCfg := server.Config{Alias: alias, ChatTemplate: tmpl}
	if err := cf.apply(&srvCfg); err != nil {
		return err
	}
	logger := newLogger(stderr, mf.verbose)
	cfg, err := mf.engineConfig(alias, logger)
	if err != nil {
		return err
	}
	if err := ef.apply(&cfg); err != nil {
		return err
	}
	if cfg.Speculative, err = sf.config(); err != nil {
		return err
	}
	srv := server.New(srvCfg, logger)
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
		srv.Close()
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
	// Resumable streams generate detached from their clients: stop them, or Shutdown would
	// wait on their followers.
	srv.Close()
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// chatTemplateFlag resolves --chat-template (a built-in name or a file) and --chat-template-file
// (a file) into the template that replaces the model's, or nil when neither is given.
func chatTemplateFlag(nameOrFile, file string) (*chat.Template, error) {
	builtins := strings.Join(chat.BuiltinNames(), ", ")
	switch {
	case nameOrFile != "" && file != "":
		return nil, errors.New("give --chat-template or --chat-template-file, not both")
	case nameOrFile != "":
		t, err := chat.Resolve(nameOrFile)
		if err != nil {
			return nil, fmt.Errorf("--chat-template: %w", err)
		}
		return &t, nil
	case file != "":
		src, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--chat-template-file: %w (for a built-in template use --chat-template NAME, one of %s)", err, builtins)
		}
		t, err := chat.New(string(src), file)
		if err != nil {
			return nil, fmt.Errorf("--chat-template-file: %w", err)
		}
		return &t, nil
	}
	return nil, nil
}

// embedFlags are llama-server's embedding flags: --embeddings, --pooling and --reranking.
type embedFlags struct {
	embeddings, reranking bool
	pooling               string
}

func (f *embedFlags) register(fs *flag.FlagSet) {
	for _, n := range []string{"embeddings", "embedding"} {
		fs.BoolVar(&f.embeddings, n, false, "serve embeddings (/embedding, /v1/embeddings)")
	}
	for _, n := range []string{"reranking", "rerank"} {
		fs.BoolVar(&f.reranking, n, false, "serve reranking (/v1/rerank) with a reranker model: --embeddings with --pooling rank")
	}
	stringVar(fs, &f.pooling, "", "pooling of embeddings: none, mean, cls, last or rank (default: the model's)", "pooling")
}

// apply sets the engine's embedding options; --reranking means rank pooling, as in llama.cpp.
func (f *embedFlags) apply(cfg *engine.Config) error {
	if f.pooling != "" {
		if _, err := model.ParsePooling(f.pooling); err != nil {
			return fmt.Errorf("--pooling: %w", err)
		}
	}
	cfg.Embeddings, cfg.Pooling = f.embeddings, f.pooling
	if f.reranking {
		if f.pooling != "" && f.pooling != "rank" {
			return fmt.Errorf("--reranking pools by rank; --pooling %s contradicts it", f.pooling)
		}
		cfg.Embeddings, cfg.Pooling = true, "rank"
	}
	return nil
}
