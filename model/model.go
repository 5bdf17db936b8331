package model

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// Model is a loaded model of any registered architecture (Architectures): weights on the GPU
// plus the tokenizer.
type Model struct {
	Config    Config               // hyperparameters read from the file's metadata
	Tokenizer *tokenizer.Tokenizer // built from the file's tokenizer.ggml.* vocabulary

	dev        *gpu.Device
	lo, hi     int    // the layers this model's device holds: all, or a stage's (split.go)
	next       *Model // the next stage of a split model, on another device; nil for the last
	tokEmbd    gpu.Weight
	outputNorm *gpu.Buffer
	output     []proj
	ropeFreqs  *gpu.Buffer           // Llama 3.1's RoPE frequency factors, or nil
	ropeTables map[ropeKey]ropeTable // with gpu.Device.CPUMath: llama.cpp's RoPE angles (rope_tables.go)
	layers     []layer
	vectors    []*gpu.Buffer
	weights    []gpu.Weight

	enc *encoder // BERT's extra weights, or nil for decoders

	shapes    map[string][]uint64 // the file's tensors' shapes, for checking adapters
	adapters  int                 // LoRA adapters loaded (adapter.go)
	layerLora []loraTerms         // each layer's adapter pairs
	loraOut   []loraTerm          // the output matrix's
	loraRank  int                 // the largest group's rank, which sizes scratch.loraT
	passLora  []float32           // the adapters' user scales in the pass being recorded (Batch.Lora)
	pending   *pendingLora        // a residual projection's terms left for the next RMS norm

	maxBatch   int
	maxOutputs int
	kvF16      bool
	actQuant   bool
	scratch    scratch
	draft      draftScratch       // DraftGreedy's buffers, made on first use
	cand       candScratch        // ForwardTopK's buffers, made on first use
	unfused    bool               // record fused.go's roundings as separate dispatches (tests compare)
	probe      probeState         // Batch.Probe on its way to its layer, and its weights (probe.go)
	rec        gpu.RecurrentBatch // the pass's recurrent sequences (recurrent_state.go)
	zeroState  []byte             // zeros to clear a state slot's layer with
}

// scratch holds the activations of one forward pass, sized for maxBatch tokens.
type scratch struct {
	x, xn, qkv, attn, gu, ffn, xq, xsums, tmp, logits, ids, pos, outRows *gpu.Buffer

	// attnPos is pos with each row's attention end (Batch.AttnEnds) for its position, for
	// batches with images; nil until one comes.
	attnPos *gpu.Buffer
	// mpos are an M-RoPE model's rotary positions (Batch.MPos); nil for other models.
	mpos *gpu.Buffer
	// loraT holds a LoRA group's rank-wide products (A·x); nil without adapters. loraExp
	// holds them for each expert assignment (adapter_experts.go); nil without such terms.
	loraT, loraExp *gpu.Buffer
	// attnScores holds decoding's attention scores at long contexts on CPU adapters
	// (gpu.AttnParams.Scores); nil until one comes.
	attnScores *gpu.Buffer
	// keyEnds holds each token's last attended position and row base for an encoder (see
	// recordEncoder).
	keyEnds *gpu.Buffer
	// attnState carries attention's running softmax between the chunks of a long key range
	// on CPU adapters (gpu.AttnParams.State); a single float elsewhere.
	attnState *gpu.Buffer
	// A Mixture of Experts' buffers (nil for dense models): the router's logits, each
	// token's chosen experts and their weights, the assignments' (token and slot) fused
	// gate|up rows, activations and outputs, and the grouping of assignments by expert.
	moeLogits, moeIDs, moeWeights, moeGU, moeAct, moeOut, moePlan *gpu.Buffer
	// A hybrid recurrent model's buffers (nil for others): the gated attention's gate, the
	// Gated DeltaNet's conv outputs and per-head gates, and the pass's sequences as the
	// recurrent kernels read them.
	gate, ssmConv, ssmG, ssmBeta, recSeqs *gpu.Buffer
	// experts holds the experts' normed output beside the dense FFN's (Config.DenseMoE).
	experts *gpu.Buffer
}

