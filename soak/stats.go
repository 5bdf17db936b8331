package soak

import (
	"math"
	"sort"
	"sync"
	"time"
)

// Latencies are kept in a histogram, not as samples, so that memory stays bounded however
// long and wide a soak runs: exponential buckets 2% wide from 10 µs up to about 1 h (1000
// buckets, 8 KB), plus the exact count, sum and maximum. A percentile is its bucket's upper
// bound, so it reads at most 2% high; the maximum is exact.
const (
	histMin     = 10 * time.Microsecond
	histGrowth  = 1.02
	histBuckets = 1000
)

// histogram counts durations in exponential buckets; its zero value is empty and ready.
type histogram struct {
	counts [histBuckets]int64
	n      int64
	sum    time.Duration
	max    time.Duration
}

// bucketOf is the bucket that holds d: 0 for d <= histMin, the last for anything too long.
func bucketOf(d time.Duration) int {
	if d <= histMin {
		return 0
	}
	i := 1 + int(math.Log(float64(d)/float64(histMin))/math.Log(histGrowth))
	return min(i, histBuckets-1)
}

// upperBound is the longest duration bucket i holds.
func upperBound(i int) time.Duration {
	return time.Duration(float64(histMin) * math.Pow(histGrowth, float64(i)))
}

func (h *histogram) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(d)]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

// quantile is the q-quantile (0 < q <= 1) by nearest rank, 0 when empty.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	rank = max(1, min(rank, h.n))
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			if i == histBuckets-1 {
				return h.max // the last bucket has no upper bound
			}
			return min(upperBound(i), h.max)
		}
	}
	return h.max
}

// Percentiles summarise a latency distribution in milliseconds.
type Percentiles struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func (h *histogram) percentiles() Percentiles {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	p := Percentiles{Count: h.n, P50: ms(h.quantile(0.5)), P90: ms(h.quantile(0.9)), P99: ms(h.quantile(0.99)), Max: ms(h.max)}
	if h.n > 0 {
		p.Mean = ms(h.sum / time.Duration(h.n))
	}
	return p
}

// KindStats counts one request kind's requests and how they ended.
type KindStats struct {
	Requests int64 `json:"requests"`
	// OK requests got the answer they should; Errors did not; Shed got a 503 from load
	// shedding (provoked or not: an unprovoked one is also an error).
	OK     int64 `json:"ok"`
	Errors int64 `json:"errors"`
	Shed   int64 `json:"shed"`
	// Skipped is why the kind did not run, when the server does not serve it.
	Skipped string `json:"skipped,omitempty"`
}

// ErrorKind is one kind of failure: how often it happened and its first message.
type ErrorKind struct {
	Count int64  `json:"count"`
	First string `json:"first"`
}

// failure is why a request failed: a kind to count it under and a message.
type failure struct{ kind, msg string }

// outcome is how one request ended, as the worker that sent it records it.
type outcome struct {
	fail   *failure
	shed   bool // a 503 from load shedding
	tokens int64
	ttft   time.Duration // 0: no token came
	gaps   []time.Duration
	// reattach is set by a reattach request that got far enough to check continuity.
	reattach *bool
	// skip is set when the server refused the kind as not supported.
	skip string
}

// tally collects the outcomes of every worker under one lock; a request takes it once.
type tally struct {
	mu           sync.Mutex
	kinds        map[string]*KindStats
	errors       map[string]*ErrorKind
	ttft, gap    histogram
	tokens       int64
	shedProvoked int64
	reattachOK   int64
	reattachBad  int64
	requests     int64
	failed       int64
}

func newTally() *tally {
	return &tally{kinds: map[string]*KindStats{}, errors: map[string]*ErrorKind{}}
}

func (t *tally) kind(name string) *KindStats {
	k := t.kinds[name]
	if k == nil {
		k = &KindStats{}
		t.kinds[name] = k
	}
	return k
}

// record counts one request of kind; provoked says whether a shed answer was asked for.
func (t *tally) record(kind string, o outcome, provoked bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.kind(kind)
	k.Requests++
	t.requests++
	t.tokens += o.tokens
	if o.ttft > 0 {
		t.ttft.add(o.ttft)
	}
	for _, g := range o.gaps {
		t.gap.add(g)
	}
	if o.reattach != nil {
		if *o.reattach {
			t.reattachOK++
		} else {
			t.reattachBad++
		}
	}
	switch {
	case o.skip != "":
		k.Skipped = o.skip
	case o.shed && provoked:
		k.Shed++
		t.shedProvoked++
		o.fail = nil
	case o.shed:
		k.Shed++
		msg := "503 from load shedding outside an overload burst"
		if o.fail != nil {
			msg = o.fail.msg
		}
		o.fail = &failure{"shed (unprovoked)", msg}
	}
	if o.fail != nil {
		k.Errors++
		t.failed++
		e := t.errors[o.fail.kind]
		if e == nil {
			e = &ErrorKind{First: kind + ": " + o.fail.msg}
			t.errors[o.fail.kind] = e
		}
		e.Count++
	} else if !o.shed && o.skip == "" {
		k.OK++
	}
}

// progress is what the periodic status line reports.
func (t *tally) progress() (requests, failed, tokens, shed int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.requests, t.failed, t.tokens, t.shedProvoked
}

// sortedKeys lists a map's keys in order, for stable tables.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
