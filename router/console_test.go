package router

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/log"
)

// A child's load progress shows on the router's console once per tenth.
func TestRouterLogsLoadProgress(t *testing.T) {
	var out bytes.Buffer
	r, err := New(Config{}, log.New(&out))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out.Reset()
	r.models["m"] = &instance{model: &Model{Name: "m"}, status: StatusLoading}
	for _, p := range []float64{0, 0.01, 0.05, 0.1, 0.12, 0.55, 0.56, 1} {
		r.childState("m", ChildState{State: StateLoading, Progress: &p})
	}
	var percents []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.Contains(line, "loading model") || !strings.Contains(line, "model=m") {
			t.Errorf("line %q", line)
		}
		_, pct, _ := strings.Cut(line, "percent=")
		percents = append(percents, pct)
	}
	if got := strings.Join(percents, ","); got != "0,10,55,100" {
		t.Errorf("logged percents %s, want 0,10,55,100", got)
	}
}