// buffers lists the scratch buffers in scratchSizes' order, the MoE ones only for a model
// with experts, the recurrent ones only for a hybrid.
func (s *scratch) buffers(c Config) []**gpu.Buffer {
	b := []**gpu.Buffer{&s.x, &s.xn, &s.qkv, &s.attn, &s.gu, &s.ffn, &s.xq, &s.tmp, &s.xsums, &s.logits,
		&s.ids, &s.pos, &s.outRows, &s.keyEnds, &s.attnState}
	if c.NExpert > 0 {
		b = append(b, &s.moeLogits, &s.moeIDs, &s.moeWeights, &s.moeGU, &s.moeAct, &s.moeOut, &s.moePlan)
	}
	if c.Recurrent != nil {
		b = append(b, &s.gate, &s.ssmConv, &s.ssmG, &s.ssmBeta, &s.recSeqs)
	}
	if c.DenseMoE {
		b = append(b, &s.experts)
	}
	return b
}

// Options tune loading.
type Options struct {
	// MaxBatch is the most tokens one forward pass processes (llama.cpp's -ub); longer
	// prompts are split into several passes. Default 512.
	MaxBatch int
	// Progress, when set, is called after each tensor upload with bytes done and total.
	Progress func(done, total uint64)
	// KVF32 keeps the KV cache in f32 instead of f16 (llama.cpp's --cache-type-k f32).
	KVF32 bool
	// MaxOutputs is the most rows of logits one batch returns (the engine's slot count).
	// Default 1.
	MaxOutputs int
	// RawActivations feeds matmuls plain f32 activations. By default they are rounded as
	// llama.cpp's CPU backend rounds them for each weight type (8-bit blocks for quantized
	// weights, f16 for f16), so quantized models reproduce llama.cpp's greedy output.
	RawActivations bool
}

// Load reads a GGUF model's hyperparameters, tokenizer and weights and uploads the weights.
// The file may be closed once Load returns.
func Load(dev *gpu.Device, f *gguf.File, opts Options) (*Model, error) {
	return LoadSplit([]*gpu.Device{dev}, nil, f, opts)
}

// readModel reads the hyperparameters and tokenizer and settles opts' defaults.
func readModel(f *gguf.File, opts *Options) (Config, *tokenizer.Tokenizer, error) {
	cfg, err := ReadConfig(f)
	if err != nil {
		return cfg, nil, err
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return cfg, nil, fmt.Errorf("model: %w", err)
	}
	if cfg.NVocab == 0 {
		cfg.NVocab = tok.NVocab()
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 512
	}
	opts.MaxOutputs = max(opts.MaxOutputs, 1)
	if k := cfg.NExpertUsed; k > 0 && opts.MaxBatch*k > gpu.MoEMaxAssignments {
		return cfg, nil, fmt.Errorf("model: a batch of %d tokens sends %d token-expert pairs through the experts, more than the %d one pass takes: lower the batch size (-ub %d)",
			opts.MaxBatch, opts.MaxBatch*k, gpu.MoEMaxAssignments, gpu.MoEMaxAssignments/k)
	}
	return cfg, tok, nil
}

