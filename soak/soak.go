// Package soak drives mixed traffic against a running wgpu-llama (or llama-server) for a
// while and reports what happened: errors by kind, latencies, throughput, and whether the
// server leaked memory, goroutines, file descriptors or slots. It is `wgpu-llama soak`: a
// plain HTTP client, so it can soak any server build, local or remote.
package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
)

// Config says what to soak and how hard.
type Config struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:8080.
	URL string
	// APIKey is sent as a bearer token when set (the server's --api-key).
	APIKey string
	// Streams is how many workers send requests at once (default 64).
	Streams int
	// Duration is how long the workers start requests (default 10 min); the requests in
	// flight then finish.
	Duration time.Duration
	// Seed makes the choice of kinds and prompts repeatable; 0 picks one from the clock.
	Seed int64
	// MaxTokens bounds the tokens each request generates (default 32); cancels and drops ask
	// for four times as many, so that they are cut while they run.
	MaxTokens int
	// WarmUp is how long the traffic runs before the snapshot that the end is compared with
	// (default a tenth of Duration, at most a minute): the server's memory is judged against
	// itself under the full load, not against an idle process that has not yet grown its
	// buffers and heap to it.
	WarmUp time.Duration
	// OverloadEvery is the period of the deliberate overload bursts (default 30 s; the first
	// comes after at most half the duration); negative: none.
	OverloadEvery time.Duration
	// RequestTimeout bounds one request (default 2 min); exceeding it is a "timeout" error.
	RequestTimeout time.Duration
	// ReadyWait is how long to wait for /health to answer 200 (default 2 min).
	ReadyWait time.Duration
	// IdleWait is how long to wait, after the traffic, for every slot to go idle (default 15 s).
	IdleWait time.Duration
	// ProgressEvery is the period of the status lines logged to Log (default 10 s).
	ProgressEvery time.Duration
	// Log receives the progress lines; nil logs nothing.
	Log *log.Logger
}

func (c *Config) defaults() error {
	if c.URL == "" {
		return errors.New("soak: no URL")
	}
	if !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
		return fmt.Errorf("soak: URL %q is not http:// or https://", c.URL)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Streams <= 0 {
		c.Streams = 64
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = 32
	}
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano()
	}
	def(&c.Duration, 10*time.Minute)
	def(&c.WarmUp, min(time.Minute, c.Duration/10))
	def(&c.OverloadEvery, 30*time.Second)
	def(&c.RequestTimeout, 2*time.Minute)
	def(&c.ReadyWait, 2*time.Minute)
	def(&c.IdleWait, 15*time.Second)
	def(&c.ProgressEvery, 10*time.Second)
	return nil
}

// maxBurst bounds an overload burst, whatever queue limit the server reports.
const maxBurst = 1024

// shedBackoff is how long a worker waits after a shed answer: its Retry-After.
const shedBackoff = time.Second

// provokedGrace is how long after a burst a shed answer still counts as provoked: the burst's
// requests leave the queue as they finish, not all at once.
const provokedGrace = 2 * time.Second

// runner is one soak in progress.
type runner struct {
	cfg   Config
	c     *client
	tally *tally
	// provoking counts the bursts in flight; burstEnd is when the last one ended (UnixNano).
	provoking atomic.Int32
	burstEnd  atomic.Int64
	bursts    atomic.Int64
	burstSize int
}

// provoked says whether a shed answer now is one the soak asked for.
func (r *runner) provoked() bool {
	return r.provoking.Load() > 0 || time.Since(time.Unix(0, r.burstEnd.Load())) < provokedGrace
}

// Run soaks the server cfg.URL names and returns the report. Before the traffic it waits for
// /health, sends one request of each kind (which also finds the kinds the server does not
// serve, such as embeddings without --embeddings) and snapshots /metrics; it snapshots again
// after cfg.WarmUp of traffic, and after the traffic once the slots are idle. It returns an error only when the
// soak could not run (no server, a failed warm-up, ctx ended); the report's verdict says
// whether the server passed.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, c: newClient(cfg.URL, cfg.APIKey, cfg.Streams+8), tally: newTally()}
	if err := r.c.waitReady(ctx, cfg.ReadyWait); err != nil {
		return nil, err
	}
	enabled, err := r.warmUp(ctx)
	if err != nil {
		return nil, err
	}
	slots := 1
	if s, err := r.c.slots(ctx); err == nil && len(s) > 0 {
		slots = len(s)
	}
	r.c.closeIdle()
	time.Sleep(500 * time.Millisecond) // for the server to see the connections go
	before := r.c.snapshot(ctx)
	if limit, ok := before.value(metricQueueLimit); ok && limit > 0 {
		if cfg.OverloadEvery > 0 {
			r.burstSize = min(int(limit)+slots+max(4, int(limit)/4), maxBurst)
		}
		if cfg.Streams > int(limit)+slots && cfg.Log != nil {
			cfg.Log.Warn("more streams than the server's slots and queue hold: it will shed requests unprovoked, which count as errors",
				"streams", cfg.Streams, "slots", slots, "queue_limit", limit)
		}
	}
	r.tally.kind(KindOverload).Skipped = overloadSkipReason(before, cfg.OverloadEvery, r.burstSize)

	began := time.Now()
	deadline := began.Add(cfg.Duration)
	var wg sync.WaitGroup
	for i := range cfg.Streams {
		wg.Go(func() { r.worker(ctx, i, enabled, deadline) })
	}
	if r.burstSize > 0 {
		wg.Go(func() { r.overloader(ctx, deadline) })
	}
	stopProgress := r.progress(began)
	warm := make(chan Snapshot, 1)
	go func() {
		select {
		case <-time.After(cfg.WarmUp):
		case <-ctx.Done():
		}
		warm <- r.c.snapshot(ctx)
	}()
	wg.Wait()
	stopProgress()
	elapsed := time.Since(began)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	r.c.closeIdle()
	slotState, slotErr := r.c.waitIdle(ctx, cfg.IdleWait)
	r.c.closeIdle()
	time.Sleep(500 * time.Millisecond)
	end := r.c.snapshot(ctx)
	return r.report(elapsed, before, <-warm, end, slotState, slotErr), nil
}

