package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The /metrics series a snapshot keeps, by name. Each is optional: a server without it (an
// older one, or one that does not measure it) leaves it out of the snapshot.
const (
	metricRSS        = "wgpu_llama_process_resident_bytes"
	metricGoroutines = "wgpu_llama_goroutines"
	metricFDs        = "wgpu_llama_open_fds"
	metricGPUMemory  = "wgpu_llama_gpu_memory_bytes"
	metricKVTokens   = "wgpu_llama_kv_cache_tokens"
	metricKVAdrift   = "wgpu_llama_kv_pages_adrift"
	metricQueueLimit = "wgpu_llama_queue_limit"
	metricShed       = "wgpu_llama_requests_shed_total"
	metricProcessing = "llamacpp:requests_processing"
	metricDeferred   = "llamacpp:requests_deferred"
)

// watched lists the series a snapshot keeps, in the order the report shows them.
var watched = []string{metricRSS, metricGoroutines, metricFDs, metricGPUMemory, metricKVTokens, metricKVAdrift,
	metricProcessing, metricDeferred, metricShed, metricQueueLimit}

// parseMetrics reads Prometheus' text format into a value per series name. Series of one
// name with different labels (GPU memory by kind, say) are summed; comments and lines that do
// not parse are skipped, so a format detail the soak does not know cannot fail it.
func parseMetrics(text string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ \t"); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			end := labelsEnd(rest)
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest) // value, then an optional timestamp
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out
}

// labelsEnd is the index of the "}" that closes the label set s starts with, skipping quoted
// values (which may hold "}" or escaped quotes); -1 if there is none.
func labelsEnd(s string) int {
	quoted := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == '}':
			return i
		}
	}
	return -1
}

// Snapshot is the server's state at one moment: the watched /metrics series it has and,
// at the end, its slots.
type Snapshot struct {
	At time.Time `json:"at"`
	// Metrics holds the watched series the server exposes; absent ones are missing.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// MetricsError says why /metrics could not be read (e.g. the server lacks --metrics).
	MetricsError string `json:"metrics_error,omitempty"`
}

// value returns a series and whether the snapshot has it.
func (s *Snapshot) value(name string) (float64, bool) {
	if s == nil || s.Metrics == nil {
		return 0, false
	}
	v, ok := s.Metrics[name]
	return v, ok
}

// snapshot reads /metrics, keeping the watched series.
func (c *client) snapshot(ctx context.Context) Snapshot {
	s := Snapshot{At: time.Now()}
	body, err := c.get(ctx, "/metrics")
	if err != nil {
		s.MetricsError = err.Error()
		return s
	}
	all := parseMetrics(body)
	s.Metrics = map[string]float64{}
	for _, name := range watched {
		if v, ok := all[name]; ok {
			s.Metrics[name] = v
		}
	}
	return s
}

// slotState is the part of GET /slots the soak reads.
type slotState struct {
	ID           int  `json:"id"`
	IsProcessing bool `json:"is_processing"`
}

// slots reads GET /slots.
func (c *client) slots(ctx context.Context) ([]slotState, error) {
	body, err := c.get(ctx, "/slots")
	if err != nil {
		return nil, err
	}
	var s []slotState
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		return nil, fmt.Errorf("/slots: %w", err)
	}
	return s, nil
}

// busySlots lists the ids of the slots still processing.
func busySlots(s []slotState) []int {
	busy := []int{}
	for _, sl := range s {
		if sl.IsProcessing {
			busy = append(busy, sl.ID)
		}
	}
	return busy
}

// waitIdle polls /slots until no slot processes or wait passes, and returns the last state.
func (c *client) waitIdle(ctx context.Context, wait time.Duration) ([]slotState, error) {
	deadline := time.Now().Add(wait)
	for {
		s, err := c.slots(ctx)
		if err != nil || len(busySlots(s)) == 0 || time.Now().After(deadline) {
			return s, err
		}
		select {
		case <-ctx.Done():
			return s, nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// get sends a GET and returns the body of a 200, else an error with the status and body.
func (c *client) get(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := c.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := readBody(resp)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, truncate(body, 200))
	}
	return body, nil
}
