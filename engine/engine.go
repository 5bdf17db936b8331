// Package engine runs the model for many clients from one goroutine, the only one that
// encodes GPU work: requests arrive on a queue already tokenized, each with its own result
// channel, and leave as text pieces and a final result with llama-server's statistics.
package engine

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// Config says what to load and how to run it.
type Config struct {
	ModelPath string
	// LoadProgress, when set, hears how many of the model's bytes are loaded (a router's
	// child reports it to the router); it is called from Load's goroutine.
	LoadProgress func(done, total uint64)
	// Alias is the model name clients see; default the file name without extension.
	Alias string
	// CtxSize is the context in tokens; 0 takes the model's training context.
	CtxSize int
	// BatchSize is the most tokens per forward pass (llama-server's -ub); default 512.
	BatchSize int
	// Slots is how many sequences run at once (llama-server's -np); the context is split
	// evenly between them unless KVUnified. Default 1.
	Slots int
	// MaxQueue is how many requests may wait for a slot; beyond it Submit fails at once with
	// ErrQueueFull, so that a burst is answered "busy, retry" instead of piling up (0: no
	// limit).
	MaxQueue int
	// KVUnified lets every slot use the whole context (llama-server's --kv-unified): the
	// slots share one pool of CtxSize cache rows instead of a fixed share each.
	KVUnified bool
	// ContextShift, when a slot's context fills, drops older tokens and goes on
	// (llama-server's --context-shift) instead of ending the generation.
	ContextShift bool
	// PromptCacheMiB bounds the prompt cache (llama-server's --cache-ram, see promptcache.go):
	// 0 is DefaultPromptCacheMiB, -1 unbounded. NoPromptCache turns it off (--cache-ram 0).
	PromptCacheMiB int
	NoPromptCache  bool
	// NoCacheIdleSlots keeps idle slots' prompts out of the prompt cache when another request
	// starts (llama-server's --no-cache-idle-slots).
	NoCacheIdleSlots bool
	// CacheReuse is the default n_cache_reuse (llama-server's --cache-reuse): the shortest
	// chunk of a slot's cache after the common prefix that is moved into place rather than
	// recomputed; 0 is off.
	CacheReuse int
	// CtxCheckpoints is the most context checkpoints a slot keeps of a recurrent model's state
	// (llama-server's --ctx-checkpoints, recurrent.go): 0 is DefaultCtxCheckpoints, negative
	// none.
	CtxCheckpoints int
	// SWAFull is llama-server's --swa-full. Without it llama-server keeps only a window of a
	// sliding-window model's cache and ends a prompt's batches where it checkpoints that
	// (promptCuts); this cache always holds the whole context, so the flag only takes the cuts
	// away, as it does there.
	SWAFull bool
	// Device selects an adapter by index; -1 picks the best.
	Device int
	// Devices, when set, are the adapters to use instead of Device: the model's layers are
	// split across them (--device A,B; llama.cpp's --split-mode layer). An index may repeat
	// (two devices on one adapter). TensorSplit is each one's share of the layers
	// (--tensor-split; nil: in proportion to their memory).
	Devices     []int
	TensorSplit []float64
	// CheckedShaders compiles kernels with wgpu's runtime checks (--checked-shaders; see
	// gpu.Device.Checked), for diagnosis: by default they run unchecked.
	CheckedShaders bool
	// GPUMemory, when positive, is the device memory in bytes the engine may use
	// (--gpu-memory): the load checks the model against it rather than what the device
	// reports, and allocations beyond it fail as out of memory (gpu.Device.SetBudget).
	GPUMemory uint64
	// CPUExact makes a CPU adapter reproduce llama.cpp's CPU arithmetic bit for bit
	// (--cpu-exact, gpu.Device.SetCPUMath).
	CPUExact bool
	// KVF32 keeps the KV cache in f32 rather than f16.
	KVF32 bool
	// RawActivations skips rounding matmul activations as llama.cpp does (model.Options).
	RawActivations bool
	// Embeddings serves embedding and rerank tasks (llama-server's --embeddings).
	Embeddings bool
	// Pooling overrides the model file's pooling_type for embeddings: none, mean, cls, last or
	// rank (llama-server's --pooling); "" keeps the file's.
	Pooling string
	// Speculative configures speculative decoding; the zero value is off.
	Speculative SpecConfig
	// Readback chooses between reading back whole logits rows and only the best candidates
	// the GPU finds, where every sampler in a batch can work from them; the zero value is
	// ReadbackAuto.
	Readback Readback
	// SleepIdle, when positive, is how long the engine waits with no request running or queued
	// before it sleeps (llama-server's --sleep-idle-seconds): it frees the device and the model
	// on it, and loads them again for the next request (sleep.go).
	SleepIdle time.Duration
	// OnSleep, when set, is called on the engine goroutine once the engine has fallen asleep
	// (true) and once it is awake again (false).
	OnSleep func(asleep bool)
	// MMProjPath, when set, is a multimodal projector (llama-server's --mmproj): images in
	// prompts (EncodeImage, media.go).
	MMProjPath string
	// Lora are the LoRA adapters to load (--lora, --lora-scaled), each with its initial global
	// scale; LoraInitWithoutApply starts every scale at 0 (--lora-init-without-apply).
	Lora                 []LoraSpec
	LoraInitWithoutApply bool
	// ImageMinTokens and ImageMaxTokens, when positive, bound the tokens of an image for a
	// projector of variable resolution (Qwen's; llama-server's --image-min-tokens and
	// --image-max-tokens).
	ImageMinTokens, ImageMaxTokens int
	Logger                         *log.Logger
}