// overloadSkipReason says why no overload bursts run, or "" when they do.
func overloadSkipReason(start Snapshot, every time.Duration, size int) string {
	switch {
	case size > 0:
		return ""
	case every < 0:
		return "disabled"
	case start.MetricsError != "":
		return "no queue limit known: /metrics: " + start.MetricsError
	}
	if _, ok := start.value(metricQueueLimit); !ok {
		return "no queue limit known: /metrics lacks " + metricQueueLimit
	}
	return "the server has no queue limit (--max-queue 0)"
}

// waitReady polls /health until it answers 200.
func (c *client) waitReady(ctx context.Context, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		_, err := c.get(ctx, "/health")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: the server at %s is not ready: %w", c.base, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// warmUp sends one request of each kind that needs no cutting, so that the server has loaded
// what it lazily loads before the first snapshot, and returns the kinds to soak: those the
// server serves. A kind that fails otherwise fails the soak before it starts.
func (r *runner) warmUp(ctx context.Context) ([]string, error) {
	rng := rand.New(rand.NewPCG(uint64(r.cfg.Seed), 0))
	skipped := map[string]bool{}
	for _, kind := range []string{KindCompletion, KindChat, KindOAICompletion, KindEmbeddings, KindTools} {
		o := r.do(ctx, kind, rng)
		switch {
		case o.skip != "":
			r.tally.kind(kind).Skipped = o.skip
			skipped[kind] = true
		case o.fail != nil:
			return nil, fmt.Errorf("soak: warm-up %s: %s: %s", kind, o.fail.kind, o.fail.msg)
		}
	}
	var enabled []string
	for _, w := range weights {
		if !skipped[w.kind] {
			enabled = append(enabled, w.kind)
		}
	}
	if len(enabled) == 0 {
		return nil, errors.New("soak: the server serves none of the request kinds")
	}
	return enabled, nil
}

// worker sends requests until the deadline: first kind number i of enabled (so that the
// first round covers every kind when there are as many workers), then kinds picked at
// random by weight.
func (r *runner) worker(ctx context.Context, i int, enabled []string, deadline time.Time) {
	rng := rand.New(rand.NewPCG(uint64(r.cfg.Seed), uint64(i+1)))
	total := 0
	for _, w := range weights {
		if slices.Contains(enabled, w.kind) {
			total += w.weight
		}
	}
	for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
		kind := enabled[i%len(enabled)]
		if n > 0 {
			kind = pick(rng, enabled, total)
		}
		o := r.do(ctx, kind, rng)
		if ctx.Err() != nil {
			return // the soak was stopped: what failed then is no server's fault
		}
		r.tally.record(kind, o, o.shed && r.provoked())
		if o.shed {
			// Back off as the answer's Retry-After (1 s) asks, rather than hammer the queue.
			select {
			case <-ctx.Done():
			case <-time.After(shedBackoff):
			}
		}
	}
}

// pick draws a kind from enabled by weight (total is their weights' sum).
func pick(rng *rand.Rand, enabled []string, total int) string {
	x := rng.IntN(total)
	for _, w := range weights {
		if !slices.Contains(enabled, w.kind) {
			continue
		}
		if x -= w.weight; x < 0 {
			return w.kind
		}
	}
	return enabled[0]
}

// overloader fires a burst of concurrent /completion requests larger than the server's
// queue limit plus its slots, periodically until the deadline. Its 503s, and those other
// workers get meanwhile, are provoked shedding, not errors.
func (r *runner) overloader(ctx context.Context, deadline time.Time) {
	wait := min(r.cfg.OverloadEvery, r.cfg.Duration/2)
	end := time.NewTimer(time.Until(deadline))
	defer end.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-end.C:
			return
		case <-time.After(wait):
		}
		r.burst(ctx)
		wait = r.cfg.OverloadEvery
	}
}

// burst sends burstSize requests at once and waits for them all.
func (r *runner) burst(ctx context.Context) {
	r.provoking.Add(1)
	defer func() {
		r.burstEnd.Store(time.Now().UnixNano())
		r.provoking.Add(-1)
	}()
	r.bursts.Add(1)
	n := r.bursts.Load()
	var wg sync.WaitGroup
	startGun := make(chan struct{})
	for i := range r.burstSize {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r.cfg.Seed), uint64(n)<<32|uint64(i)))
			<-startGun
			o := r.do(ctx, KindOverload, rng)
			if ctx.Err() == nil {
				r.tally.record(KindOverload, o, true)
			}
		})
	}
	close(startGun)
	wg.Wait()
}

// progress logs a status line every ProgressEvery until the returned stop is called.
func (r *runner) progress(began time.Time) (stop func()) {
	if r.cfg.Log == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(r.cfg.ProgressEvery)
		defer t.Stop()
		var lastTokens int64
		last := began
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				req, failed, tok, shed := r.tally.progress()
				rate := float64(tok-lastTokens) / now.Sub(last).Seconds()
				lastTokens, last = tok, now
				r.cfg.Log.Info("soak", "elapsed", now.Sub(began).Round(time.Second), "requests", req,
					"errors", failed, "shed", shed, "tok/s", fmt.Sprintf("%.1f", rate))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
