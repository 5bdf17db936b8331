package engine

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// The engine side of snapshot.go's feed. The engine goroutine records each pass (a ring under
// a mutex) and, at most every snapshotEvery, builds a Snapshot of what only it may read (the
// slots, the page pool), publishing it with an atomic pointer and a non-blocking send. What
// costs more than copying a few slices — the selected slot's probabilities over a whole
// logits row, detokenising the slots' tails — is left to the first reader of each snapshot:
// the rows and tokens it needs never change once the engine has sampled from them.

// snapshotEvery is the least time between two snapshots, but for the one after an idle
// engine's last pass, which is published at once.
const snapshotEvery = time.Second / 60

// topCandidates is how many of the selected slot's candidates a snapshot lists.
const topCandidates = 8

// tailTokens and tailBytes bound a slot's Tail: the text of its last tokens, cut to the end.
const (
	tailTokens = 48
	tailBytes  = 120
)

// Feed is an engine's observer side (see snapshot.go). Its methods are safe for concurrent use
// and never wait for the engine.
type Feed struct {
	changed      chan struct{}
	poke         chan struct{} // the engine's: wakes it when idle to publish
	latest       atomic.Pointer[published]
	selected     atomic.Int64
	probe        atomic.Pointer[probeReq] // feed_probe.go
	probeArmed   atomic.Bool              // the next pass of the probed slot probes
	profileEvery atomic.Int64             // nanoseconds, 0: off

	mu   sync.Mutex
	recs [PassHistory]PassRecord // record i of all kept is at recs[i%PassHistory]
	n    uint64                  // records kept so far
}

// observer is the engine goroutine's state for its Feed; only feed is read elsewhere.
type observer struct {
	feed      atomic.Pointer[Feed]
	poke      chan struct{} // made by load: Feed, Select and deferred snapshots wake an idle engine
	passes    uint64        // forward passes run, counted whether or not anyone watches
	dirty     bool          // a control message or a poke may have changed what the last snapshot shows
	built     time.Time     // when the last snapshot was built
	builtPass uint64        // and the pass it showed
	asleep    bool          // whether the engine slept then
	deferred  time.Time     // a poke is due then for a snapshot held back by snapshotEvery
	watch     passWatch     // the pass being run, reused
	profiled  time.Time     // when the last pass was profiled
	kernels   []KernelView  // its result, shared by the snapshots that show it
	kernelsAt uint64
	memModel  *model.Model // the model mem describes
	mem       MemoryView
	shape     ModelShape
	lora      map[string][]float32 // scales by loraKey, parsed once
	attention *Attention           // the last probe's weights (feed_probe.go)
	probeSlot int                  // the slot the running pass probes
}

// published is a snapshot with what its first reader fills in (resolve).
type published struct {
	snap  Snapshot
	once  sync.Once
	tok   *tokenizer.Tokenizer
	tails [][]int32 // per slot: its last tailTokens cached tokens
	top   topSource // the selected slot's last sampling step
	topAt int       // the index of the selected slot in snap.Slots, -1 for none
}

// topSource is what a sampler had at its last step: a whole logits row or the GPU's best
// candidates with the row's log-sum-exp; neither is written again once sampled from.
type topSource struct {
	row    []float32
	cand   *model.Candidates
	picked int32
}

// Feed returns the engine's feed, starting it on the first call; from then on the engine
// records passes and publishes snapshots, and before it pays for neither.
func (e *Engine) Feed() *Feed {
	if f := e.obs.feed.Load(); f != nil {
		return f
	}
	f := &Feed{changed: make(chan struct{}, 1), poke: e.obs.poke}
	f.selected.Store(-1)
	if !e.obs.feed.CompareAndSwap(nil, f) {
		return e.obs.feed.Load()
	}
	f.wake() // an idle engine publishes its state now
	return f
}

// Latest returns the newest snapshot, false before the first; the caller owns the copy.
func (f *Feed) Latest() (Snapshot, bool) {
	p := f.latest.Load()
	if p == nil {
		return Snapshot{}, false
	}
	p.once.Do(p.resolve)
	if f.probe.Load() != nil {
		f.probeArmed.Store(true) // a fresh probe for the next snapshot (Probe)
	}
	return p.snap.clone(), true
}

// Changed gets a value after each publish; one value may stand for several publishes, so an
// observer that reads it late only skips snapshots.
func (f *Feed) Changed() <-chan struct{} { return f.changed }

// Passes returns copies of the kept pass records with Pass > after, oldest first.
func (f *Feed) Passes(after uint64) []PassRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []PassRecord
	for i := f.n - min(f.n, PassHistory); i < f.n; i++ {
		if r := f.recs[i%PassHistory]; r.Pass > after {
			r.Shares = slices.Clone(r.Shares)
			out = append(out, r)
		}
	}
	return out
}