// InlineSoftwareBelow is the model file size under which a software adapter runs dispatches
// inline (gpu.PreferInlineSoftware): below it, per-dispatch overhead outweighs kernel time
// (stories260K decodes about 2.7x faster inline; a 134M-parameter Q4_K_M model 1.6x slower).
const InlineSoftwareBelow = 16 << 20

// Engine owns the device, the model and the KV cache; see the package comment.
type Engine struct {
	cfg     Config
	info    ModelInfo
	tok     *tokenizer.Tokenizer
	encoder bool // the model is an encoder (bert): it embeds and cannot generate
	// dev, model and kv are nil while the engine sleeps (sleep.go); only the engine goroutine
	// touches them.
	dev       *gpu.Device
	devs      []*gpu.Device // dev and the other devices of a split model (split.go)
	layers    []int         // each device's layers (nil: one device)
	model     *model.Model
	kv        *model.KVCache
	modelOpts model.Options // how model was loaded, to load it again on waking
	sleeping  atomic.Bool
	log       *log.Logger

	queue   chan *request
	waiting []*request   // taken from queue, waiting for the busy slot they asked for
	nWait   atomic.Int64 // len(waiting), for Stats
	nIdle   atomic.Int64 // idle slots when admit last looked: queued requests they will take at once
	quit    chan struct{}
	done    chan struct{}
	closeMu sync.Once
	taskIDs atomic.Int64
	// drain is closed by Drain (drain.go).
	drain     chan struct{}
	drainOnce sync.Once

	control chan *control // see control.go
	pending []*control    // control messages waiting for their slot
	stats   stats

	slots      []*slot
	slotCtx    int          // most tokens one slot holds
	cellLimit  int          // with a unified KV cache, the most cells (token rows) all slots hold; else 0
	cache      *promptCache // nil when off
	batch      int          // most tokens per forward pass
	pool       *pagePool
	ctxShift   bool
	cacheReuse int
	// recurrent marks a model with recurrent layers, whose state slots the engine's slots use
	// (recurrent.go); ctxCheckpoints is Config.CtxCheckpoints resolved. promptCuts marks a
	// model whose prompts llama-server evaluates in pieces ending where it checkpoints
	// (recurrent, or sliding-window without SWAFull): the same pieces keep its arithmetic.
	recurrent      bool
	promptCuts     bool
	ctxCheckpoints int

	spec *speculator // nil without speculative decoding

	loraMu   sync.Mutex
	adapters []Adapter // Config.Lora's, with their global scales (lora.go)
	loraUse  *loraUse  // their requests by phase (lora_use.go)

	vision  *model.VisionEncoder // Config.MMProjPath's encoder, nil without one or asleep
	visionH *vision.Hparams      // its hyperparameters, nil without one
	media   mediaStore           // the images prompts hold (media.go)

	candidates      bool // read back candidates where the samplers allow (Config.Readback)
	candidatePasses atomic.Int64

	obs observer // the snapshot feed (feed.go)

	fault      atomic.Pointer[error] // why the engine cannot run requests (recover.go); nil: healthy
	recoveries atomic.Int64
	liveDevs   atomic.Pointer[[]*gpu.Device] // devs, for Stats on other goroutines
}

type request struct {
	ctx  context.Context
	id   int // llama-server's id_task
	task Task
	box  *outbox
	// use counts the request under the adapters it runs with (lora_use.go), by phase: set
	// before it is queued, then moved only by the engine goroutine.
	use      *loraUse
	adapters []int
	phase    requestPhase
}

