package server

import (
	"net/http/httptest"
	"regexp"
	"runtime"
	"strconv"
	"testing"
)

// TestProcessMetrics checks the process gauges /metrics adds for soaks: resident memory and
// open descriptors where /proc exists, goroutines always, and the engine's device memory and
// recoveries.
func TestProcessMetrics(t *testing.T) {
	srv := New(Config{Alias: "stories260K", Metrics: true}, testLogger())
	srv.SetBackend(newFakeBackend(t))
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	_, _, body := do(t, "GET", ts.URL+"/metrics", "", nil)
	value := func(name string) (float64, bool) {
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		return v, err == nil
	}
	if v, ok := value("wgpu_llama_goroutines"); !ok || v < 1 {
		t.Errorf("wgpu_llama_goroutines = %v (%v)", v, ok)
	}
	for _, name := range []string{"wgpu_llama_gpu_memory_bytes", "wgpu_llama_device_recoveries_total"} {
		if v, ok := value(name); !ok || v != 0 {
			t.Errorf("%s = %v (%v); the fake has neither", name, v, ok)
		}
	}
	if runtime.GOOS != "linux" {
		return
	}
	if v, ok := value("wgpu_llama_process_resident_bytes"); !ok || v < 1<<20 {
		t.Errorf("wgpu_llama_process_resident_bytes = %v (%v)", v, ok)
	}
	if v, ok := value("wgpu_llama_open_fds"); !ok || v < 3 {
		t.Errorf("wgpu_llama_open_fds = %v (%v)", v, ok)
	}
}
