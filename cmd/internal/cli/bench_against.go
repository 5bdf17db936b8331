package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strconv"
	"text/tabwriter"
	"time"
)

// llamaBench runs llama.cpp's llama-bench (bench --against) on the model file bench measures,
// one repetition at a time so that its runs interleave with ours: on a shared or throttled
// machine both then see the same conditions.
type llamaBench struct {
	path, model string
	depth       int
	// samples holds llama-bench's tokens/s by test name (bench's: pp512, tg128 @ d4096).
	samples map[string][]float64
}

// llamaBenchTimeout bounds one llama-bench run (a single repetition of one test).
const llamaBenchTimeout = 10 * time.Minute

// run runs one repetition of llama-bench's pp (prompt > 0) or tg (gen > 0) test and records
// its tokens/s under name.
func (lb *llamaBench) run(name string, prompt, gen int) error {
	ctx, cancel := context.WithTimeout(context.Background(), llamaBenchTimeout)
	defer cancel()
	args := []string{"-m", lb.model, "-p", strconv.Itoa(prompt), "-n", strconv.Itoa(gen), "-r", "1", "-o", "json"}
	if lb.depth > 0 {
		args = append(args, "-d", strconv.Itoa(lb.depth))
	}
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, lb.path, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bench --against %s: %w\n%s", lb.path, err, lastLines(errOut.String(), 8))
	}
	var rs []struct {
		NPrompt int     `json:"n_prompt"`
		NGen    int     `json:"n_gen"`
		AvgTS   float64 `json:"avg_ts"`
	}
	if err := json.Unmarshal(out.Bytes(), &rs); err != nil {
		return fmt.Errorf("bench --against %s: its JSON: %w", lb.path, err)
	}
	for _, r := range rs {
		if r.NPrompt == prompt && r.NGen == gen && r.AvgTS > 0 {
			lb.samples[name] = append(lb.samples[name], r.AvgTS)
			return nil
		}
	}
	return fmt.Errorf("bench --against %s: no result for -p %d -n %d in its output", lb.path, prompt, gen)
}

// fill sets r's llama-bench figures: the mean and sample standard deviation of its runs of
// the test, and our tokens/s over its.
func (lb *llamaBench) fill(r *benchResult) {
	rs := lb.samples[r.Test]
	if len(rs) == 0 {
		return
	}
	var mean, sd float64
	for _, v := range rs {
		mean += v
	}
	mean /= float64(len(rs))
	if len(rs) > 1 {
		for _, v := range rs {
			sd += (v - mean) * (v - mean)
		}
		sd = math.Sqrt(sd / float64(len(rs)-1))
	}
	r.AgainstTokensPerSecond, r.AgainstStddev, r.AgainstRatio = mean, sd, r.TokensPerSecond/mean
}

// writeAgainst prints the side-by-side table of bench --against.
func writeAgainst(w io.Writer, results []benchResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, " model\t test\t wgpu-llama t/s\t llama.cpp t/s\t ratio")
	for _, r := range results {
		if r.AgainstTokensPerSecond == 0 {
			continue
		}
		fmt.Fprintf(tw, " %s\t %s\t %.2f ± %.2f\t %.2f ± %.2f\t %.2f×\n", r.Model, r.Test, r.TokensPerSecond, r.Stddev,
			r.AgainstTokensPerSecond, r.AgainstStddev, r.AgainstRatio)
	}
	return tw.Flush()
}

// lastLines is the last n lines of s (a failed tool's stderr, for the error message).
func lastLines(s string, n int) string {
	lines := bytes.Split(bytes.TrimRight([]byte(s), "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
