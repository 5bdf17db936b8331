package cli

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
)

const quantizeSynopsis = "wgpu-llama quantize [--dry-run] [-v] IN.gguf OUT.gguf TYPE"

// runQuantize implements `wgpu-llama quantize IN OUT TYPE`, llama-quantize without an
// importance matrix: the same per-tensor types for each mix, and for the types whose
// quantizers are bit-exact the same bytes.
func runQuantize(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("quantize", quantizeSynopsis, stderr)
	dryRun := fs.Bool("dry-run", false, "print the tensor types and sizes without writing OUT (then OUT may be left out)")
	verbose := fs.Bool("v", false, "verbose logging")
	fs.Usage = func() {
		names := make([]string, 0, len(quantize.Mixes()))
		for _, m := range quantize.Mixes() {
			names = append(names, m.String())
		}
		fmt.Fprintf(stderr, "usage: %s\nTYPE: %s\n", quantizeSynopsis, strings.Join(names, ", "))
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *dryRun && len(pos) == 2 {
		pos = []string{pos[0], "", pos[1]}
	}
	if len(pos) != 3 {
		fs.Usage()
		return fmt.Errorf("quantize: want IN.gguf OUT.gguf TYPE, got %d arguments", len(pos))
	}
	inPath, outPath := pos[0], pos[1]
	mix, err := quantize.ParseMix(pos[2])
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	logger := newLogger(stderr, *verbose)

	w := bufio.NewWriter(stdout)
	defer w.Flush()
	progress := func(p quantize.Progress) {
		writeTensorLine(w, p.Index, p.Count, p.Plan, p.OldSize, p.NewSize)
		w.Flush()
	}

	start := time.Now()
	var sum quantize.Summary
	if *dryRun {
		f, err := gguf.Open(inPath)
		if err != nil {
			return fmt.Errorf("quantize: %w", err)
		}
		defer f.Close()
		plans, err := quantize.Plan(f, mix)
		if err != nil {
			return err
		}
		sum.Plans = plans
		for i, p := range plans {
			info, _ := f.Tensor(p.Name)
			progress(quantize.Progress{Index: i + 1, Count: len(plans), Plan: p, OldSize: info.Size, NewSize: p.Size()})
			sum.Elements += p.Elements()
			sum.OldSize += info.Size
			sum.NewSize += p.Size()
			if p.Fallback() {
				sum.Fallbacks++
			}
		}
	} else {
		logger.Info("quantizing", "in", inPath, "out", outPath, "type", mix)
		if sum, err = quantize.Path(inPath, outPath, mix, progress); err != nil {
			return err
		}
	}
	writeSummary(w, sum)
	if !*dryRun {
		logger.Info("done", "out", outPath, "took", time.Since(start).Round(time.Millisecond))
	}
	return w.Flush()
}

const mib = 1024 * 1024

// writeTensorLine prints a tensor as llama-quantize does:
// "[  3/ 21] blk.0.attn_k.weight - [256, 128], type = F32, converting to Q4_K .. size = 0.12 MiB -> 0.02 MiB".
func writeTensorLine(w io.Writer, i, n int, p quantize.TensorPlan, oldSize, newSize uint64) {
	width := len(fmt.Sprint(n))
	fmt.Fprintf(w, "[%*d/%d] %-36s - %-14s type = %6s, ", width, i, n, p.Name, formatShape(p.Shape)+",", p.From)
	if !p.Converts() {
		fmt.Fprintf(w, "size = %8.3f MiB\n", float64(oldSize)/mib)
		return
	}
	fmt.Fprintf(w, "converting to %-4s .. size = %8.2f MiB -> %8.2f MiB", p.To, float64(oldSize)/mib, float64(newSize)/mib)
	if p.Fallback() {
		fmt.Fprintf(w, " (fallback: %s)", p.Note)
	}
	fmt.Fprintln(w)
}

func writeSummary(w io.Writer, s quantize.Summary) {
	bpw := func(size uint64) float64 {
		if s.Elements == 0 {
			return 0
		}
		return float64(size) * 8 / float64(s.Elements)
	}
	fmt.Fprintf(w, "model size  = %8.2f MiB (%.2f BPW)\n", float64(s.OldSize)/mib, bpw(s.OldSize))
	fmt.Fprintf(w, "quant size  = %8.2f MiB (%.2f BPW)\n", float64(s.NewSize)/mib, bpw(s.NewSize))
	if s.Fallbacks > 0 {
		fmt.Fprintf(w, "WARNING: %d of %d tensor(s) required fallback quantization\n", s.Fallbacks, len(s.Plans))
	}
}