// loadStage loads layers [lo, hi) of the model onto dev, with the token embeddings when it
// starts the model and the output norm and matrix when it ends it; *done carries the bytes
// uploaded by earlier stages, for progress.
func loadStage(dev *gpu.Device, f *gguf.File, opts Options, cfg Config, tok *tokenizer.Tokenizer, lo, hi int, done *uint64) (*Model, error) {
	m := &Model{Config: cfg, Tokenizer: tok, dev: dev, lo: lo, hi: hi, maxBatch: opts.MaxBatch, maxOutputs: min(opts.MaxOutputs, opts.MaxBatch), kvF16: !opts.KVF32, actQuant: !opts.RawActivations,
		shapes: make(map[string][]uint64, len(f.Tensors)), layerLora: make([]loraTerms, cfg.NLayer)}
	for _, t := range f.Tensors {
		m.shapes[t.Name] = t.Shape
	}
	l := &loader{f: f, dev: dev, progress: opts.Progress, total: cfg.TensorSize, done: *done}
	if err := m.loadWeights(l); err != nil {
		l.release()
		return nil, err
	}
	*done = l.done
	m.vectors, m.weights = l.bufs, l.weights
	if dev.CPUMath {
		if err := m.loadRopeTables(l); err != nil {
			m.Close()
			return nil, err
		}
	}
	if err := m.allocScratch(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// loadWeights loads the architecture's tensors: the decoders' embeddings, output norm and
// matrix, then each block's through the architecture's layer loader.
func (m *Model) loadWeights(l *loader) error {
	c, a := &m.Config, m.archFor()
	if a.load != nil {
		return a.load(m, l)
	}
	var err error
	first, last := m.lo == 0, m.hi == c.NLayer
	tied := !l.hasTensor("output.weight") // the output matrix is the token embeddings
	if first || last && tied {
		if m.tokEmbd, err = l.matrix("token_embd.weight", c.NVocab, c.NEmbd); err != nil {
			return err
		}
	}
	if l.hasTensor("rope_freqs.weight") {
		if m.ropeFreqs, err = l.vector("rope_freqs.weight", c.NRot/2); err != nil {
			return err
		}
	}
	if last {
		if m.outputNorm, err = l.vector("output_norm.weight", c.NEmbd); err != nil {
			return err
		}
		out := m.tokEmbd
		if !tied {
			if out, err = l.matrix("output.weight", c.NVocab, c.NEmbd); err != nil {
				return err
			}
		}
		m.output = []proj{{w: out}}
	}
	m.layers = make([]layer, c.NLayer) // a stage's other layers stay empty
	for i := m.lo; i < m.hi; i++ {
		if err := a.layer(l, c, &m.layers[i], i); err != nil {
			return err
		}
	}
	return nil
}

func (m *Model) allocScratch() error {
	dst := m.scratch.buffers(m.Config)
	for i, sz := range scratchSizes(m.Config, m.maxBatch, m.maxOutputs, m.dev.BarrierFree) {
		var err error
		if *dst[i], err = m.dev.NewBuffer(sz.name, uint64(sz.n)*4); err != nil {
			return fmt.Errorf("model: scratch %s: %w", sz.name, err)
		}
	}
	return nil
}

// scratchSize is one activation buffer of the forward pass, in 4-byte words.
type scratchSize struct {
	name string
	n    int
}

// scratchSizes are the forward pass's activation buffers for batches of t tokens and outputs
// rows of logits, in allocScratch's order; Footprint sums them before anything is loaded.
func scratchSizes(c Config, t, outputs int, barrierFree bool) []scratchSize {
	ff := c.NFF
	if c.NExpert > 0 && !c.DenseMoE {
		ff = max(c.NFFShared, 1) // the dense FFN's buffers serve a shared expert alone
	}
	// act holds rounded activations: any layer input, or the experts' inputs to their down
	// projections (a row per assignment).
	dv := c.SSMValHeads * c.SSMHeadDim // a Gated DeltaNet's output (0 without)
	qkv, q := c.maxQKV()
	act := t * max(c.NEmbd, q, ff, c.NExpertUsed*c.NFFExpert, dv)
	attnState := 1
	if barrierFree { // room for a full batch on CPU adapters, where long attention runs in chunks
		attnState = gpu.AttentionStateSize(t, c.NHead, c.maxHeadDim())
	}
	sizes := []scratchSize{
		{"x", t * c.NEmbd}, {"xn", t * c.NEmbd}, {"qkv", t * max(qkv, c.deltaNetWidth())},
		{"attn", t * max(q, dv)}, {"gate_up", t * 2 * ff}, {"ffn", t * ff},
		{"act", act}, {"block_out", t * c.NEmbd}, {"act_sums", act / 32},
		{"logits", outputs * c.NVocab}, {"ids", t}, {"pos", 2 * t}, {"out_rows", outputs},
		{"key_ends", 2 * t}, {"attn_state", attnState},
	}
	if c.NExpert > 0 {
		na := t * c.NExpertUsed // assignments: a token's slots
		sizes = append(sizes, scratchSize{"moe_logits", t * c.NExpert}, scratchSize{"moe_ids", na}, scratchSize{"moe_weights", na},
			scratchSize{"moe_gate_up", na * 2 * c.NFFExpert}, scratchSize{"moe_act", na * c.NFFExpert}, scratchSize{"moe_out", na * c.NEmbd},
			scratchSize{"moe_plan", gpu.MoEPlanSize(na, c.NExpert)})
	}
	if c.Recurrent != nil {
		sizes = append(sizes, scratchSize{"attn_gate", t * c.NHead * c.HeadDim}, scratchSize{"ssm_conv_out", t * c.convChannels()},
			scratchSize{"ssm_g", t * c.SSMValHeads}, scratchSize{"ssm_beta", t * c.SSMValHeads}, scratchSize{"recurrent_seqs", 3 * t})
	}
	if c.DenseMoE {
		sizes = append(sizes, scratchSize{"experts_out", t * c.NEmbd})
	}
	return sizes
}

// Device is the GPU device the model's weights and passes live on.
func (m *Model) Device() *gpu.Device { return m.dev }

// Close releases the model's device memory, every stage's.
func (m *Model) Close() {
	if m.next != nil {
		m.next.Close()
		m.next = nil
	}
	m.releaseRopeTables()
	for _, b := range m.vectors {
		b.Release()
	}
	for _, w := range m.weights {
		w.Release()
	}
	for _, b := range m.scratch.buffers(m.Config) {
		if *b != nil {
			(*b).Release()
		}
	}
	s := &m.scratch
	for _, b := range []*gpu.Buffer{s.attnPos, s.mpos, s.loraT, s.attnScores} { // made on demand
		if b != nil {
			b.Release()
		}
	}
	m.draft.release()
	m.cand.release()
	m.probe.release()
	m.vectors, m.weights = nil, nil
}

// qkvWidth is the length of a fused [q | k | v] row.
func (m *Model) qkvWidth() int {
	c := m.Config
	return (c.NHead + 2*c.NKVHead) * c.HeadDim
}

// Forward runs tokens at positions pos0, pos0+1, ... through the model, writing their keys and
// values into the cache, and returns the logits of the last token. Each chunk of up to
// MaxBatch tokens is one command buffer and one submit; only the last reads anything back.
func (m *Model) Forward(kv *KVCache, tokens []int32, pos0 int) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("model: forward of zero tokens")
	}
	if pos0 < 0 || pos0+len(tokens) > kv.NCtx {
		return nil, fmt.Errorf("model: positions %d..%d exceed the context of %d", pos0, pos0+len(tokens)-1, kv.NCtx)
	}
	for start := 0; ; start += m.maxBatch {
		end := min(start+m.maxBatch, len(tokens))
		b := Batch{Tokens: tokens[start:end], Pos: make([]int32, end-start), Base: make([]int32, end-start)}
		for i := range b.Pos {
			b.Pos[i] = int32(pos0 + start + i)
		}
		last := end == len(tokens)
		if last {
			b.Logits = []int{end - start - 1}
		}
		logits, err := m.ForwardBatch(kv, b)
		if err != nil {
			return nil, err
		}
		if last {
			return logits[0], nil
		}
	}
}

