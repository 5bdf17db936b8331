package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// Go's flag package accepts -name and --name alike, so llama.cpp's spellings (-m, --model,
// -c, --ctx-size, -ub) register as they are; aliases share one variable.

func stringVar(fs *flag.FlagSet, p *string, value, usage string, names ...string) {
	for _, n := range names {
		fs.StringVar(p, n, value, usage)
	}
}

func intVar(fs *flag.FlagSet, p *int, value int, usage string, names ...string) {
	for _, n := range names {
		fs.IntVar(p, n, value, usage)
	}
}

func floatVar(fs *flag.FlagSet, p *float64, value float64, usage string, names ...string) {
	for _, n := range names {
		fs.Float64Var(p, n, value, usage)
	}
}

func boolVar(fs *flag.FlagSet, p *bool, value bool, usage string, names ...string) {
	for _, n := range names {
		fs.BoolVar(p, n, value, usage)
	}
}

// newFlagSet returns a flag set that reports errors instead of exiting, with usage text.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and rejects leftover positional arguments, which llama.cpp's tools
// also refuse.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// parseInterspersed parses flags given before, between or after the positional arguments and
// returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		rest = fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos, rest = append(pos, rest[0]), rest[1:]
	}
}

// defaultModel is the model used when -m is not given: stories260K from the shared test data
// ($WGPU_LLAMA_SHARED, else ../shared from the working directory, else ../shared beside the
// directory of the executable, which a checkout builds in its root), so a fresh checkout runs
// at once, wherever it is started from (llama.cpp's suite starts it in a temporary directory).
func defaultModel() (string, error) {
	dirs := []string{}
	if d := shareddata.Dir(); d != "" {
		dirs = append(dirs, d)
	}
	dirs = append(dirs, filepath.Join("..", "shared"))
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Join(filepath.Dir(exe), "..", "shared"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "models", "stories260K.gguf")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no model given (-m FILE) and no default model at %s", strings.Join(dirs, " or "))
}

// newLogger logs to stderr with charmbracelet/log, at debug level when verbose.
func newLogger(stderr io.Writer, verbose bool) *log.Logger {
	l := log.NewWithOptions(stderr, log.Options{ReportTimestamp: true})
	if verbose {
		l.SetLevel(log.DebugLevel)
	}
	return l
}

// autoSlots is llama-server's slot count for -np -1 (the default), with a unified KV cache.
const autoSlots = 4

// modelFlags are the flags every command that loads a model shares.
type modelFlags struct {
	path           string
	ctxSize        int
	batch          int
	split          splitFlags
	verbose        bool
	cacheK, cacheV string
	rawActivations bool
	slots          int
	kvUnified      bool
	ctxShift       bool
	cpuExact       bool
	checkedShaders bool
	noCtxShift     bool
	cacheReuse     int
	ctxCheckpoints int
	swaFull        bool
	cacheRAM       int
	cacheIdleSlots bool
	gpuMemory      int
}

func (m *modelFlags) register(fs *flag.FlagSet) {
	stringVar(fs, &m.path, "", "model GGUF file (default: stories260K from the shared test data; serve without a model is a router)", "m", "model")
	intVar(fs, &m.ctxSize, 4096, "context size in tokens (0: the model's)", "c", "ctx-size")
	intVar(fs, &m.batch, 512, "prompt tokens per forward pass", "ub", "ubatch-size")
	m.split.register(fs)
	intVar(fs, &m.gpuMemory, 0, "device memory in MiB the model, KV cache and activations may use: the load checks against it and allocations beyond it fail (0: what the driver tells, unchecked where it tells nothing)", "gpu-memory")
	intVar(fs, &m.slots, -1, "sequences served at once; -1 (auto, as llama-server): 4 slots sharing the whole context (--kv-unified), else the context is split between them", "np", "parallel")
	boolVar(fs, &m.verbose, false, "verbose logging; serve also adds __verbose (the native answer) to OpenAI-style answers unless a request sets \"verbose\": false", "v", "verbose", "log-verbose")
	stringVar(fs, &m.cacheK, "f16", "KV cache type for keys: f16 or f32", "ctk", "cache-type-k")
	stringVar(fs, &m.cacheV, "f16", "KV cache type for values: f16 or f32 (same as keys)", "ctv", "cache-type-v")
	fs.BoolVar(&m.rawActivations, "raw-activations", false, "feed matmuls f32 activations instead of rounding them as llama.cpp's CPU backend does")
	fs.BoolVar(&m.kvUnified, "kv-unified", false, "one KV cache pool for all slots: each may use the whole context")
	fs.BoolVar(&m.kvUnified, "kvu", false, "same as --kv-unified")
	fs.BoolVar(&m.cpuExact, "cpu-exact", false, "on a CPU adapter (lavapipe), reproduce llama.cpp's CPU arithmetic bit for bit: its exp, fused multiply-adds and summation orders (F32 and Q8_0 prompts take about 5x longer)")
	fs.BoolVar(&m.checkedShaders, "checked-shaders", false, "compile GPU kernels with wgpu's runtime checks (every storage access clamped to its buffer, loops bounded), to tell a kernel's out-of-bounds access from another fault; by default they run without (also "+gpu.CheckedShadersEnv+"=1)")
	fs.BoolVar(&m.ctxShift, "context-shift", false, "when a slot's context fills, drop older tokens and keep generating")
	fs.BoolVar(&m.noCtxShift, "no-context-shift", false, "stop generating when the context fills (the default)")
	intVar(fs, &m.cacheReuse, 0, "shortest cached chunk reused by moving it in the KV cache (n_cache_reuse; 0: off)", "cache-reuse")
	intVar(fs, &m.ctxCheckpoints, engine.DefaultCtxCheckpoints, "most context checkpoints per slot: copies of a recurrent model's state (qwen35) taken near a prompt's end, so a later prompt sharing that prefix reuses it (0: none)", "ctxcp", "ctx-checkpoints", "swa-checkpoints")
	fs.BoolVar(&m.swaFull, "swa-full", false, "as llama-server's full-size sliding-window cache: a sliding-window model's prompt is then evaluated without the batch ends llama-server makes for its checkpoints (the KV cache here always holds the whole context)")
	intVar(fs, &m.cacheRAM, engine.DefaultPromptCacheMiB, "prompt cache size in MiB: prompts slots held, kept for later requests (-1: no limit, 0: off)", "cram", "cache-ram")
	m.cacheIdleSlots = true
	fs.Var(&pairFlag{&m.cacheIdleSlots, true}, "cache-idle-slots", "when a request starts, save idle slots' prompts to the prompt cache, clearing them with --kv-unified (the default)")
	fs.Var(&pairFlag{&m.cacheIdleSlots, false}, "no-cache-idle-slots", "leave idle slots' prompts out of the prompt cache")
}

