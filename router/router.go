// Package router is llama-server's router mode: many models behind one endpoint. Each
// loaded model runs in a child process of the same binary on a loopback port; the router
// lists every known model with its status, loads a model on its first request (waiting
// requests queue in arrival order, one entry per model), evicts the least recently used
// idle model past --models-max, and proxies requests to the child by the request's model.
package router

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/server/static"
	"github.com/wgpu-llama/wgpu-llama/tools"
)

// Model statuses as GET /models reports them.
const (
	StatusUnloaded    = "unloaded"
	StatusLoading     = "loading"
	StatusLoaded      = "loaded"
	StatusSleeping    = "sleeping"
	StatusFailed      = "failed"
	StatusDownloading = "downloading"
)

// Config configures a Router.
type Config struct {
	Catalog Catalog
	// Command is the child's command line without the model's flags: the binary, the
	// flag marking it a child and the router's own flags that children inherit. The
	// model's options are inserted before the inherited flags, so those win (CLI > preset).
	Command []string
	// Inherited are the router's command-line flags every child gets after its model's.
	Inherited []string
	// MaxModels bounds the models loaded at once (0: no bound).
	MaxModels int
	// Autoload loads a model on its first request (a request's ?autoload= overrides it).
	Autoload bool
	// APIKeys, when any, are required of clients as by a single server.
	APIKeys []string
	// UI is the web app served at "/" (as server.Config.UI: its files need no API key); nil
	// serves none.
	UI fs.FS
	// FakeTiming delays every load and every request by two seconds, as llama-server's
	// LLAMA_SERVER_DEBUG_FAKE_TIMING, so that tests can watch queued, loading and busy models.
	FakeTiming bool
	// BuildInfo is reported by GET /props.
	BuildInfo string
	// Metrics enables GET /metrics without ?model= (--metrics, which children inherit): every
	// loaded model's series, labelled by model.
	Metrics bool
	// Offline keeps downloads (POST /models) from reaching the network.
	Offline bool
	// DownloadCommand is the command line of a download child (POST /models) without its
	// arguments: the router appends --cache-dir DIR, --offline when Offline, and the model.
	// It prints the lines of DownloadProgressLine and DownloadResultLine. Empty: no downloads.
	DownloadCommand []string
	// Tools are the tools the router's own GET and POST /tools offer (the children get none);
	// nil answers 403.
	Tools *tools.Set
	// CORSProxy enables the router's /cors-proxy; off, it answers 403.
	CORSProxy bool
}

// instance is the router's record of one model: its options and its child, if any.
type instance struct {
	model    *Model
	status   string
	child    *child
	stopping bool // asked to exit: its end is an unload, not a failure
	inflight int  // proxied requests in progress
	lastUsed time.Time
	loads    int // load attempts so far, to tell a waiter its attempt ended
	exitCode int
	failed   bool
	progress *float64
	// loggedTenth is 1 + the tenth of the load last logged on the console (0: none yet)
	loggedTenth int
}

// running reports whether the instance holds (or is about to hold) a child.
func (in *instance) running() bool {
	return in.status == StatusLoading || in.status == StatusLoaded || in.status == StatusSleeping
}

// waiting is one entry of the load queue: a model and how many requests wait for it.
type waiting struct {
	name    string
	waiters int
	pinned  bool // asked for by POST /models/load: stays queued without waiters
}

// Router holds the models and their children.
type Router struct {
	cfg    Config
	logger *log.Logger

	mu        sync.Mutex
	models    map[string]*instance
	queue     []*waiting
	changed   chan struct{} // closed and replaced on every state change
	convs     map[string]string
	sse       *broadcaster
	rescan    bool // a finished download asks for a rescan before the next listing
	downloads map[string]context.CancelFunc
	closed    bool
	ui        *static.Handler // Config.UI's files, or nil
}

// New scans the catalog and starts the models whose preset says load-on-startup.
func New(cfg Config, logger *log.Logger) (*Router, error) {
	r := &Router{cfg: cfg, logger: logger, models: map[string]*instance{}, changed: make(chan struct{}),
		convs: map[string]string{}, sse: newBroadcaster(), downloads: map[string]context.CancelFunc{}}
	if cfg.UI != nil {
		r.ui = static.New(cfg.UI)
	}
	found, err := cfg.Catalog.Scan()
	if err != nil {
		return nil, err
	}
	var startup []string
	for name, m := range found {
		r.models[name] = &instance{model: m, status: StatusUnloaded}
		if m.LoadOnStartup() {
			startup = append(startup, name)
		}
	}
	if cfg.MaxModels > 0 && len(startup) > cfg.MaxModels {
		return nil, fmt.Errorf("%d models load on startup, more than --models-max %d", len(startup), cfg.MaxModels)
	}
	sort.Strings(startup)
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	sort.Strings(names)
	logger.Info("router models", "count", len(names), "models", names)
	r.mu.Lock()
	for _, n := range startup {
		r.enqueue(n, true)
	}
	r.pump()
	r.mu.Unlock()
	return r, nil
}

