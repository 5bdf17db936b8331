package main

import (
	"strings"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

func TestSleepIdleSecondsFlag(t *testing.T) {
	var cfg engine.Config
	f := parseServe(t, nil)
	f.sleep.apply(&cfg, func(string) string { return "" }, nil)
	if f.sleep.idleSeconds != -1 || cfg.SleepIdle != 0 || cfg.OnSleep != nil {
		t.Errorf("default: %d seconds, engine SleepIdle %v, OnSleep set %v; want -1, 0 (never), unset", f.sleep.idleSeconds, cfg.SleepIdle, cfg.OnSleep != nil)
	}
	parseServe(t, nil, "--sleep-idle-seconds", "90").sleep.apply(&cfg, func(string) string { return "" }, nil)
	if cfg.SleepIdle != 90*time.Second {
		t.Errorf("--sleep-idle-seconds 90: engine SleepIdle %v", cfg.SleepIdle)
	}
}

func TestRouterChildReportsSleepState(t *testing.T) {
	var out strings.Builder
	report := childStateReporter(func(k string) string {
		if k == "WGPU_LLAMA_ROUTER_CHILD" {
			return "1"
		}
		return ""
	}, &out)
	if report == nil {
		t.Fatal("no reporter in a router's child")
	}
	report(true)
	report(false)
	const want = "cmd_child_to_router:state:{\"state\":\"sleeping\"}\n" +
		"cmd_child_to_router:state:{\"state\":\"ready\"}\n"
	if out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	if childStateReporter(func(string) string { return "" }, &out) != nil {
		t.Error("a server that is no router's child reports state lines")
	}
}
