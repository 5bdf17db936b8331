package soak

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Limits of the verdict and the leak flags.
const (
	// MaxRSSGrowth is the most the server's resident memory may grow, in percent of what it
	// was after the warm-up, for the soak to pass.
	MaxRSSGrowth = 10.0
	// Goroutines and open file descriptors may grow by this share of their warm-up count plus
	// a fixed slack (connections closing, timers) before they count as leaked.
	leakShare      = 0.10
	goroutineSlack = 20
	fdSlack        = 10
)

// Report is what a soak found; its JSON is `wgpu-llama soak --json`.
type Report struct {
	URL     string `json:"url"`
	Streams int    `json:"streams"`
	Seed    int64  `json:"seed"`
	// TrafficSeconds is how long new requests were started (Config.Duration); DurationSeconds
	// how long the traffic ran, the requests then in flight (and a last burst) included.
	TrafficSeconds  float64 `json:"traffic_s"`
	DurationSeconds float64 `json:"duration_s"`
	// Kinds counts requests by kind (KindChat, ...), skipped kinds with the reason.
	Kinds    map[string]*KindStats `json:"kinds"`
	Requests int64                 `json:"requests"`
	// Errors are the failures by kind ("http 500 /v1/chat/completions", "timeout",
	// "reattach mismatch", ...), each with its first message; provoked shedding is not one.
	Errors     map[string]*ErrorKind `json:"errors"`
	ErrorCount int64                 `json:"error_count"`
	// ShedProvoked counts the 503s of load shedding during and just after the overload
	// bursts; ServerShed is the server's own count of shed requests over the soak, when known.
	ShedProvoked   int64    `json:"shed_provoked"`
	OverloadBursts int64    `json:"overload_bursts"`
	BurstSize      int      `json:"burst_size"`
	ServerShed     *float64 `json:"server_shed,omitempty"`
	// CompletionTokens sums the server's usage (or timings) of the answers; for streams the
	// client cut, the token chunks it received.
	CompletionTokens int64   `json:"completion_tokens"`
	TokensPerSecond  float64 `json:"tokens_per_second"`
	// TTFT and InterToken are the streaming requests' time to first token and the gaps
	// between token chunks.
	TTFT           Percentiles `json:"ttft"`
	InterToken     Percentiles `json:"inter_token"`
	ReattachPassed int64       `json:"reattach_passed"`
	ReattachFailed int64       `json:"reattach_failed"`
	// Before is the server before the traffic, Start after Config.WarmUp of it, End after it,
	// once the slots are idle.
	Before Snapshot `json:"before"`
	Start  Snapshot `json:"start"`
	End    Snapshot `json:"end"`
	// RSSGrowthPercent is End's resident memory over Start's, when both are known.
	RSSGrowthPercent *float64 `json:"rss_growth_percent,omitempty"`
	// Slots is how many slots /slots listed at the end and SlotsBusy those still processing.
	Slots      int    `json:"slots"`
	SlotsBusy  []int  `json:"slots_busy"`
	SlotsError string `json:"slots_error,omitempty"`
	// Leaks lists what looks leaked: busy slots, requests still processing, goroutines or file
	// descriptors grown past their margin.
	Leaks []string `json:"leaks"`
	// Failures are the reasons the verdict fails; Pass is the verdict.
	Failures []string `json:"failures"`
	Pass     bool     `json:"ok"`
}

// OK is the verdict: no errors besides provoked shedding, resident memory within
// MaxRSSGrowth percent of the warm-up's, no slot busy at the end and nothing else leaked.
func (r *Report) OK() bool { return len(r.Failures) == 0 }