// ForwardBatch runs one batch (at most MaxBatch tokens and MaxOutputs logit rows) as one
// command buffer and one submit, and returns the requested rows' logits.
func (m *Model) ForwardBatch(kv *KVCache, b Batch) ([][]float32, error) {
	if m.enc != nil {
		return nil, fmt.Errorf("model: %s is an embedding model: it does not generate text (use ForwardEmbed)", m.Config.Arch)
	}
	if err := m.checkBatch(kv, b); err != nil {
		return nil, err
	}
	return m.pass(kv, b)
}

// pass records and submits one forward pass of at most maxBatch tokens.
func (m *Model) pass(kv *KVCache, b Batch) ([][]float32, error) {
	t := m.last()
	c, s := t.Config, &t.scratch
	r, err := m.begin(kv, b)
	if err != nil {
		return nil, err
	}
	k := len(b.Logits)
	if k == 0 {
		return nil, r.Submit()
	}
	t.recordLogits(r, len(b.Tokens), b.Logits)
	raw, err := r.SubmitAndRead(s.logits, 0, uint64(k*c.NVocab)*4)
	if err != nil {
		return nil, err
	}
	all := gpu.Float32s(raw)
	out := make([][]float32, k)
	for i := range out {
		out[i] = all[i*c.NVocab : (i+1)*c.NVocab]
	}
	return out, nil
}