// notify wakes everything waiting for a state change. Callers hold r.mu.
func (r *Router) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// setStatus records a model's new status and tells waiters and /models/sse. Callers hold r.mu.
func (r *Router) setStatus(name string, in *instance, status string) {
	in.status = status
	data := map[string]any{"status": status}
	if status == StatusUnloaded || status == StatusFailed {
		data["exit_code"] = in.exitCode
	}
	if in.progress != nil && status == StatusLoading {
		data["progress"] = *in.progress
	}
	r.sse.send(Event{Model: name, Event: "status_change", Data: data})
	r.notify()
}

// running counts the models holding a child or starting one. Callers hold r.mu.
func (r *Router) running() int {
	n := 0
	for _, in := range r.models {
		if in.running() {
			n++
		}
	}
	return n
}

// enqueue adds a waiter for name to the load queue, one entry per model. Callers hold r.mu.
func (r *Router) enqueue(name string, pinned bool) {
	for _, w := range r.queue {
		if w.name == name {
			if pinned {
				w.pinned = true
			} else {
				w.waiters++
			}
			return
		}
	}
	w := &waiting{name: name, pinned: pinned}
	if !pinned {
		w.waiters = 1
	}
	r.queue = append(r.queue, w)
}

// leave takes a waiter that gave up off name's queue entry, dropping the entry when nobody
// else waits for it, so that a client that left costs no model its place. Callers hold r.mu.
func (r *Router) leave(name string) {
	for i, w := range r.queue {
		if w.name == name {
			w.waiters--
			if w.waiters <= 0 && !w.pinned {
				r.queue = append(r.queue[:i], r.queue[i+1:]...)
			}
			return
		}
	}
}

// pump starts queued models, in order, while there is room; when the head of the queue
// needs room it asks the least recently used idle model to exit (its exit pumps again).
// A busy model is never evicted: the queue waits for it to go idle. Callers hold r.mu.
func (r *Router) pump() {
	for len(r.queue) > 0 && !r.closed {
		head := r.queue[0]
		in := r.models[head.name]
		if in == nil || in.running() || in.status == StatusDownloading {
			r.queue = r.queue[1:]
			continue
		}
		if r.cfg.MaxModels <= 0 || r.running() < r.cfg.MaxModels {
			r.queue = r.queue[1:]
			r.start(head.name, in)
			continue
		}
		for _, o := range r.models {
			if o.stopping {
				return // a slot is already being freed
			}
		}
		var victim *instance
		var victimName string
		for n, o := range r.models {
			if (o.status == StatusLoaded || o.status == StatusSleeping) && o.inflight == 0 &&
				(victim == nil || o.lastUsed.Before(victim.lastUsed)) {
				victim, victimName = o, n
			}
		}
		if victim == nil {
			return // every loaded model is busy or loading: wait for one to go idle
		}
		r.logger.Info("models-max reached, unloading the least recently used model", "model", victimName, "for", head.name)
		r.stop(victim)
		return
	}
}

// start marks name loading and spawns its child. Callers hold r.mu.
func (r *Router) start(name string, in *instance) {
	in.loads++
	in.failed, in.exitCode, in.progress, in.stopping, in.loggedTenth = false, 0, nil, false, 0
	in.lastUsed = time.Now()
	r.logger.Info("loading model", "model", name)
	r.setStatus(name, in, StatusLoading)
	go r.spawn(name, in, in.loads)
}