// report builds the report from the tally and the two snapshots.
func (r *runner) report(elapsed time.Duration, before, start, end Snapshot, slots []slotState, slotErr error) *Report {
	t := r.tally
	t.mu.Lock()
	defer t.mu.Unlock()
	rep := &Report{
		URL: r.cfg.URL, Streams: r.cfg.Streams, Seed: r.cfg.Seed, TrafficSeconds: r.cfg.Duration.Seconds(), DurationSeconds: elapsed.Seconds(),
		Kinds: map[string]*KindStats{}, Requests: t.requests, Errors: t.errors, ErrorCount: t.failed,
		ShedProvoked: t.shedProvoked, OverloadBursts: r.bursts.Load(), BurstSize: r.burstSize,
		CompletionTokens: t.tokens, TTFT: t.ttft.percentiles(), InterToken: t.gap.percentiles(),
		ReattachPassed: t.reattachOK, ReattachFailed: t.reattachBad, Before: before, Start: start, End: end,
		Slots: len(slots), SlotsBusy: busySlots(slots), Leaks: []string{}, Failures: []string{},
	}
	for _, k := range allKinds() {
		ks := *t.kind(k)
		rep.Kinds[k] = &ks
	}
	if elapsed > 0 {
		rep.TokensPerSecond = float64(t.tokens) / elapsed.Seconds()
	}
	if slotErr != nil {
		rep.SlotsError = slotErr.Error()
	}
	if a, ok := before.value(metricShed); ok { // bursts may come before the warm-up ends
		if b, ok := end.value(metricShed); ok {
			d := b - a
			rep.ServerShed = &d
		}
	}
	rep.judge(start, end)
	return rep
}

// judge fills in Leaks, Failures and Pass.
func (rep *Report) judge(start, end Snapshot) {
	if len(rep.SlotsBusy) > 0 {
		rep.Leaks = append(rep.Leaks, fmt.Sprintf("slots still busy at the end: %v", rep.SlotsBusy))
	}
	for _, m := range []string{metricProcessing, metricDeferred, metricKVAdrift} {
		if v, ok := end.value(m); ok && v > 0 {
			rep.Leaks = append(rep.Leaks, fmt.Sprintf("%s is %g at the end", m, v))
		}
	}
	grown := func(name, what string, slack float64) {
		a, ok1 := start.value(name)
		b, ok2 := end.value(name)
		if ok1 && ok2 && b > a+slack+leakShare*a {
			rep.Leaks = append(rep.Leaks, fmt.Sprintf("%s grew from %g to %g", what, a, b))
		}
	}
	grown(metricGoroutines, "goroutines", goroutineSlack)
	grown(metricFDs, "open file descriptors", fdSlack)
	if a, ok := start.value(metricRSS); ok && a > 0 {
		if b, ok := end.value(metricRSS); ok {
			g := 100 * (b - a) / a
			rep.RSSGrowthPercent = &g
		}
	}

	if rep.ErrorCount > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d errors", rep.ErrorCount))
	}
	if g := rep.RSSGrowthPercent; g != nil && *g > MaxRSSGrowth {
		rep.Failures = append(rep.Failures, fmt.Sprintf("resident memory grew %.1f%% (limit %.0f%%)", *g, MaxRSSGrowth))
	}
	for _, l := range rep.Leaks {
		rep.Failures = append(rep.Failures, "leak: "+l)
	}
	rep.Pass = len(rep.Failures) == 0
}