// beginStage uploads a checked batch and records its row copies and this stage's layers,
// leaving their output in the scratch's x; x, when not nil, is the previous stage's output,
// which this stage starts from instead of the token embeddings.
func (m *Model) beginStage(kv *KVCache, b Batch, x []byte) (*gpu.Recorder, error) {
	if err := m.upload(b); err != nil {
		return nil, err
	}
	if x != nil {
		if err := m.dev.Write(m.scratch.x, 0, x); err != nil {
			return nil, err
		}
	}
	maxKeys := 0
	for i := range b.Pos {
		maxKeys = max(maxKeys, int(b.Pos[i])+1)
	}
	attnPos := m.scratch.pos
	if b.AttnEnds != nil {
		attnPos = m.scratch.attnPos
		for _, e := range b.AttnEnds {
			maxKeys = max(maxKeys, int(e)+1)
		}
	}
	if err := m.uploadStates(kv, b); err != nil {
		return nil, err
	}
	r, err := m.dev.Begin()
	if err != nil {
		return nil, err
	}
	b.recordCopies(r, kv)
	m.recordLayers(r, kv, len(b.Tokens), b.sequences(), maxKeys, b.PageBits, attnPos, len(b.Logits))
	return r, nil
}

// upload writes a batch's inputs to the scratch buffers: token ids, positions and cache
// addressing (writePos), and the rows to gather logits from when recordLogits needs them.
func (m *Model) upload(b Batch) error {
	s, n := &m.scratch, len(b.Tokens)
	m.passLora = b.Lora
	if err := m.startProbe(b); err != nil {
		return err
	}
	if err := m.dev.Write(s.ids, 0, gpu.Bytes(b.Tokens)); err != nil {
		return err
	}
	if err := m.writePos(b); err != nil {
		return err
	}
	// Embedding rows go straight into the residual stream; the pass's token lookup skips
	// their placeholder ids, which are outside the vocabulary.
	for i, e := range b.Embeds {
		if e != nil && m.lo == 0 {
			if err := m.dev.Write(s.x, uint64(4*i*m.Config.NEmbd), gpu.Bytes(e)); err != nil {
				return err
			}
		}
	}
	if !gathers(b.Logits, n) {
		return nil
	}
	rows := make([]int32, len(b.Logits))
	for i, lr := range b.Logits {
		rows[i] = int32(lr)
	}
	return m.dev.Write(s.outRows, 0, gpu.Bytes(rows))
}

// gathers reports whether the logits rows must be gathered before the output projection:
// not when they are the last row alone or every row in order.
func gathers(rows []int, n int) bool {
	if len(rows) == 1 && rows[0] == n-1 {
		return false
	}
	if len(rows) != n {
		return true
	}
	for i, r := range rows {
		if r != i {
			return true
		}
	}
	return false
}

// record records the forward pass of n tokens whose inputs are in the scratch buffers (see
// upload), at most maxKeys positions deep, and the logits of the given rows into
// scratch.logits, in order.
func (m *Model) record(r *gpu.Recorder, kv *KVCache, n, seqs, maxKeys, pageBits int, logits []int) {
	m.recordLayers(r, kv, n, seqs, maxKeys, pageBits, m.scratch.pos, len(logits))
	if len(logits) > 0 {
		m.recordLogits(r, n, logits)
	}
}

// recordLayers records the decoder's layers over n tokens of seqs sequences whose inputs are
// in the scratch buffers, addressing the cache with pageBits (Batch.PageBits); attention
// takes each row's limit from attnPos (the positions, or Batch.AttnEnds in their place). Each
// block is the architecture's (arch.block). outputs is how many rows' logits follow.
func (m *Model) recordLayers(r *gpu.Recorder, kv *KVCache, n, seqs, maxKeys, pageBits int, attnPos *gpu.Buffer, outputs int) {
	c, s := m.Config, &m.scratch
	embScale := c.EmbedScale
	if embScale == 0 {
		embScale = 1
	}
	if m.lo == 0 { // a later stage starts from the previous one's output (beginStage)
		r.GetRowsScaled(m.tokEmbd, s.ids, s.x, n, embScale)
	}
	m.pending = nil
	p := &pass{r: r, kv: kv, n: n, seqs: seqs, maxKeys: maxKeys, pageBits: pageBits, outputs: outputs, attnPos: attnPos, rec: m.rec}
	block := m.archFor().block
	for i := m.lo; i < m.hi; i++ {
		block(m, p, i)
	}
	m.flushLora(r, n)
}

