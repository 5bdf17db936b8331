package cli

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/hf"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/server"
	"github.com/wgpu-llama/wgpu-llama/webui"
)

// serveFlags are llama-server's flags: the model flags every command shares and the server's.
type serveFlags struct {
	model modelFlags

	host  string
	port  int
	alias string
	tags  string
	batch int // -b: llama.cpp's logical batch; the forward pass takes min(-b, -ub) tokens
	// maxQueue is --max-queue: requests that may wait for a slot (-1: maxQueueFor the slots)
	maxQueue int
	// pprofAddr is --pprof-addr: where Go's profiles are served ("": off)
	pprofAddr string

	nPredict         int
	temp, topP, minP float64
	topK             int
	seed             int

	gpuLayers string // accepted and ignored: every layer runs on the GPU
	threads   int    // accepted and ignored: there are no CPU compute threads

	apiKeys      []string
	apiKeyFile   string
	metrics      bool
	metricsAlso  string
	props        bool
	slots        bool
	ui           bool   // serve the web UI at /
	uiPath       string // --path: the UI from this directory instead of the built-in one
	slotSavePath string
	timeout      int
	ssePing      int // --sse-ping-interval, seconds

	jinja              bool
	tmplName, tmplFile string

	cors   corsFlags
	compat compatFlags
	tools  toolFlags
	vision visionFlags
	lora   loraFlags
	// corsLocalhost: tools are on and --cors-origins was not given, so only local pages may
	// read answers (llama-server's default then).
	corsLocalhost bool

	hf       hfFlags
	modelURL string // --model-url: downloaded to -m, else into the llama.cpp cache
	spec     specFlags
	embed    embedFlags
	chat     chatFlags
	sleep    sleepFlags
	router   routerFlags
}

