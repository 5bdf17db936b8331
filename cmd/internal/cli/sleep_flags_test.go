package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

func TestSleepIdleSecondsFlag(t *testing.T) {
	var cfg engine.Config
	f := parseServe(t, nil)
	f.sleep.apply(&cfg)
	if f.sleep.idleSeconds != -1 || cfg.SleepIdle != 0 {
		t.Errorf("default: %d seconds, engine SleepIdle %v; want -1, 0 (never)", f.sleep.idleSeconds, cfg.SleepIdle)
	}
	parseServe(t, nil, "--sleep-idle-seconds", "90").sleep.apply(&cfg)
	if cfg.SleepIdle != 90*time.Second {
		t.Errorf("--sleep-idle-seconds 90: engine SleepIdle %v", cfg.SleepIdle)
	}
}

// A router's child tells the router when its model sleeps and wakes; other servers print nothing.
func TestRouterChildReportsSleepState(t *testing.T) {
	var out strings.Builder
	report := &childReporter{on: true, w: &out}
	report.sleeping(true)
	report.sleeping(false)
	const want = "cmd_child_to_router:state:{\"state\":\"sleeping\"}\n" +
		"cmd_child_to_router:state:{\"state\":\"ready\"}\n"
	if out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	var none strings.Builder
	(&childReporter{w: &none}).sleeping(true)
	if none.Len() != 0 {
		t.Errorf("a server that is no router's child printed %q", none.String())
	}
}