// recordLogits records the logits of the given rows of n tokens into scratch.logits, in order:
// the rows are normalised, gathered (unless they are the last row or all rows in order; upload
// wrote their indices) and projected.
func (m *Model) recordLogits(r *gpu.Recorder, n int, logits []int) {
	c, s, k := m.Config, &m.scratch, len(logits)
	r.RMSNorm(s.x, m.outputNorm, s.xn, c.NEmbd, n, c.RMSEps)
	src, row0 := s.xn, logits[0]
	if gathers(logits, n) {
		hidden := gpu.Weight{Type: gpu.F32, Rows: n, Cols: c.NEmbd, Chunks: []gpu.WeightChunk{{Buf: s.xn, Rows: n}}}
		r.GetRows(hidden, s.outRows, s.tmp, k)
		src, row0 = s.tmp, 0
	}
	m.project(r, m.output, src, row0, k, c.NEmbd, s.logits, c.NVocab, false)
	m.addLora(r, m.loraOut, src, row0, k, c.NEmbd, s.logits, c.NVocab)
	if c.FinalSoftCap > 0 {
		r.SoftCap(s.logits, k*c.NVocab, c.FinalSoftCap)
	}
}

// residual adds a block's output projection (of x, k wide), its bias when it has one (gpt-oss)
// and its adapters' terms to the residual stream: fused into the projection (the terms left
// for the next RMS norm when it can take them, deferLora), or projected, biased, normalised by
// Gemma's post-norm when there is one, and then added, in llama.cpp's order ((W·x + b) +
// residual).
func (m *Model) residual(r *gpu.Recorder, ps []proj, terms []loraTerm, x *gpu.Buffer, k int, bias, postNorm *gpu.Buffer, n int) {
	c, s := m.Config, &m.scratch
	if bias == nil && postNorm == nil {
		m.project(r, ps, x, 0, n, k, s.x, c.NEmbd, true)
		m.deferLora(r, terms, x, k, n)
		return
	}
	m.project(r, ps, x, 0, n, k, s.tmp, c.NEmbd, false)
	m.addLora(r, terms, x, 0, n, k, s.tmp, c.NEmbd)
	if bias != nil && postNorm == nil {
		r.AddBiased(s.x, s.tmp, bias, n*c.NEmbd, c.NEmbd)
		return
	}
	if bias != nil {
		r.BiasAct(s.tmp, bias, c.NEmbd, n, false)
	}
	if postNorm != nil {
		r.RMSNormAdd(s.tmp, postNorm, s.x, c.NEmbd, n, c.RMSEps)
		return
	}
	r.Add(s.x, s.tmp, n*c.NEmbd)
}

// project runs projections of the nTokens rows of x (k wide) from xRow0 into columns of the
// yStride-wide rows of y, first rounding the activations as llama.cpp would for each weight
// type (see Options.RawActivations); projections of one type share one rounding.
func (m *Model) project(r *gpu.Recorder, ps []proj, x *gpu.Buffer, xRow0, nTokens, k int, y *gpu.Buffer, yStride int, accumulate bool) {
	m.projectWith(r, ps, x, xRow0, nTokens, k, y, yStride, accumulate, nil)
}

// projectWith is project with an adapter's term added in the products' epilogue when epi is
// not nil.
func (m *Model) projectWith(r *gpu.Recorder, ps []proj, x *gpu.Buffer, xRow0, nTokens, k int, y *gpu.Buffer, yStride int, accumulate bool, epi *gpu.LoRAEpilogue) {
	m.eachRounded(r, ps, x, xRow0, nTokens, k, nTokens, func(p proj, in gpu.Acts) {
		if epi != nil {
			r.MatMulLoRA(p.w, in, nTokens, y, yStride, p.col, accumulate, *epi)
		} else {
			r.MatMulAt(p.w, in, nTokens, y, yStride, p.col, accumulate)
		}
	})
}