// engineConfig resolves the default model and returns the engine configuration.
func (m *modelFlags) engineConfig(alias string, logger *log.Logger) (engine.Config, error) {
	path := m.path
	if path == "" {
		var err error
		if path, err = defaultModel(); err != nil {
			return engine.Config{}, err
		}
	}
	for _, t := range []string{m.cacheK, m.cacheV} {
		if t != "f16" && t != "f32" {
			return engine.Config{}, fmt.Errorf("cache type %q not supported (supported: f16, f32)", t)
		}
	}
	if m.cacheK != m.cacheV {
		return engine.Config{}, fmt.Errorf("different key (%s) and value (%s) cache types are not supported", m.cacheK, m.cacheV)
	}
	slots, unified := m.slots, m.kvUnified
	switch {
	case slots == -1: // llama-server's automatic choice
		slots, unified = autoSlots, true
	case slots < 1:
		return engine.Config{}, fmt.Errorf("-np must be at least 1 (or -1 for automatic), got %d", m.slots)
	}
	if m.cacheReuse < 0 {
		return engine.Config{}, fmt.Errorf("--cache-reuse must be 0 or more, got %d", m.cacheReuse)
	}
	if m.ctxCheckpoints < 0 {
		return engine.Config{}, fmt.Errorf("--ctx-checkpoints must be 0 or more, got %d", m.ctxCheckpoints)
	}
	ckpts := m.ctxCheckpoints
	if ckpts == 0 {
		ckpts = -1 // the engine's 0 is the default
	}
	if m.gpuMemory < 0 {
		return engine.Config{}, fmt.Errorf("--gpu-memory must be 0 or more MiB, got %d", m.gpuMemory)
	}
	cfg := engine.Config{ModelPath: path, Alias: alias, CtxSize: m.ctxSize, BatchSize: m.batch, Slots: slots,
		GPUMemory: uint64(m.gpuMemory) << 20, KVF32: m.cacheK == "f32", RawActivations: m.rawActivations, Logger: logger,
		KVUnified: unified, ContextShift: m.ctxShift && !m.noCtxShift, CPUExact: m.cpuExact, CacheReuse: m.cacheReuse, CtxCheckpoints: ckpts, SWAFull: m.swaFull,
		PromptCacheMiB: m.cacheRAM, NoPromptCache: m.cacheRAM == 0, NoCacheIdleSlots: !m.cacheIdleSlots, CheckedShaders: m.checkedShaders}
	return cfg, m.split.apply(&cfg)
}

// loadModel opens the device and loads the model directly, for commands that drive the model
// themselves (bench, embed) rather than through the engine. close releases both.
func (m *modelFlags) loadModel(stderr io.Writer, minBatch int, onDevice func(*gpu.Device) error) (mdl *model.Model, dev *gpu.Device, close func(), err error) {
	cfg, err := m.engineConfig("", newLogger(stderr, m.verbose))
	if err != nil {
		return nil, nil, nil, err
	}
	if len(cfg.Devices) > 1 {
		return nil, nil, nil, fmt.Errorf("this command runs the model on one device: give --device one adapter (the server splits a model across several)")
	}
	if st, err := os.Stat(cfg.ModelPath); err == nil && st.Size() < engine.InlineSoftwareBelow {
		gpu.PreferInlineSoftware()
	}
	if dev, err = gpu.Open(cfg.Device); err != nil {
		return nil, nil, nil, err
	}
	dev.SetBudget(cfg.GPUMemory)
	dev.SetCPUMath(cfg.CPUExact)
	dev.Checked = dev.Checked || cfg.CheckedShaders
	if onDevice != nil {
		if err := onDevice(dev); err != nil {
			dev.Close()
			return nil, nil, nil, err
		}
	}
	f, err := gguf.Open(cfg.ModelPath)
	if err != nil {
		dev.Close()
		return nil, nil, nil, err
	}
	mdl, err = model.Load(dev, f, model.Options{MaxBatch: max(cfg.BatchSize, minBatch, 1), KVF32: cfg.KVF32, RawActivations: cfg.RawActivations})
	f.Close()
	if err != nil {
		dev.Close()
		return nil, nil, nil, err
	}
	return mdl, dev, func() { mdl.Close(); dev.Close() }, nil
}
