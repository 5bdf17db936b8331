package cli

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
	"github.com/wgpu-llama/wgpu-llama/hf"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/router"
	"github.com/wgpu-llama/wgpu-llama/server"
)

// ServeHooks let a program that runs the server in-process (the desktop app) watch it.
type ServeHooks struct {
	// Listening gets the server's base URL once it listens.
	Listening func(url string)
	// Engine gets the engine once the model has loaded, before the server hands it any
	// request (never in router mode, whose engines run in child processes).
	Engine func(*engine.Engine)
	// Router is called instead when the flags ask for router mode.
	Router func()
}

// Serve runs the server with llama-server's flags (args, as `wgpu-llama serve` takes them)
// until ctx ends, calling hooks as it starts.
func Serve(ctx context.Context, args []string, stderr io.Writer, hooks ServeHooks) error {
	return runServe(ctx, args, stderr, hooks)
}

// runServe implements the server: it listens first, so /health answers 503 "Loading model"
// while the model is found (-hf may download it) and loads, then serves until interrupted and
// shuts down gracefully.
func runServe(ctx context.Context, args []string, stderr io.Writer, hooks ServeHooks) error {
	sf, err := parseServeFlags(args, stderr, os.Getenv)
	if err != nil {
		return err
	}
	logger := newLogger(stderr, sf.model.verbose)
	sf.logAccepted(logger)
	report := &childReporter{on: sf.router.child, w: os.Stdout}
	if sf.router.child {
		logger.SetReportTimestamp(false) // the router's log line has the time
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go watchRouter(os.Stdin, cancel, logger)
		report.state(router.StateLoading, nil)
	}
	scfg, err := sf.serverConfig()
	if err != nil {
		return err
	}
	if sf.pprofAddr != "" {
		stop, err := startPprof(sf.pprofAddr, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	toolsRun, err := sf.tools.start(ctx, logger)
	if err != nil {
		return err
	}
	// Closed before the HTTP server drains: a tool call in flight must not hold the exit.
	defer toolsRun.Close()
	if sf.routerMode() {
		if hooks.Router != nil {
			hooks.Router()
		}
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		(&serveFlags{}).register(fs)
		return runRouter(ctx, sf, toolsRun, inheritedArgs(fs, dashFlagNames(fs, args)), logger, hooks)
	}
	scfg.Tools, scfg.CORSProxy = toolsRun.set, sf.tools.proxy()
	scfg.MediaPath, scfg.MediaMarker, scfg.MediaFetch = sf.compat.mediaPath, os.Getenv("LLAMA_MEDIA_MARKER"), sf.vision.fetch
	if err := sf.tools.apply(&scfg); err != nil {
		return err
	}
	srv := server.New(scfg, logger)
	port, err := serveVertex(srv, sf.port, os.Getenv, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(sf.host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	timeout := time.Duration(sf.timeout) * time.Second
	// The read timeout bounds reading a request; writes get theirs per write (see
	// server.Config.WriteTimeout), so that streams are not cut. Idle keep-alive connections
	// close after 5 seconds, as llama-server's "Keep-Alive: timeout=5".
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second, ReadTimeout: timeout, IdleTimeout: 5 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	logger.Info("listening", "url", "http://"+ln.Addr().String())
	if hooks.Listening != nil {
		hooks.Listening("http://" + ln.Addr().String())
	}

	if sf.hf.repo != "" {
		if sf.model.path, err = sf.hf.resolve(ctx, stderr, logger); err != nil {
			httpSrv.Close()
			return stoppedWhileLoading(ctx, logger, err)
		}
	}
	if sf.modelURL != "" {
		logger.Info("fetching model", "url", sf.modelURL, "offline", sf.hf.offline)
		bar, lines := consoleProgress(stderr, logger)
		if sf.model.path, err = hf.FetchURL(ctx, sf.modelURL, hf.URLOptions{Dest: sf.model.path, Offline: sf.hf.offline, Progress: bar, OnProgress: lines}); err != nil {
			httpSrv.Close()
			return stoppedWhileLoading(ctx, logger, fmt.Errorf("--model-url: %w", err))
		}
	}
	cfg, err := sf.model.engineConfig(scfg.Alias, logger)
	if err != nil {
		httpSrv.Close()
		return err
	}
	cfg.BatchSize = min(cfg.BatchSize, sf.batch) // llama.cpp's n_ubatch = min(n_ubatch, n_batch)
	if cfg.MaxQueue = sf.maxQueue; cfg.MaxQueue < 0 {
		cfg.MaxQueue = maxQueueFor(max(cfg.Slots, 1))
	}
	if cfg.MMProjPath, err = sf.vision.path(cfg.ModelPath, sf.compat.noMmproj); err != nil {
		httpSrv.Close()
		return err
	}
	cfg.ImageMinTokens, cfg.ImageMaxTokens = max(0, sf.vision.imageMinTokens), max(0, sf.vision.imageMaxTokens)
	sf.lora.apply(&cfg)
	if err := sf.embed.apply(&cfg); err != nil {
		httpSrv.Close()
		return err
	}
	if cfg.Speculative, err = sf.spec.config(); err != nil {
		httpSrv.Close()
		return err
	}
	sf.sleep.apply(&cfg)
	if sf.router.child {
		cfg.LoadProgress = report.loadProgress
		cfg.OnSleep = report.sleeping
	}
	eng, err := engine.Load(ctx, cfg)
	if err != nil {
		httpSrv.Close()
		srv.Close()
		return stoppedWhileLoading(ctx, logger, err)
	}
	defer eng.Close()
	if hooks.Engine != nil {
		hooks.Engine(eng)
	}
	srv.SetBackend(eng)
	logger.Info("ready", "model", eng.Info().Name)
	report.state(router.StateReady, nil)

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	toolsRun.Close()
	return drain(ctx, logger, srv, eng, httpSrv)
}

// chatTemplateFlag resolves --chat-template (a built-in name or a Jinja source, as
// llama-server's) and --chat-template-file (a file) into the template that replaces the
// model's, or nil when neither is given.
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
	boolVar(fs, &f.embeddings, false, "serve embeddings (/embedding, /v1/embeddings)", "embeddings", "embedding")
	boolVar(fs, &f.reranking, false, "serve reranking (/v1/rerank) with a reranker model: --embeddings with --pooling rank", "reranking", "rerank")
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
