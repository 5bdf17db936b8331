package hf

import (
	"fmt"
	"io"
	"strconv"

	"github.com/charmbracelet/log"
)

// Progress is the state of one file's download: Done of Total bytes (Total is -1 when the
// server did not say). A resumed download starts with Done at the bytes kept from before.
type Progress struct {
	File  string `json:"file"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}

// reporter is where a download's progress goes: a progress bar drawn on bar (a terminal)
// and, every whole percent (every MiB without a total), fn.
type reporter struct {
	bar io.Writer
	fn  func(Progress)
}

// start returns the tracker of one download that begins at done of total bytes.
func (r reporter) start(name string, done, total int64) *tracker {
	t := &tracker{rep: r, p: Progress{File: name, Done: done, Total: total}, shown: -1}
	t.report()
	return t
}

// tracker counts a download's bytes as they are written and reports each new step.
type tracker struct {
	rep   reporter
	p     Progress
	shown int64 // the step (percent, or MiB without a total) last reported
}

func (t *tracker) Write(b []byte) (int, error) {
	t.p.Done += int64(len(b))
	if t.step() != t.shown {
		t.report()
	}
	return len(b), nil
}

func (t *tracker) step() int64 {
	if t.p.Total > 0 {
		return t.p.Done * 100 / t.p.Total
	}
	return t.p.Done >> 20
}

func (t *tracker) report() {
	t.shown = t.step()
	if t.rep.bar != nil {
		drawBar(t.rep.bar, t.p)
	}
	if t.rep.fn != nil {
		t.rep.fn(t.p)
	}
}

// finish reports the last state and ends the bar's line.
func (t *tracker) finish() {
	if t.shown != t.step() {
		t.report()
	} else if t.rep.bar != nil {
		drawBar(t.rep.bar, t.p)
	}
	t.stop()
}

// stop ends the bar's line, leaving it as it was drawn last.
func (t *tracker) stop() {
	if t.rep.bar != nil {
		fmt.Fprintln(t.rep.bar)
	}
}

// drawBar draws p on one terminal line, over the line drawn before.
func drawBar(out io.Writer, p Progress) {
	if p.Total <= 0 {
		fmt.Fprintf(out, "\rDownloading %s %s MiB", p.File, mib(p.Done))
		return
	}
	const width = 30
	fill := int(p.Done * width / p.Total)
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if i < fill {
			bar[i] = '='
		}
	}
	fmt.Fprintf(out, "\rDownloading %s [%s] %3d%% %s/%s MiB", p.File, bar, p.Done*100/p.Total, mib(p.Done), mib(p.Total))
}

func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) }

// LogProgress returns a progress callback that logs a line at every tenth of a download (and
// every 100 MiB when the size is unknown): the console's progress where no terminal shows a bar.
func LogProgress(logger *log.Logger) func(Progress) {
	last := map[string]int64{}
	return func(p Progress) {
		step := p.Done / (100 << 20)
		if p.Total > 0 {
			step = p.Done * 10 / p.Total
		}
		if s, ok := last[p.File]; ok && s == step {
			return
		}
		last[p.File] = step
		if p.Total > 0 {
			logger.Info("downloading", "file", p.File, "percent", p.Done*100/p.Total, "MiB", mib(p.Done)+"/"+mib(p.Total))
		} else {
			logger.Info("downloading", "file", p.File, "MiB", mib(p.Done))
		}
	}
}