// envFlags maps llama.cpp's environment variables to the flag each sets (its first name);
// a variable applies when the command line does not give that flag under any of its names.
var envFlags = []struct {
	env   string
	names []string
}{
	{"LLAMA_ARG_MODEL", []string{"m", "model"}},
	{"LLAMA_ARG_ALIAS", []string{"a", "alias"}},
	{"LLAMA_ARG_TAGS", []string{"tags"}},
	{"LLAMA_ARG_HOST", []string{"host"}},
	{"LLAMA_ARG_PORT", []string{"port"}},
	{"LLAMA_ARG_CTX_SIZE", []string{"c", "ctx-size"}},
	{"LLAMA_ARG_N_PARALLEL", []string{"np", "parallel"}},
	{"LLAMA_ARG_BATCH", []string{"b", "batch-size"}},
	{"LLAMA_ARG_UBATCH", []string{"ub", "ubatch-size"}},
	{"LLAMA_ARG_N_PREDICT", []string{"n", "predict", "n-predict"}},
	{"LLAMA_ARG_N_GPU_LAYERS", []string{"ngl", "gpu-layers", "n-gpu-layers"}},
	{"LLAMA_ARG_THREADS", []string{"t", "threads"}},
	{"LLAMA_ARG_DEVICE", []string{"dev", "device"}},
	{"LLAMA_ARG_SPLIT_MODE", []string{"sm", "split-mode"}},
	{"LLAMA_ARG_TENSOR_SPLIT", []string{"ts", "tensor-split"}},
	{"LLAMA_ARG_MAIN_GPU", []string{"mg", "main-gpu"}},
	{"LLAMA_ARG_CACHE_TYPE_K", []string{"ctk", "cache-type-k"}},
	{"LLAMA_ARG_CACHE_TYPE_V", []string{"ctv", "cache-type-v"}},
	{"LLAMA_API_KEY", []string{"api-key"}},
	{"LLAMA_ARG_API_KEY_FILE", []string{"api-key-file"}},
	{"LLAMA_ARG_ENDPOINT_METRICS", []string{"metrics"}},
	{"LLAMA_ARG_ENDPOINT_PROPS", []string{"props"}},
	{"LLAMA_ARG_ENDPOINT_SLOTS", []string{"slots", "no-slots"}},
	{"LLAMA_ARG_TIMEOUT", []string{"to", "timeout"}},
	{"LLAMA_ARG_SSE_PING_INTERVAL", []string{"sse-ping-interval"}},
	{"LLAMA_ARG_JINJA", []string{"jinja", "no-jinja"}},
	{"LLAMA_ARG_CHAT_TEMPLATE", []string{"chat-template"}},
	{"LLAMA_ARG_CHAT_TEMPLATE_FILE", []string{"chat-template-file"}},
	{"LLAMA_ARG_REASONING", []string{"rea", "reasoning"}},
	{"LLAMA_ARG_THINK", []string{"reasoning-format"}},
	{"LLAMA_ARG_THINK_BUDGET", []string{"reasoning-budget"}},
	{"LLAMA_ARG_THINK_BUDGET_MESSAGE", []string{"reasoning-budget-message"}},
	{"LLAMA_ARG_PREFILL_ASSISTANT", []string{"prefill-assistant", "no-prefill-assistant"}},
	{"LLAMA_CHAT_TEMPLATE_KWARGS", []string{"chat-template-kwargs"}},
	{"LLAMA_OFFLINE", []string{"offline"}},
	{"LLAMA_ARG_HF_REPO", []string{"hf", "hfr", "hf-repo"}},
	{"LLAMA_ARG_MODEL_URL", []string{"mu", "model-url"}},
	{"LLAMA_ARG_HF_FILE", []string{"hff", "hf-file"}},
	{"HF_TOKEN", []string{"hft", "hf-token"}},
	{"LLAMA_ARG_CORS_ORIGINS", []string{"cors-origins"}},
	{"LLAMA_ARG_TOOLS", []string{"tools"}},
	{"LLAMA_ARG_MMPROJ", []string{"mm", "mmproj"}},
	{"LLAMA_ARG_TOOLS_RUNTIME", []string{"tools-runtime"}},
	{"LLAMA_ARG_CORS_METHODS", []string{"cors-methods"}},
	{"LLAMA_ARG_CORS_HEADERS", []string{"cors-headers"}},
	{"LLAMA_ARG_CORS_CREDENTIALS", []string{"cors-credentials", "no-cors-credentials"}},
	{"LLAMA_ARG_FLASH_ATTN", []string{"fa", "flash-attn"}},
	{"LLAMA_ARG_SWA_FULL", []string{"swa-full"}},
	{"LLAMA_ARG_GRP_ATTN_N", []string{"gan", "grp-attn-n"}},
	{"LLAMA_ARG_GRP_ATTN_W", []string{"gaw", "grp-attn-w"}},
	{"LLAMA_ARG_CACHE_RAM", []string{"cram", "cache-ram"}},
	{"LLAMA_ARG_CACHE_IDLE_SLOTS", []string{"cache-idle-slots", "no-cache-idle-slots"}},
	{"LLAMA_ARG_CONT_BATCHING", []string{"cb", "cont-batching", "nocb", "no-cont-batching"}},
	{"LLAMA_ARG_MMPROJ_URL", []string{"mmu", "mmproj-url"}},
	{"LLAMA_ARG_NO_MMPROJ", []string{"no-mmproj"}},
	{"LLAMA_ARG_BACKEND_SAMPLING", []string{"bs", "backend-sampling"}},
	{"LLAMA_ARG_MODELS_DIR", []string{"models-dir"}},
	{"LLAMA_ARG_MODELS_PRESET", []string{"models-preset"}},
	{"LLAMA_ARG_MODELS_MAX", []string{"models-max"}},
	{"LLAMA_ARG_MODELS_AUTOLOAD", []string{"models-autoload", "no-models-autoload"}},
}

