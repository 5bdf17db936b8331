package engine

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// Per-adapter request counts, for an inference gateway's LoRA affinity (vLLM's
// lora_requests_info: the adapters running and those waiting). They are atomics, read without
// a lock by /metrics, and moved by each request as it is queued, starts and ends.

// AdapterName is the name a request's model field gives an adapter: its file's name without
// the .gguf extension, as an operator who loaded it would call it.
func AdapterName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".gguf")
}

// AdapterUse is an adapter's requests now: queued for a slot, and running in one.
type AdapterUse struct {
	Name             string
	Waiting, Running int
}

// loraUse counts the generation requests of each adapter by phase.
type loraUse struct {
	names            []string
	waiting, running []atomic.Int64
	changed          atomic.Int64 // unix nanoseconds of the last change
}

// newLoraUse counts requests for adapters (by id).
func newLoraUse(adapters []Adapter) *loraUse {
	u := &loraUse{
		names:   make([]string, len(adapters)),
		waiting: make([]atomic.Int64, len(adapters)),
		running: make([]atomic.Int64, len(adapters)),
	}
	for i, a := range adapters {
		u.names[i] = a.Name
	}
	u.changed.Store(time.Now().UnixNano())
	return u
}

// requestPhase is where a request stands for the adapter counts.
type requestPhase uint8

const (
	phaseNone    requestPhase = iota // not counted (yet, or any more)
	phaseWaiting                     // queued for a slot
	phaseRunning                     // generating in a slot
)

// counter is the count of phase p, nil for phaseNone.
func (u *loraUse) counter(p requestPhase, id int) *atomic.Int64 {
	switch p {
	case phaseWaiting:
		return &u.waiting[id]
	case phaseRunning:
		return &u.running[id]
	}
	return nil
}

// move counts the adapters ids in phase to instead of from.
func (u *loraUse) move(ids []int, from, to requestPhase) {
	if from == to || len(ids) == 0 {
		return
	}
	for _, id := range ids {
		if c := u.counter(from, id); c != nil {
			c.Add(-1)
		}
		if c := u.counter(to, id); c != nil {
			c.Add(1)
		}
	}
	u.changed.Store(time.Now().UnixNano())
}

// AdapterUse lists every loaded adapter with its queued and running requests, and when those
// counts last changed. It takes no lock.
func (e *Engine) AdapterUse() ([]AdapterUse, time.Time) {
	u := e.loraUse
	if u == nil {
		return nil, time.Time{}
	}
	out := make([]AdapterUse, len(u.names))
	for i, name := range u.names {
		out[i] = AdapterUse{Name: name, Waiting: int(u.waiting[i].Load()), Running: int(u.running[i].Load())}
	}
	return out, time.Unix(0, u.changed.Load())
}

// countAdapters has r counted as waiting for the adapters its scales use (those not 0).
func (e *Engine) countAdapters(r *request) {
	if r.task.Kind != TaskGenerate || e.loraUse == nil || len(e.loraUse.names) == 0 {
		return
	}
	for id, s := range e.loraScales(r.task.Params) {
		if s != 0 {
			r.adapters = append(r.adapters, id)
		}
	}
	r.use = e.loraUse
	r.setPhase(phaseWaiting)
}

// setPhase moves r's adapter counts to phase p.
func (r *request) setPhase(p requestPhase) {
	if r.use != nil {
		r.use.move(r.adapters, r.phase, p)
	}
	r.phase = p
}