// eachRounded calls do for each projection with its input, the rows xRow0 .. xRow0+rows of x
// (k wide) rounded as llama.cpp's CPU backend rounds them for the projection's weight type
// (see Options.RawActivations); projections of one type share one rounding.
//
// On a GPU, rows that every projection of their rounding multiplies with integer dot products
// (gpu.Device.IntDotFor, for products of intDotRows rows each; 0: none) are rounded packed for
// them (QuantizeForIntDot).
func (m *Model) eachRounded(r *gpu.Recorder, ps []proj, x *gpu.Buffer, xRow0, rows, k, intDotRows int, do func(p proj, in gpu.Acts)) {
	rounded, acts := gpu.ActNone, gpu.Acts{}
	for _, p := range ps {
		in := gpu.Acts{X: x, Row0: xRow0}
		if a := gpu.ActFor(p.w.Type); m.actQuant && a != gpu.ActNone && k%a.Block() == 0 {
			if a != rounded {
				if intDotRows > 0 && m.allIntDot(ps, a, intDotRows) {
					acts = r.QuantizeForIntDot(a, x, xRow0, rows, k, m.scratch.xq, m.scratch.xsums)
				} else {
					acts = r.QuantizeActivations(a, x, xRow0, rows, k, m.scratch.xq, m.scratch.xsums)
				}
				rounded = a
			}
			in = acts
		}
		do(p, in)
	}
}

// allIntDot reports whether every projection of ps whose activations round as a multiplies
// with integer dot products, in products of rows rows.
func (m *Model) allIntDot(ps []proj, a gpu.ActQuant, rows int) bool {
	for _, p := range ps {
		if gpu.ActFor(p.w.Type) == a && !m.dev.IntDotFor(p.w.Type, rows) {
			return false
		}
	}
	return true
}

// projectScaled is project of one projection, from row 0 of x, adding scale times its products
// into y (a LoRA group's B).
func (m *Model) projectScaled(r *gpu.Recorder, p proj, x *gpu.Buffer, nTokens, k int, y *gpu.Buffer, yStride int, scale float32) {
	m.eachRounded(r, []proj{p}, x, 0, nTokens, k, nTokens, func(p proj, in gpu.Acts) {
		r.MatMulScaledAdd(p.w, in, nTokens, y, yStride, p.col, scale)
	})
}

// WeightBytes is the size of the weights on the device: what one decode step of a dense model
// reads (ActiveWeightBytes for a Mixture of Experts).
func (m *Model) WeightBytes() uint64 {
	return m.sumStages(func(st *Model) uint64 {
		var n uint64
		for _, b := range st.vectors {
			n += b.Size()
		}
		for _, w := range st.weights {
			n += w.Bytes()
		}
		return n
	})
}

// ActiveWeightBytes is what one decode step reads of the weights: all of a dense model's, and
// of a Mixture of Experts' experts the share one token runs (NExpertUsed of NExpert).
func (m *Model) ActiveWeightBytes() uint64 {
	n, _ := m.active()
	return n
}

// ActiveParams is the weight parameters one token goes through (ActiveWeightBytes').
func (m *Model) ActiveParams() uint64 {
	_, p := m.active()
	return p
}

// active sums the weights' bytes and parameters, experts counted at the share one token runs.
func (m *Model) active() (bytes, params uint64) {
	if m.next != nil {
		bytes, params = m.next.active()
	}
	for _, b := range m.vectors {
		bytes += b.Size()
		params += b.Size() / 4
	}
	c := m.Config
	for _, w := range m.weights {
		b, p := w.Bytes(), uint64(w.Rows)*uint64(w.Cols)
		if w.Experts > 0 && c.NExpert > 0 {
			b, p = b*uint64(c.NExpertUsed)/uint64(w.Experts), p*uint64(c.NExpertUsed)/uint64(w.Experts)
		}
		bytes += b
		params += p
	}
	return bytes, params
}

// Params is the number of weight parameters.
func (m *Model) Params() uint64 {
	return m.sumStages(func(st *Model) uint64 {
		var n uint64
		for _, b := range st.vectors {
			n += b.Size() / 4
		}
		for _, w := range st.weights {
			n += uint64(w.Rows) * uint64(w.Cols)
		}
		return n
	})
}