// spawn starts the child of one load attempt, unless it was called off meanwhile.
func (r *Router) spawn(name string, in *instance, attempt int) {
	if r.cfg.FakeTiming {
		time.Sleep(fakeDelay)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if in.loads != attempt || in.stopping || r.closed {
		if in.loads == attempt {
			in.stopping = false
			r.setStatus(name, in, StatusUnloaded)
			r.pump()
		}
		return
	}
	argv := append(append(append([]string{}, r.cfg.Command...), in.model.Args()...), r.cfg.Inherited...)
	argv = append(argv, "--alias", name)
	// started under r.mu so that the child's first state line finds in.child set
	c, err := startChild(name, argv, func(st ChildState) { r.childState(name, st) }, r.logger)
	if err != nil {
		r.logger.Error("model failed to start", "model", name, "err", err)
		in.failed, in.exitCode = true, -1
		r.setStatus(name, in, StatusFailed)
		r.pump()
		return
	}
	in.child = c
	go r.reap(name, in, c)
}

// childState applies a state line of name's child.
func (r *Router) childState(name string, st ChildState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.models[name]
	if in == nil || in.stopping || !in.running() {
		return
	}
	switch st.State {
	case StateLoading:
		in.progress = st.Progress
		if p := st.Progress; p != nil && int(*p*10)+1 > in.loggedTenth {
			// the console's load progress: a line every tenth, as downloads log theirs
			in.loggedTenth = int(*p*10) + 1
			r.logger.Info("loading model", "model", name, "percent", int(*p*100))
		}
		r.setStatus(name, in, StatusLoading)
	case StateReady:
		r.logger.Info("model loaded", "model", name, "port", in.child.port)
		r.setStatus(name, in, StatusLoaded)
	case StateSleeping:
		r.setStatus(name, in, StatusSleeping)
	}
}

// reap waits for a child to exit and records the end: an unload when it was asked to go,
// a failure otherwise (reported, and loaded again by the next request).
func (r *Router) reap(name string, in *instance, c *child) {
	<-c.done
	r.mu.Lock()
	defer r.mu.Unlock()
	if in.child != c {
		return
	}
	in.child, in.exitCode = nil, c.code
	status := StatusUnloaded
	if !in.stopping && !r.closed {
		in.failed = true
		status = StatusFailed
		r.logger.Error("model exited", "model", name, "exit_code", c.code)
	} else {
		r.logger.Info("model unloaded", "model", name, "exit_code", c.code)
	}
	in.stopping = false
	for id, owner := range r.convs {
		if owner == name {
			delete(r.convs, id)
		}
	}
	r.setStatus(name, in, status)
	r.pump()
}

// stop asks a model's child to exit (killing one still loading). Callers hold r.mu.
func (r *Router) stop(in *instance) {
	if !in.running() || in.stopping {
		return
	}
	in.stopping = true
	if in.child == nil {
		r.notify() // not spawned yet: spawn sees stopping and calls the load off
		return
	}
	timeout := in.model.StopTimeout()
	if in.status == StatusLoading {
		timeout = 0
	}
	in.child.stop(timeout)
	r.notify()
}

// fakeDelay is FakeTiming's delay.
const fakeDelay = 2 * time.Second

// errNotLoaded answers a request for an unloaded model when autoload is off.
var errNotLoaded = errors.New("model is not loaded")

// acquire waits until name's child is ready to take a request, loading it first when
// autoload allows, and counts the request as in flight until release. A request that
// leaves while waiting withdraws from the queue without cancelling the load for others.
func (r *Router) acquire(ctx context.Context, name string, autoload bool) (*instance, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	attempt, queued := -1, false
	for {
		in := r.models[name]
		if in == nil {
			if queued {
				r.leave(name)
			}
			return nil, fmt.Errorf("model '%s' not found", name)
		}
		switch {
		case in.stopping:
			// an unloading model comes back through the queue once it has exited
		case in.status == StatusLoaded || in.status == StatusSleeping:
			in.inflight++
			in.lastUsed = time.Now()
			return in, nil
		case in.status == StatusLoading:
			attempt, queued = in.loads, false
		case in.status == StatusDownloading:
			return nil, fmt.Errorf("model '%s' is still downloading", name)
		default: // unloaded or failed
			if attempt == in.loads {
				return nil, fmt.Errorf("model '%s' failed to load (exit code %d)", name, in.exitCode)
			}
			if !autoload {
				return nil, errNotLoaded
			}
			if !queued {
				r.enqueue(name, false)
				queued = true
				r.pump()
				continue
			}
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
			r.mu.Lock()
		case <-ctx.Done():
			r.mu.Lock()
			if queued {
				r.leave(name)
				r.pump()
			}
			return nil, ctx.Err()
		}
		if queued && r.models[name] != nil && r.models[name].running() && !r.inQueue(name) {
			queued = false // our entry was taken: the load started
		}
	}
}

// inQueue reports whether name has a queue entry. Callers hold r.mu.
func (r *Router) inQueue(name string) bool {
	for _, w := range r.queue {
		if w.name == name {
			return true
		}
	}
	return false
}

// release ends a request acquire let through; an idle model may now make room for the queue.
func (r *Router) release(in *instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in.inflight--
	in.lastUsed = time.Now()
	if in.inflight == 0 && len(r.queue) > 0 {
		r.pump()
	}
}

// Close stops every child, model and download, and waits for them to exit.
func (r *Router) Close() {
	r.mu.Lock()
	r.closed = true
	var kids []*child
	for _, in := range r.models {
		if in.child != nil {
			in.stopping = true
			in.child.stop(in.model.StopTimeout())
			kids = append(kids, in.child)
		}
	}
	for _, cancel := range r.downloads {
		cancel()
	}
	r.mu.Unlock()
	for _, c := range kids {
		<-c.done
	}
	r.mu.Lock()
	for len(r.downloads) > 0 { // their children are killed: wait until they are gone
		ch := r.changed
		r.mu.Unlock()
		<-ch
		r.mu.Lock()
	}
	r.mu.Unlock()
	r.sse.close()
}