// register adds the flags to fs, with llama-server's names and defaults.
func (f *serveFlags) register(fs *flag.FlagSet) {
	f.model.register(fs)
	stringVar(fs, &f.host, "127.0.0.1", "address to listen on", "host")
	intVar(fs, &f.port, 8080, "port to listen on", "port")
	stringVar(fs, &f.alias, "", "model names clients may use, comma-separated; the first in sort order is the name reported (default: the file name)", "a", "alias")
	stringVar(fs, &f.tags, "", "comma-separated tags listed with the model in /v1/models", "tags")
	intVar(fs, &f.batch, 2048, "logical batch size; a forward pass takes at most min(-b, -ub) tokens", "b", "batch-size")
	stringVar(fs, &f.pprofAddr, "", "serve Go's profiles (/debug/pprof/) on this address, for diagnosis (off by default)", "pprof-addr")
	intVar(fs, &f.maxQueue, -1, "requests that may wait for a slot; beyond it requests get 503 with Retry-After at once (-1: 8 per slot, at least 64; 0: no limit)", "max-queue")

	intVar(fs, &f.nPredict, -1, "tokens a request generates unless it says (-1: until end of generation)", "n", "predict", "n-predict")
	floatVar(fs, &f.temp, 0.8, "default temperature", "temp")
	intVar(fs, &f.topK, 40, "default top-k (0: off)", "top-k")
	floatVar(fs, &f.topP, 0.95, "default top-p (1: off)", "top-p")
	floatVar(fs, &f.minP, 0.05, "default min-p (0: off)", "min-p")
	intVar(fs, &f.seed, -1, "default sampling seed (-1: random)", "s", "seed")
	stringVar(fs, &f.gpuLayers, "auto", "accepted for llama-server compatibility; every layer runs on the GPU", "ngl", "gpu-layers", "n-gpu-layers")
	intVar(fs, &f.threads, -1, "accepted for llama-server compatibility; there are no CPU threads to set", "t", "threads")

	fs.Var((*csvFlag)(&f.apiKeys), "api-key", "API key required of clients; repeat it or give a comma-separated list for several")
	stringVar(fs, &f.apiKeyFile, "", "file of API keys, one a line (lines starting with # are comments)", "api-key-file")
	fs.BoolVar(&f.metrics, "metrics", false, "enable the Prometheus metrics endpoint GET /metrics")
	stringVar(fs, &f.metricsAlso, "", "also write /metrics' series under another engine's names, for tools that know only those: vllm (what the inference gateway's Endpoint Picker reads with no configuration)", "metrics-compat")
	fs.BoolVar(&f.props, "props", false, "enable POST /props")
	f.slots = true
	fs.Var(&pairFlag{&f.slots, true}, "slots", "enable GET /slots (the default)")
	fs.Var(&pairFlag{&f.slots, false}, "no-slots", "disable GET /slots")
	f.ui = true
	fs.Var(&pairFlag{&f.ui, true}, "ui", "serve the web UI at / (the default)")
	fs.Var(&pairFlag{&f.ui, true}, "webui", "same as --ui")
	fs.Var(&pairFlag{&f.ui, false}, "no-ui", "do not serve the web UI: / answers 404")
	fs.Var(&pairFlag{&f.ui, false}, "no-webui", "same as --no-ui")
	stringVar(fs, &f.uiPath, "", "serve the web UI from this directory (a build of webui/: index.html at its root) instead of the built-in one", "path")
	stringVar(fs, &f.slotSavePath, "", "directory for slot files (POST /slots/{id}?action=save|restore); default: disabled", "slot-save-path")
	intVar(fs, &f.timeout, 600, "read and write timeout in seconds (0: none)", "to", "timeout")
	intVar(fs, &f.ssePing, 30, "seconds of silence after which a stream sends a keep-alive comment; requests may override it with sse_ping_interval (-1: none)", "sse-ping-interval")

	f.jinja = true
	fs.Var(&pairFlag{&f.jinja, true}, "jinja", "render chat templates as Jinja (the default)")
	fs.Var(&pairFlag{&f.jinja, false}, "no-jinja", "render chats with llama.cpp's built-in formats, picked by template name or markers; no tools")
	stringVar(fs, &f.tmplName, "", "chat template instead of the model's: a built-in name ("+strings.Join(chat.BuiltinNames(), ", ")+") or a Jinja source", "chat-template")
	stringVar(fs, &f.tmplFile, "", "chat template instead of the model's, read from a Jinja file", "chat-template-file")

	stringVar(fs, &f.hf.repo, "", "Hugging Face model <user>/<model>[:quant] (quant default Q4_K_M, then the first GGUF), from the cache or downloaded into it", "hf", "hfr", "hf-repo")
	stringVar(fs, &f.hf.file, "", "file of the --hf-repo repository to use, overriding the quant", "hff", "hf-file")
	stringVar(fs, &f.hf.token, "", "Hugging Face access token (default: $HF_TOKEN)", "hft", "hf-token")
	fs.BoolVar(&f.hf.offline, "offline", false, "use the Hugging Face cache only; never download")
	stringVar(fs, &f.modelURL, "", "model GGUF URL, downloaded to -m FILE when given, else under its file name into $LLAMA_CACHE (default ~/.cache/llama.cpp); a file already there is used", "mu", "model-url")
	f.cors.register(fs)
	f.tools.register(fs)
	f.vision.register(fs)
	f.lora.register(fs)
	f.compat.register(fs)
	f.spec.register(fs)
	f.embed.register(fs)
	f.chat.register(fs)
	f.sleep.register(fs)
	f.router.register(fs)
}

