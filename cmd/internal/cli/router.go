package cli

import (
	"bufio"
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
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/hf"
	"github.com/wgpu-llama/wgpu-llama/router"
	"github.com/wgpu-llama/wgpu-llama/server"
)

// routerFlags are llama-server's router flags, and the hidden one marking a router's child.
type routerFlags struct {
	modelsDir, modelsPreset string
	modelsMax               int
	autoload                bool
	child                   bool
}

func (f *routerFlags) register(fs *flag.FlagSet) {
	stringVar(fs, &f.modelsDir, "", "router mode: a directory of models (a .gguf file each, or a subfolder for a multi-file model)", "models-dir")
	stringVar(fs, &f.modelsPreset, "", "router mode: an INI file of model presets (version = 1, [*] for every model, [NAME] per model; keys are flag names)", "models-preset")
	intVar(fs, &f.modelsMax, 4, "router mode: models loaded at once; past it the least recently used idle model is unloaded (0: no limit)", "models-max")
	f.autoload = true
	fs.Var(&pairFlag{&f.autoload, true}, "models-autoload", "router mode: load a model on its first request (the default; ?autoload= per request)")
	fs.Var(&pairFlag{&f.autoload, false}, "no-models-autoload", "router mode: answer requests for unloaded models with an error")
	fs.BoolVar(&f.child, "router-child", false, "internal: run as a router's child (state lines on stdout, exit on the router's command)")
}

// routerMode reports whether serve runs as a router: no model was given.
func (f *serveFlags) routerMode() bool {
	return !f.router.child && f.model.path == "" && f.hf.repo == "" && f.modelURL == ""
}

// routerOnly are the flags a child does not inherit from the router's command line: the
// router's own, the listening address (each child gets a loopback port) and the model's.
var routerOnly = map[string]bool{
	"models-dir": true, "models-preset": true, "models-max": true, "models-autoload": true, "no-models-autoload": true,
	"api-key": true, "api-key-file": true, "host": true, "port": true, "a": true, "alias": true,
	"m": true, "model": true, "hf": true, "hfr": true, "hf-repo": true, "hff": true, "hf-file": true,
	"mu": true, "model-url": true, "router-child": true, "path": true,
	// the router offers the tools and the proxy itself; children would start the MCP servers again
	"tools": true, "tools-runtime": true, "mcp-servers-config": true, "mcp-servers-json": true,
	"ui-mcp-proxy": true, "ag": true, "agent": true, "agent-max-rounds": true, "agent-allow-write": true,
	"agent-sessions": true, "agent-session-ttl": true, "mcp-endpoint": true,
	// one model's projector: a router's children find theirs beside their model (--mmproj-auto)
	"mm": true, "mmproj": true,
	// one listener: the router's own profiles (children would all try the same address)
	"pprof-addr": true,
}

// inheritedArgs are the router's command-line flags its children get, in their order.
func inheritedArgs(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		if name == a || name == "" {
			continue // not a flag (serve takes no positional arguments)
		}
		name, _, hasValue := strings.Cut(name, "=")
		fl := fs.Lookup(name)
		isBool := false
		if fl != nil {
			if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				isBool = true
			}
		}
		take := []string{a}
		if !hasValue && !isBool && i+1 < len(args) {
			take = append(take, args[i+1])
			i++
		}
		if !routerOnly[name] {
			out = append(out, take...)
		}
	}
	return out
}

// runRouter serves the router until ctx ends, then stops every child.
func runRouter(ctx context.Context, sf *serveFlags, toolsRun *toolsRun, inherited []string, logger *log.Logger, hooks ServeHooks) error {
	if sf.tools.mcpEndpoint {
		return errors.New("--mcp-endpoint serves one model: give it -m (or -hf), not a router's models")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("router: finding this binary to start children: %w", err)
	}
	cache, err := hf.CacheDir()
	if err != nil {
		logger.Warn("router: no Hugging Face cache", "err", err)
	}
	ui, err := sf.uiFiles()
	if err != nil {
		return err
	}
	cfg := router.Config{
		Catalog:   router.Catalog{CacheDir: cache, ModelsDir: sf.router.modelsDir, PresetFile: sf.router.modelsPreset},
		Command:   []string{exe, "serve", "--router-child", "--no-ui"}, // the router serves the UI
		Inherited: inherited,
		MaxModels: sf.router.modelsMax,
		Autoload:  sf.router.autoload,
		APIKeys:   sf.apiKeys,
		UI:        ui,
		BuildInfo: server.DefaultSystemFingerprint,
		Metrics:   sf.metrics,
		Offline:   sf.hf.offline,
		// downloads run in a child too, so that the router's memory stays small
		DownloadCommand: []string{exe, "download", "--progress-lines"},
		// llama-server's test hook: loads and requests take two seconds more
		FakeTiming: os.Getenv("LLAMA_SERVER_DEBUG_FAKE_TIMING") != "",
		Tools:      toolsRun.set,
		CORSProxy:  sf.tools.proxy(),
	}
	r, err := router.New(cfg, logger)
	if err != nil {
		return err
	}
	defer r.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort(sf.host, strconv.Itoa(sf.port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	cors, err := sf.cors.policy()
	if err != nil {
		return err
	}
	// CORS as a single server's: before the API key check, preflights answered for every path.
	httpSrv := &http.Server{Handler: server.CORSHandler(cors, logger, r.Handler()), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 5 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	logger.Info("router listening", "url", "http://"+ln.Addr().String())
	if hooks.Listening != nil {
		hooks.Listening("http://" + ln.Addr().String())
	}
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	toolsRun.Close() // fails the tool calls in flight, which the drain would wait for
	shutCtx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	httpSrv.Shutdown(shutCtx)
	return nil
}

// childReporter prints a router child's state lines on stdout; outside a router it does nothing.
type childReporter struct {
	on      bool
	mu      sync.Mutex
	w       io.Writer
	lastPct int // 1 + the last whole percent of the load reported
}

// state reports st (router.StateLoading, StateReady, StateSleeping) to the router.
func (c *childReporter) state(st string, progress *float64) {
	if c == nil || !c.on {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintln(c.w, router.StateLine(router.ChildState{State: st, Progress: progress}))
}

// sleeping reports the model freed (asleep) or loaded again: the engine's OnSleep.
func (c *childReporter) sleeping(asleep bool) {
	if asleep {
		c.state(router.StateSleeping, nil)
	} else {
		c.state(router.StateReady, nil)
	}
}

// loadProgress reports the loaded fraction of the model, at most once per whole percent.
func (c *childReporter) loadProgress(done, total uint64) {
	pct := done * 100 / total
	c.mu.Lock()
	seen := c.lastPct
	c.lastPct = int(pct) + 1
	c.mu.Unlock()
	if int(pct)+1 > seen {
		f := float64(done) / float64(total)
		c.state(router.StateLoading, &f)
	}
}

// watchRouter cancels the child's context when the router says exit or its pipe closes
// (the router is gone), so the child shuts down as on a signal.
func watchRouter(stdin io.Reader, cancel context.CancelFunc, logger *log.Logger) {
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == router.ExitCommand {
			logger.Info("the router asks this model to exit")
			break
		}
	}
	cancel()
}
