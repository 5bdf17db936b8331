package hf

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/log"
)

// LogProgress logs a download once per tenth (per file), and by 100 MiB without a size.
func TestLogProgress(t *testing.T) {
	var out bytes.Buffer
	report := LogProgress(log.New(&out))
	for _, done := range []int64{0, 5, 9, 10, 11, 35, 99, 100} {
		report(Progress{File: "a.gguf", Done: done, Total: 100})
	}
	report(Progress{File: "b.gguf", Done: 50, Total: -1})
	report(Progress{File: "b.gguf", Done: 60, Total: -1})
	report(Progress{File: "b.gguf", Done: 200 << 20, Total: -1})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var got []string
	for _, l := range lines {
		if _, pct, ok := strings.Cut(l, "percent="); ok {
			got = append(got, strings.Fields(pct)[0])
		} else if _, m, ok := strings.Cut(l, "MiB="); ok {
			got = append(got, m+"MiB")
		}
	}
	if s := strings.Join(got, ","); s != "0,10,35,99,100,0.0MiB,200.0MiB" {
		t.Errorf("logged %s\n%s", s, out.String())
	}
}