// parseServeFlags parses serve's command line, then fills what it leaves unset from
// llama.cpp's environment variables (getenv), and checks the result.
func parseServeFlags(args []string, stderr io.Writer, getenv func(string) string) (*serveFlags, error) {
	fs := newFlagSet("serve", "wgpu-llama [serve] [-m FILE | -hf USER/MODEL[:QUANT]] [--host H] [--port P] [-c N] [-np N] [--api-key KEY] ...", stderr)
	f := &serveFlags{}
	f.register(fs)
	// The flag list is long: print it for -h only, and name the flag at fault otherwise.
	fs.SetOutput(io.Discard)
	usage := fs.Usage
	fs.Usage = func() {}
	if err := parseFlags(fs, dashFlagNames(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			usage()
			return nil, err
		}
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
			return nil, fmt.Errorf("unknown flag %s (run \"wgpu-llama serve -h\" to list the flags)", asTyped(name, args))
		}
		return nil, fmt.Errorf("%w (run \"wgpu-llama serve -h\" to list the flags)", err)
	}
	if err := applyEnv(fs, getenv); err != nil {
		return nil, err
	}
	given := false
	fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == "cors-origins" })
	if f.tools.enabled() && !given {
		f.cors.origins, f.corsLocalhost = "localhost", true
	}
	return f, f.check()
}

// applyEnv sets each flag the command line left alone from its environment variable.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, e := range envFlags {
		v := getenv(e.env)
		if v == "" || anyOf(given, e.names) {
			continue
		}
		if b, ok := fs.Lookup(e.names[0]).Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			on, err := envBool(v)
			if err != nil {
				return fmt.Errorf("%s: %w", e.env, err)
			}
			v = strconv.FormatBool(on)
		}
		if err := fs.Set(e.names[0], v); err != nil {
			return fmt.Errorf("%s=%q: %w", e.env, v, err)
		}
	}
	return nil
}

func anyOf(set map[string]bool, names []string) bool {
	for _, n := range names {
		if set[n] {
			return true
		}
	}
	return false
}

// envBool reads a boolean environment variable as llama.cpp does.
func envBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "on", "enabled", "yes":
		return true, nil
	case "0", "false", "off", "disabled", "no":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean (use true or false)", v)
}