// WriteTable writes the report for people: the verdict, requests by kind, errors, latencies
// and the server's state after the warm-up and at the end.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format+"\n", a...) }
	verdict := "PASS"
	if !rep.OK() {
		verdict = "FAIL: " + strings.Join(rep.Failures, "; ")
	}
	secs := func(s float64) time.Duration {
		return time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond)
	}
	p("soak of %s: %d streams, new requests for %s, ran %s (seed %d)", rep.URL, rep.Streams, secs(rep.TrafficSeconds), secs(rep.DurationSeconds), rep.Seed)
	p("verdict\t%s", verdict)
	p("")
	p("kind\trequests\tok\terrors\tshed\t")
	for _, k := range allKinds() {
		ks := rep.Kinds[k]
		if ks == nil {
			continue
		}
		if ks.Skipped != "" {
			p("%s\tskipped: %s\t\t\t\t", k, ks.Skipped)
			continue
		}
		p("%s\t%d\t%d\t%d\t%d\t", k, ks.Requests, ks.OK, ks.Errors, ks.Shed)
	}
	p("total requests\t%d\t\t%d\t\t", rep.Requests, rep.ErrorCount)
	p("")
	if len(rep.Errors) == 0 {
		p("errors\tnone")
	} else {
		p("errors\tcount\tfirst")
		for _, k := range sortedKeys(rep.Errors) {
			p("  %s\t%d\t%s", k, rep.Errors[k].Count, truncate(rep.Errors[k].First, 160))
		}
	}
	shed := fmt.Sprintf("%d bursts of %d requests, %d shed (provoked)", rep.OverloadBursts, rep.BurstSize, rep.ShedProvoked)
	if ks := rep.Kinds[KindOverload]; ks != nil && ks.Skipped != "" {
		shed = "none: " + ks.Skipped
	}
	if rep.ServerShed != nil {
		shed += fmt.Sprintf("; the server counted %g shed", *rep.ServerShed)
	}
	p("overload\t%s", shed)
	p("reattach\t%d passed, %d failed", rep.ReattachPassed, rep.ReattachFailed)
	p("tokens\t%d completion tokens, %.1f tok/s", rep.CompletionTokens, rep.TokensPerSecond)
	lat := func(name string, q Percentiles) {
		p("%s\tn=%d\tp50 %.1f\tp90 %.1f\tp99 %.1f\tmax %.1f", name, q.Count, q.P50, q.P90, q.P99, q.Max)
	}
	lat("ttft ms", rep.TTFT)
	lat("inter-token ms", rep.InterToken)
	p("")
	p("server\tbefore\tafter warm-up\tend\tchange")
	for _, row := range []struct {
		name, metric string
		bytes        bool
	}{
		{"rss", metricRSS, true}, {"goroutines", metricGoroutines, false}, {"open fds", metricFDs, false},
		{"gpu memory", metricGPUMemory, true}, {"kv cache tokens", metricKVTokens, false}, {"kv pages adrift", metricKVAdrift, false},
		{"requests processing", metricProcessing, false}, {"requests deferred", metricDeferred, false},
	} {
		z, ok0 := rep.Before.value(row.metric)
		a, ok1 := rep.Start.value(row.metric)
		b, ok2 := rep.End.value(row.metric)
		p("%s\t%s\t%s\t%s\t%s", row.name, metricText(z, ok0, row.bytes), metricText(a, ok1, row.bytes), metricText(b, ok2, row.bytes), change(a, b, ok1 && ok2))
	}
	if rep.End.MetricsError != "" {
		p("metrics\tunavailable: %s", truncate(rep.End.MetricsError, 160))
	}
	switch {
	case rep.SlotsError != "":
		p("slots at end\tunavailable: %s", truncate(rep.SlotsError, 160))
	default:
		p("slots at end\t%d idle of %d", rep.Slots-len(rep.SlotsBusy), rep.Slots)
	}
	if len(rep.Leaks) == 0 {
		p("leaks\tnone")
	} else {
		p("leaks\t%s", strings.Join(rep.Leaks, "; "))
	}
	return tw.Flush()
}

// metricText formats a snapshot value, "-" when the server lacks it.
func metricText(v float64, ok, bytes bool) string {
	switch {
	case !ok:
		return "-"
	case bytes:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%g", v)
}

// change is b relative to a, as a signed percentage.
func change(a, b float64, ok bool) string {
	if !ok {
		return "-"
	}
	if a == 0 {
		if b == 0 {
			return "0"
		}
		return fmt.Sprintf("%+g", b)
	}
	pct := 100 * (b - a) / a
	if math.Abs(pct) < 0.05 {
		return "0%"
	}
	return fmt.Sprintf("%+.1f%%", pct)
}