// Load opens the device, loads the model (logging progress) and starts the engine goroutine.
func Load(ctx context.Context, cfg Config) (*Engine, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = log.Default()
	}
	if st, err := os.Stat(cfg.ModelPath); err == nil && st.Size() < InlineSoftwareBelow {
		gpu.PreferInlineSoftware()
	}
	devs, indexes, err := openDevices(cfg)
	if err != nil {
		return nil, err
	}
	for i, dev := range devs {
		logger.Info("device", "index", indexes[i], "adapter", dev.Info.Name, "type", dev.Info.Type, "backend", dev.Info.Backend, "driver", dev.Info.Driver, "checked_shaders", dev.Checked)
	}
	e, err := load(ctx, cfg, devs, indexes, logger)
	if err != nil {
		closeDevices(devs)
		return nil, err
	}
	return e, nil
}

func load(ctx context.Context, cfg Config, devs []*gpu.Device, indexes []int, logger *log.Logger) (*Engine, error) {
	dev := devs[0] // the main device (split.go)
	f, err := gguf.Open(cfg.ModelPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	start := time.Now()
	nSlots := max(cfg.Slots, 1)
	batch := cfg.BatchSize
	if batch <= 0 {
		batch = 512
	}
	spec, err := cfg.Speculative.resolve()
	if err != nil {
		return nil, err
	}
	outputs := nSlots
	if spec.Type != SpecNone { // each slot may verify NMax drafted tokens after its next one
		outputs = nSlots * (spec.NMax + 1)
	}
	opts := model.Options{MaxBatch: batch, MaxOutputs: outputs, KVF32: cfg.KVF32, RawActivations: cfg.RawActivations}
	c, err := model.ReadConfig(f)
	if err != nil {
		return nil, err
	}
	kp, err := planKV(cfg, c.NCtxTrain, nSlots)
	if err != nil {
		return nil, err
	}
	kp.states = stateSlots(nSlots, c.Recurrent != nil && spec.Type != SpecNone)
	if kp.nCtx > c.NCtxTrain {
		logger.Warn("context size exceeds the model's training context", "n_ctx", kp.nCtx, "n_ctx_train", c.NCtxTrain)
	}
	layers, err := splitLayers(devs, c, cfg)
	if err != nil {
		return nil, err
	}
	if layers != nil {
		err = checkFitsSplit(devs, indexes, layers, f, c, opts, kp, cfg)
	} else {
		err = checkFits(dev, f, c, opts, kp, cfg)
	}
	if err != nil {
		return nil, err
	}
	split, _ := describeSplit(devs, indexes, layers, c.NLayer)
	if layers != nil {
		for _, d := range split {
			logger.Info("layers on device", "index", d.Index, "adapter", d.Name, "layers", fmt.Sprintf("%d-%d", d.Lo, d.Hi-1), "output", d.Output)
		}
	}
	m, err := loadWeights(devs, layers, f, cfg.ModelPath, opts, cfg.LoadProgress, logger)
	if err != nil {
		return nil, refusedAtLoad(err, dev, f, c, opts, kp, cfg)
	}
	if err := ctx.Err(); err != nil {
		m.Close()
		return nil, err
	}
	adapters, err := loadAdapters(m, cfg.Lora, cfg.LoraInitWithoutApply)
	if err != nil {
		m.Close()
		return nil, err
	}
	c = m.Config
	nCtx, slotCtx, cellLimit, nPages := kp.nCtx, kp.slotCtx, kp.cellLimit, kp.nPages
	kv, err := m.NewKVCacheFor(nPages<<pageBits, kp.states)
	if err != nil {
		m.Close()
		return nil, refusedAtLoad(err, dev, f, c, opts, kp, cfg)
	}
	pooling, err := embedPooling(cfg, m)
	if err != nil {
		m.Close()
		return nil, err
	}
	var venc *model.VisionEncoder
	if cfg.MMProjPath != "" {
		if venc, err = loadVision(dev, cfg, c.NEmbd, batch, c.MRoped()); err != nil {
			kv.Release()
			m.Close()
			return nil, err
		}
	}
	var sp *speculator
	switch spec.Type {
	case SpecDraft:
		if sp, err = loadDraft(dev, spec, m, draftOptions(cfg, batch), nSlots, slotCtx, logger); err != nil {
			if venc != nil {
				venc.Close()
			}
			kv.Release()
			m.Close()
			return nil, err
		}
	case SpecNgram:
		sp = &speculator{cfg: spec}
		logger.Info("n-gram drafting", "n", spec.NgramN, "m", spec.NgramM, "draft_max", spec.NMax, "draft_min", spec.NMin)
	}
	alias := cfg.Alias
	if alias == "" {
		alias = strings.TrimSuffix(filepath.Base(cfg.ModelPath), filepath.Ext(cfg.ModelPath))
	}
	var nParams uint64
	for i := range f.Tensors {
		nParams += f.Tensors[i].NumElements()
	}
	e := &Engine{
		info: ModelInfo{
			Name: alias, Path: cfg.ModelPath, NCtx: slotCtx, NCtxTrain: c.NCtxTrain, NVocab: c.NVocab,
			NEmbd: c.NEmbd, NParams: nParams, Size: c.TensorSize, FileType: c.FileType,
			ChatTemplate: c.ChatTmpl, NSlots: nSlots, SpecType: spec.Type,
			Embeddings: cfg.Embeddings, Pooling: pooling, RerankTemplate: c.RerankTmpl, Split: split,
		},
		cfg: cfg, tok: m.Tokenizer, encoder: c.Encoder, dev: dev, devs: devs, layers: layers, model: m, kv: kv, modelOpts: opts, log: logger,
		queue:      make(chan *request, 256),
		control:    make(chan *control, 16),
		quit:       make(chan struct{}),
		done:       make(chan struct{}),
		drain:      make(chan struct{}),
		slotCtx:    slotCtx,
		cellLimit:  cellLimit,
		batch:      batch,
		pool:       newPagePool(nPages),
		ctxShift:   cfg.ContextShift && !c.MRoped(), // as llama.cpp: M-RoPE positions do not shift
		cacheReuse: cfg.CacheReuse,
		recurrent:  m.Recurrent(),
		promptCuts: m.Recurrent() || c.SlidingWindow > 0 && !cfg.SWAFull,
		spec:       sp,
		candidates: cfg.Readback.candidates(dev),
		vision:     venc,
		adapters:   adapters,
		loraUse:    newLoraUse(adapters),
		obs:        observer{poke: make(chan struct{}, 1)},
	}
	e.liveDevs.Store(&devs)
	if e.promptCuts {
		e.ctxCheckpoints = cmp.Or(cfg.CtxCheckpoints, DefaultCtxCheckpoints)
	}
	if e.recurrent { // as llama-server when the memory cannot shift or cut a sequence back
		if e.ctxShift {
			e.ctxShift = false
			logger.Warn("ctx_shift is not supported by this context, it will be disabled")
		}
		if e.cacheReuse > 0 {
			e.cacheReuse = 0
			logger.Warn("cache_reuse is not supported by this context, it will be disabled")
		}
	}
	if venc != nil {
		h := venc.H
		e.visionH = &h
		e.info.ImageTokens = h.MaxTokens()
		logger.Info("vision projector loaded", "path", cfg.MMProjPath, "type", h.Projector, "image_size", h.ImageSize, "image_tokens", h.MaxTokens())
	}
	for i := 0; i < nSlots; i++ {
		e.slots = append(e.slots, &slot{id: i})
	}
	e.cache = promptCacheConfig(cfg, m.KVTokenBytes())
	switch {
	case e.cache == nil && !cfg.NoCacheIdleSlots:
		logger.Warn("--cache-idle-slots requires --cache-ram, disabling")
	case e.cache != nil && e.cache.idleSlots:
		logger.Debug("__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__")
	}
	e.stats.update(func(st *Stats) {
		st.Start, st.KVCapacity = time.Now(), nPages<<pageBits
		st.KVPageSize, st.KVPages = 1<<pageBits, nPages
		if cellLimit > 0 {
			st.KVCapacity = cellLimit
		}
	})
	fields := []any{"name", alias, "arch", c.Arch, "layers", c.NLayer, "n_embd", c.NEmbd}
	if c.NExpert > 0 {
		fields = append(fields, "experts", fmt.Sprintf("%d (%d used)", c.NExpert, c.NExpertUsed))
	}
	logger.Info("model loaded", append(fields, "vocab", c.NVocab, "n_ctx", nCtx, "slots", nSlots, "type", c.FileType,
		"took", time.Since(start).Round(time.Millisecond))...)
	go e.loop()
	return e, nil
}

// loadWeights loads the model in f (read from path) onto dev, logging progress every 10% and
// handing every step to onProgress (Config.LoadProgress) when set.
func loadWeights(devs []*gpu.Device, layers []int, f *gguf.File, path string, opts model.Options, onProgress func(done, total uint64), logger *log.Logger) (*model.Model, error) {
	lastPct := -1
	opts.Progress = func(done, total uint64) {
		if total == 0 {
			return
		}
		if onProgress != nil {
			onProgress(done, total)
		}
		if pct := int(done * 100 / total); pct/10 > lastPct/10 {
			lastPct = pct
			logger.Info("loading model", "progress", fmt.Sprintf("%d%%", pct), "MiB", done>>20)
		}
	}
	m, err := model.LoadSplit(devs, layers, f, opts)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return m, nil
}

// draftOptions are the draft model's load options: one output per slot is set by loadDraft.
func draftOptions(cfg Config, batch int) model.Options {
	return model.Options{MaxBatch: batch, KVF32: cfg.KVF32, RawActivations: cfg.RawActivations}
}

// Tokenizer returns the model's tokenizer; it is safe for concurrent use.
func (e *Engine) Tokenizer() *tokenizer.Tokenizer { return e.tok }

// Info describes the loaded model.
func (e *Engine) Info() ModelInfo { return e.info }

// Submit queues a task. The returned channel yields partial results and then one final result
// (Stop true), after which it is closed. Cancelling ctx ends the generation at the next token.
func (e *Engine) Submit(ctx context.Context, t Task) (<-chan Result, error) {
	if err := e.checkKind(t); err != nil {
		return nil, err
	}
	if t.Kind != TaskGenerate {
		return e.enqueue(ctx, t)
	}
	if len(t.Prompt) == 0 {
		return nil, ErrEmptyPrompt
	}
	if t.Slot != nil && (*t.Slot < 0 || *t.Slot >= len(e.slots)) {
		return nil, fmt.Errorf("%w: %d (the server has %d slots)", ErrInvalidSlot, *t.Slot, len(e.slots))
	}
	if len(t.Prompt) >= e.info.NCtx {
		return nil, fmt.Errorf("%w: the request has %d prompt tokens, the context holds %d", ErrPromptTooBig, len(t.Prompt), e.info.NCtx)
	}
	for _, id := range t.Prompt {
		if (id < 0 || int(id) >= e.info.NVocab) && id < model.MediaToken {
			return nil, fmt.Errorf("engine: prompt token %d out of range (vocabulary %d)", id, e.info.NVocab)
		}
	}
	if err := e.mediaRows(t.Prompt); err != nil {
		return nil, err
	}
	// As llama-server, n_probs beyond the vocabulary lists the whole vocabulary.
	t.Params.NProbs = min(max(t.Params.NProbs, 0), e.info.NVocab)
	return e.enqueue(ctx, t)
}

// enqueue puts a checked task on the queue.
func (e *Engine) enqueue(ctx context.Context, t Task) (<-chan Result, error) {
	if e.draining() {
		return nil, ErrClosed
	}
	if e.shed() {
		return nil, ErrQueueFull
	}
	r := &request{ctx: ctx, id: int(e.taskIDs.Add(1) - 1), task: t, box: newOutbox()}
	e.countAdapters(r)
	select {
	case e.queue <- r:
		out := make(chan Result, 16)
		go r.box.pump(ctx, out)
		return out, nil
	case <-e.quit:
		r.setPhase(phaseNone)
		return nil, ErrClosed
	case <-ctx.Done():
		r.setPhase(phaseNone)
		return nil, ctx.Err()
	}
}

// shed reports whether a new request would exceed Config.MaxQueue, counting it as shed.
func (e *Engine) shed() bool {
	if e.cfg.MaxQueue <= 0 {
		return false
	}
	waiting := len(e.queue) + int(e.nWait.Load()) - int(e.nIdle.Load())
	if waiting < e.cfg.MaxQueue {
		return false
	}
	e.stats.update(func(st *Stats) { st.Shed++ })
	return true
}

// Close stops the engine goroutine (failing queued requests) and frees the GPU.
func (e *Engine) Close() error {
	e.closeMu.Do(func() {
		close(e.quit)
		<-e.done
		e.freeDevice()
	})
	return nil
}

// send queues a result for the client (queued results still reach a reader that left, while
// its channel's buffer has room); it reports false when the client has gone.
func (r *request) send(res Result) bool {
	r.box.push(res)
	return r.ctx.Err() == nil
}

// fail ends a request that never reached a slot with err.
func (r *request) fail(err error) {
	r.box.push(Result{Stop: true, StopType: StopNone, Err: err})
	r.close()
}

// close ends the request's results, which the last has been pushed, and its counting.
func (r *request) close() {
	r.box.close()
	r.setPhase(phaseNone)
}