// ProfileEvery profiles one pass's kernels at most every d (0: never, the default). A profiled
// pass runs its dispatches one by one (or stamps each), so it runs slower than the others.
func (f *Feed) ProfileEvery(d time.Duration) { f.profileEvery.Store(int64(max(d, 0))) }

// Select picks the slot whose next snapshots list the Top candidates of its last sampling
// step (-1: none, the default); only one slot pays for them.
func (f *Feed) Select(slot int) {
	f.selected.Store(int64(slot))
	f.wake()
}

// wake asks an idle engine for a snapshot; a busy one publishes soon anyway.
func (f *Feed) wake() {
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// record keeps one pass's record, reusing the shares of the record it replaces.
func (f *Feed) record(pass uint64, start, end time.Time, shares []PassShare) {
	f.mu.Lock()
	r := &f.recs[f.n%PassHistory]
	*r = PassRecord{Pass: pass, End: end, Duration: end.Sub(start), Shares: append(r.Shares[:0], shares...)}
	f.n++
	f.mu.Unlock()
}

// passWatch is a forward pass being timed (and maybe profiled) for a Feed.
type passWatch struct {
	f      *Feed
	start  time.Time
	shares []PassShare
	prof   *gpu.Profile // set on the device for this pass, nil when not profiled
}

// watchPass counts a pass about to run and, when a Feed watches, starts its record (and sets
// the device's profile when one is due); it returns nil when nobody watches.
func (e *Engine) watchPass() *passWatch {
	e.obs.passes++
	f := e.obs.feed.Load()
	if f == nil {
		return nil
	}
	w := &e.obs.watch
	w.f, w.shares, w.prof = f, w.shares[:0], nil
	if every := time.Duration(f.profileEvery.Load()); every > 0 && e.dev != nil && e.dev.Profile == nil && time.Since(e.obs.profiled) >= every {
		w.prof = gpu.NewProfile()
		e.dev.Profile = w.prof
	}
	w.start = time.Now()
	return w
}

// add counts a slot's tokens in the pass.
func (w *passWatch) add(slot, tokens int, prompt bool) {
	w.shares = append(w.shares, PassShare{Slot: slot, Tokens: tokens, Prompt: prompt})
}

// passDone records the pass w watched, once its results are back (or it failed).
func (e *Engine) passDone(w *passWatch) {
	end := time.Now()
	w.f.record(e.obs.passes, w.start, end, w.shares)
	if w.prof == nil {
		return
	}
	if e.dev != nil && e.dev.Profile == w.prof {
		e.dev.Profile = nil
	}
	e.obs.profiled, e.obs.kernelsAt = end, e.obs.passes
	e.obs.kernels = e.obs.kernels[:0:0]
	for _, k := range w.prof.Sorted() {
		e.obs.kernels = append(e.obs.kernels, KernelView{Family: k.Family, Calls: k.Calls, Time: k.Time, Bytes: k.Bytes})
	}
	e.obs.mem.GPUTimestamp = w.prof.GPUTimed
	e.obs.dirty = true
}

// feedTick publishes a busy engine's state after a turn, at most every snapshotEvery.
func (e *Engine) feedTick() {
	f := e.obs.feed.Load()
	if f == nil || e.obs.passes == e.obs.builtPass && !e.obs.dirty || time.Since(e.obs.built) < snapshotEvery {
		return
	}
	e.publish(f)
}

// feedIdle runs each time admit is about to wait with every slot idle: it publishes the state
// that the last snapshot lacks — at once after a pass, so that an idle engine's snapshot is
// current; else at most every snapshotEvery, a poke being set for later when too early. It
// returns the channel that tells the waiting engine to come back here.
func (e *Engine) feedIdle() <-chan struct{} {
	f := e.obs.feed.Load()
	if f == nil {
		return e.obs.poke
	}
	if e.sleeping.Load() != e.obs.asleep {
		e.obs.dirty = true
	}
	now := time.Now()
	wait := snapshotEvery - now.Sub(e.obs.built)
	switch {
	case e.obs.passes != e.obs.builtPass:
		e.publish(f)
	case !e.obs.dirty:
	case wait <= 0:
		e.publish(f)
	case now.After(e.obs.deferred):
		e.obs.deferred = now.Add(wait)
		time.AfterFunc(wait, f.wake)
	}
	return e.obs.poke
}

// publish builds a snapshot and hands it to f's readers.
func (e *Engine) publish(f *Feed) {
	now := time.Now()
	st := e.Stats()
	p := &published{tok: e.tok, topAt: -1, tails: make([][]int32, len(e.slots))}
	e.memory()
	p.snap = Snapshot{Model: e.obs.shape, Pass: e.obs.passes, Time: now, Queue: len(e.queue) + len(e.waiting), Stats: st,
		KV: e.kvView(st), Kernels: e.obs.kernels, KernelsAt: e.obs.kernelsAt, Memory: e.obs.mem, Attention: e.obs.attention}
	sel := f.selected.Load()
	p.snap.Slots = make([]SlotView, len(e.slots))
	for i, s := range e.slots {
		p.snap.Slots[i] = e.slotView(s)
		p.tails[i] = slices.Clone(s.cached[max(len(s.cached)-tailTokens, 0):])
		if int64(s.id) == sel {
			if g := latestGen(s); g != nil && g.smp != nil && (g.smp.last != nil || g.smp.top != nil) {
				p.top, p.topAt = topSource{row: g.smp.last, cand: g.smp.top, picked: g.smp.picked}, i
			}
		}
	}
	e.obs.built, e.obs.builtPass, e.obs.asleep, e.obs.dirty = now, e.obs.passes, e.sleeping.Load(), false
	f.latest.Store(p)
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// latestGen is the generation running in s, else the last that ran there.
func latestGen(s *slot) *generation {
	if s.gen != nil {
		return s.gen
	}
	return s.prev
}

// slotView is what a snapshot shows of s but for its Tail and Top (resolve).
func (e *Engine) slotView(s *slot) SlotView {
	v := SlotView{ID: s.id, State: SlotIdle, Task: -1, Tokens: len(s.cached), Context: e.slotCtx, Lora: e.loraOf(s.lora)}
	switch g := s.gen; {
	case g != nil:
		v.State, v.Task, v.Prompt = SlotGenerating, g.r.id, len(g.prompt)
		if !g.promptDone {
			v.State = SlotProcessingPrompt
		}
	case s.job != nil:
		v.Embedding, v.Task, v.Prompt = true, s.job.r.id, len(s.job.r.task.Prompt)
	}
	if g := latestGen(s); g != nil {
		v.Decoded = g.res.TokensPredicted
	}
	return v
}

// loraOf turns a loraKey back into the scales of every adapter; nil for the base model. The
// slices are shared between snapshots (clone copies them for readers).
func (e *Engine) loraOf(key string) []float32 {
	if key == "" {
		return nil
	}
	if s, ok := e.obs.lora[key]; ok {
		return s
	}
	scales := make([]float32, len(e.cfg.Lora))
	for _, item := range strings.Split(strings.TrimSuffix(key, ","), ",") {
		idx, hex, _ := strings.Cut(item, ":")
		i, err1 := strconv.Atoi(idx)
		bits, err2 := strconv.ParseUint(hex, 16, 32)
		if err1 == nil && err2 == nil && i >= 0 && i < len(scales) {
			scales[i] = math.Float32frombits(uint32(bits))
		}
	}
	if e.obs.lora == nil {
		e.obs.lora = map[string][]float32{}
	}
	e.obs.lora[key] = scales
	return scales
}

// kvView maps the page pool: each page's holder, the slots first (the lowest id of those
// sharing it), then the prompt cache's entries. With a unified cache (cellLimit) the pool has
// a page per slot beyond what the cells fill, so Owner lists them all while Used and
// Capacity count cells, as Stats does.
func (e *Engine) kvView(st Stats) KVView {
	n := len(e.pool.refs)
	v := KVView{PageRows: pageRows, Owner: make([]int32, n), Shared: make([]bool, n), Used: st.KVTokens, Capacity: st.KVCapacity}
	for i := range v.Owner {
		v.Owner[i] = -1
	}
	for _, s := range e.slots {
		for _, pg := range s.pages {
			if v.Owner[pg] >= 0 {
				v.Shared[pg] = true
			} else {
				v.Owner[pg] = int32(s.id)
			}
		}
	}
	for _, c := range e.cacheEntries() {
		for _, pg := range c.pages {
			if v.Owner[pg] == -1 {
				v.Owner[pg] = -2
			}
		}
	}
	return v
}

// memory refreshes the memory view and model shape once per model (load or wake); asleep,
// nothing is on the device and the view is empty.
func (e *Engine) memory() {
	m := e.model
	if m == nil {
		e.obs.memModel, e.obs.mem = nil, MemoryView{}
		e.obs.shape.Name = e.info.Name
		return
	}
	if m == e.obs.memModel {
		return
	}
	mv := MemoryView{Weights: m.WeightBytesByType(), Adapters: m.AdapterBytes(), Scratch: m.ScratchBytes()}
	if e.kv != nil {
		mv.KV = e.kv.Bytes()
	}
	if sp := e.spec; sp != nil && sp.draft != nil { // the draft model is on the device too
		for t, n := range sp.draft.WeightBytesByType() {
			mv.Weights[t] += n
		}
		mv.Scratch += sp.draft.ScratchBytes()
		if sp.kv != nil {
			mv.KV += sp.kv.Bytes()
		}
	}
	if d := e.dev; d != nil {
		mv.MaxBuffer, mv.MaxBinding, mv.DeviceName = d.Limits.MaxBufferSize, d.Limits.MaxStorageBufferBindingSize, d.Info.Name
	}
	e.obs.memModel, e.obs.mem = m, mv
	e.obs.shape = ModelShape{Name: e.info.Name, Layers: m.Config.NLayer, Heads: m.Config.NHead}
}

// resolve fills in the slots' Tail and the selected slot's Top, on the first reader's
// goroutine.
func (p *published) resolve() {
	for i, ids := range p.tails {
		p.snap.Slots[i].Tail = tail(p.tok, ids)
	}
	if p.topAt >= 0 {
		v := &p.snap.Slots[p.topAt]
		v.Top, v.TopToken = p.top.candidates(p.tok), piece(p.tok, p.top.picked)
	}
	p.tails = nil
}

// tail is the end of the text of ids: at most tailBytes of valid UTF-8, an image's rows shown
// as one object replacement character.
func tail(tok *tokenizer.Tokenizer, ids []int32) string {
	var b strings.Builder
	from := 0 // the first token of the run of text tokens being gathered
	for i := 0; i <= len(ids); i++ {
		if i < len(ids) && ids[i] >= 0 && int(ids[i]) < tok.NVocab() {
			continue
		}
		if from < i {
			b.WriteString(tok.Detokenize(ids[from:i], false, true))
		}
		if i < len(ids) && (i == 0 || from < i) {
			b.WriteRune('\uFFFC') // an image's rows begin
		}
		from = i + 1
	}
	s := strings.ToValidUTF8(b.String(), "")
	if len(s) > tailBytes {
		cut := len(s) - tailBytes
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		s = s[cut:]
	}
	return s
}

// piece is a token's text as a view shows it: special tokens by name, never invalid UTF-8.
func piece(tok *tokenizer.Tokenizer, id int32) string {
	if id < 0 || int(id) >= tok.NVocab() {
		return ""
	}
	return strings.ToValidUTF8(string(tok.Piece(id, true)), "\uFFFD")
}

// candidates are the topCandidates most likely tokens of the step, by descending probability
// from the softmax over the whole row, as n_probs reports them before sampling.
func (t topSource) candidates(tok *tokenizer.Tokenizer) []Candidate {
	var out []Candidate
	if c := t.cand; c != nil {
		for i := range min(len(c.IDs), topCandidates) {
			out = append(out, Candidate{Token: piece(tok, c.IDs[i]), P: float32(c.Prob(i))})
		}
		return out
	}
	best := bestByLogit(t.row, topCandidates)
	if len(best) == 0 {
		return nil
	}
	// Terms far below the top add less than the float32 probabilities can show; the best
	// are always counted, so that the probabilities never sum above 1.
	maxL, floor := float64(best[0].logit), float64(best[0].logit)-30
	sum := 0.0
	for _, l := range t.row {
		if float64(l) >= floor {
			sum += math.Exp(float64(l) - maxL)
		}
	}
	for _, c := range best {
		if float64(c.logit) < floor {
			sum += math.Exp(float64(c.logit) - maxL)
		}
	}
	for _, c := range best {
		out = append(out, Candidate{Token: piece(tok, c.id), P: float32(math.Exp(float64(c.logit)-maxL) / sum)})
	}
	return out
}

// clone is a deep copy of the snapshot.
func (s Snapshot) clone() Snapshot {
	s.Slots = slices.Clone(s.Slots)
	for i := range s.Slots {
		s.Slots[i].Lora = slices.Clone(s.Slots[i].Lora)
		s.Slots[i].Top = slices.Clone(s.Slots[i].Top)
	}
	s.KV.Owner, s.KV.Shared = slices.Clone(s.KV.Owner), slices.Clone(s.KV.Shared)
	s.Kernels = slices.Clone(s.Kernels)
	if s.Memory.Weights != nil {
		w := make(map[string]uint64, len(s.Memory.Weights))
		for k, v := range s.Memory.Weights {
			w[k] = v
		}
		s.Memory.Weights = w
	}
	if s.Attention != nil {
		a := *s.Attention
		a.Weights = slices.Clone(a.Weights)
		s.Attention = &a
	}
	return s
}