// check validates the flags and reads the API key file.
func (f *serveFlags) check() error {
	if f.seed < -1 || int64(f.seed) > engine.SeedRandom {
		return fmt.Errorf("--seed must be between -1 and %d, got %d", int64(engine.SeedRandom), f.seed)
	}
	if f.nPredict < -1 {
		return fmt.Errorf("-n must be -1 (no limit) or more, got %d", f.nPredict)
	}
	if f.batch < 1 || f.model.batch < 1 {
		return fmt.Errorf("-b and -ub must be at least 1, got %d and %d", f.batch, f.model.batch)
	}
	if f.timeout < 0 {
		return fmt.Errorf("--timeout must be 0 (none) or more seconds, got %d", f.timeout)
	}
	if err := f.vision.check(); err != nil {
		return err
	}
	if f.ssePing < -1 {
		return fmt.Errorf("--sse-ping-interval must be -1 (none) or more seconds, got %d", f.ssePing)
	}
	if f.slotSavePath != "" {
		if st, err := os.Stat(f.slotSavePath); err != nil || !st.IsDir() {
			return fmt.Errorf("--slot-save-path: not a directory: %s", f.slotSavePath)
		}
	}
	if f.hf.repo != "" && f.model.path != "" {
		return errors.New("give -m FILE or -hf USER/MODEL, not both")
	}
	if f.modelURL != "" {
		if f.hf.repo != "" {
			return errors.New("give --model-url or -hf USER/MODEL, not both")
		}
		if _, err := hf.URLFileName(f.modelURL); err != nil {
			return fmt.Errorf("--model-url: %w", err)
		}
	}
	if f.hf.file != "" && f.hf.repo == "" {
		return errors.New("--hf-file needs --hf-repo")
	}
	if err := f.compat.check(); err != nil {
		return err
	}
	if err := f.sleep.check(); err != nil {
		return err
	}
	if f.model.cacheRAM < -1 {
		return fmt.Errorf("--cache-ram must be -1 (no limit), 0 (off) or a size in MiB, got %d", f.model.cacheRAM)
	}
	if f.gpuLayers != "auto" && f.gpuLayers != "all" {
		if _, err := strconv.Atoi(f.gpuLayers); err != nil {
			return fmt.Errorf("-ngl/--n-gpu-layers: %q is not a number of layers, auto or all", f.gpuLayers)
		}
	}
	if _, err := f.cors.policy(); err != nil {
		return err
	}
	if f.apiKeyFile != "" {
		keys, err := readKeyFile(f.apiKeyFile)
		if err != nil {
			return err
		}
		f.apiKeys = append(f.apiKeys, keys...)
	}
	return nil
}

// readKeyFile reads API keys one a line, skipping empty lines and # comments.
func readKeyFile(path string) ([]string, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--api-key-file: %w", err)
	}
	defer file.Close()
	var keys []string
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		if k := strings.TrimSpace(sc.Text()); k != "" && !strings.HasPrefix(k, "#") {
			keys = append(keys, k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--api-key-file: %w", err)
	}
	return keys, nil
}

// name is the model name clients see: as llama-server, which keeps --alias in a sorted set,
// the first alias in sort order; "" for the file name.
func (f *serveFlags) name() string {
	if a := commaSet(f.alias); len(a) > 0 {
		return a[0]
	}
	return ""
}

// commaSet splits a comma-separated flag value into its distinct non-empty items, sorted, as
// llama-server's std::set of --alias and --tags.
func commaSet(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// dashFlagNames spells "--a_b" flags as "--a-b", as llama.cpp's argument parser does (the
// suite passes --backend_sampling), when the dashed name is a flag of fs. Values are left as
// they are: the word after a flag that takes one is skipped.
func dashFlagNames(fs *flag.FlagSet, args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "--") && strings.Contains(name, "_") {
			if dashed := strings.ReplaceAll(name, "_", "-"); fs.Lookup(dashed) != nil {
				name = dashed
				out[i] = "--" + dashed
				if hasValue {
					out[i] += "=" + value
				}
			}
		}
		fl := fs.Lookup(name)
		if fl == nil || hasValue {
			continue
		}
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			i++ // the flag's value
		}
	}
	return out
}

// serverConfig is the HTTP server's configuration.
func (f *serveFlags) serverConfig() (server.Config, error) {
	tmpl, err := chatTemplateFlag(f.tmplName, f.tmplFile)
	if err != nil {
		return server.Config{}, err
	}
	d := engine.DefaultParams()
	d.NPredict, d.TopK = f.nPredict, f.topK
	d.Temperature, d.TopP, d.MinP = float32(f.temp), float32(f.topP), float32(f.minP)
	if f.seed >= 0 {
		d.Seed = uint32(f.seed)
	}
	cors, err := f.cors.policy()
	if err != nil {
		return server.Config{}, err
	}
	ping := time.Duration(f.ssePing) * time.Second
	if ping <= 0 {
		ping = -1 // as llama-server, 0 pings as -1 does: never (server.Config's 0 is the default)
	}
	if f.metricsAlso != "" && f.metricsAlso != server.MetricsVLLM {
		return server.Config{}, fmt.Errorf("--metrics-compat %q: the names known are %q", f.metricsAlso, server.MetricsVLLM)
	}
	cfg := server.Config{
		Alias:           f.name(),
		Aliases:         commaSet(f.alias),
		Tags:            commaSet(f.tags),
		CORS:            cors,
		Verbose:         f.model.verbose,
		ChatTemplate:    tmpl,
		NoJinja:         !f.jinja,
		APIKeys:         f.apiKeys,
		Metrics:         f.metrics,
		MetricsCompat:   f.metricsAlso,
		NoSlots:         !f.slots,
		Props:           f.props,
		SlotSavePath:    f.slotSavePath,
		WriteTimeout:    time.Duration(f.timeout) * time.Second,
		SSEPingInterval: ping,
		Defaults:        &d,
	}
	if cfg.UI, err = f.uiFiles(); err != nil {
		return server.Config{}, err
	}
	return cfg, f.chat.apply(&cfg)
}

// uiFiles is the web UI to serve: the built-in one, --path's directory, or none (--no-ui).
func (f *serveFlags) uiFiles() (fs.FS, error) {
	if !f.ui {
		return nil, nil
	}
	if f.uiPath == "" {
		return webui.Files(), nil
	}
	if st, err := os.Stat(filepath.Join(f.uiPath, "index.html")); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("--path %s: no index.html there (a build of webui/ is needed)", f.uiPath)
	}
	return os.DirFS(f.uiPath), nil
}

// logAccepted notes the flags that are accepted for compatibility but change nothing.
func (f *serveFlags) logAccepted(logger *log.Logger) {
	logger.Debug("ignored for llama-server compatibility", "n_gpu_layers", f.gpuLayers, "threads", f.threads)
	f.compat.log(logger)
	if len(f.apiKeys) > 0 {
		logger.Info("API keys required", "keys", len(f.apiKeys))
	}
	if f.corsLocalhost {
		logger.Warn("server tools or MCP servers are enabled, using localhost as default CORS origin (change via --cors-origins)")
	}
}

// csvFlag collects values of a repeatable flag, each possibly a comma-separated list.
type csvFlag []string

func (c *csvFlag) String() string { return strings.Join(*c, ",") }

func (c *csvFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*c = append(*c, s)
		}
	}
	return nil
}

// pairFlag is one of a --x/--no-x pair: given alone it sets *p to on; given a value
// (--slots=false) it sets that value, negated for the --no- side.
type pairFlag struct {
	p  *bool
	on bool
}

func (b *pairFlag) IsBoolFlag() bool { return true }

func (b *pairFlag) String() string {
	if b == nil || b.p == nil {
		return ""
	}
	return strconv.FormatBool(*b.p == b.on)
}

func (b *pairFlag) Set(v string) error {
	x, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	*b.p = x == b.on
	return nil
}

// asTyped returns the flag name as the command line spelled it (package flag reports "--bogus"
// as "-bogus").
func asTyped(name string, args []string) string {
	bare := strings.TrimLeft(name, "-")
	for _, a := range args {
		typed, _, _ := strings.Cut(a, "=")
		if strings.HasPrefix(typed, "-") && strings.TrimLeft(typed, "-") == bare {
			return typed
		}
	}
	return name
}

// maxQueueFor is --max-queue's default for a number of slots: several times the slots, and at
// least 64, so that the bursts clients make on purpose (llama-server's tests send 16 requests
// to 2 slots) still wait their turn.
func maxQueueFor(slots int) int { return max(64, 8*slots) }
