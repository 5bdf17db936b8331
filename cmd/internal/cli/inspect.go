package cli

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/model"
)

const (
	// maxStringShown caps a shown string value (chat templates run to kilobytes).
	maxStringShown = 80
	// maxElemShown caps each shown string inside an array preview.
	maxElemShown = 40
	// arrayShownAll: arrays up to this long are shown whole; longer ones by their first few.
	arrayShownAll  = 8
	arrayShownHead = 3
)

// runInspect implements `wgpu-llama inspect FILE`: a gguf-dump-like listing of the header,
// metadata and tensors, for checking what a model file holds before serving it.
func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	noTensors := fs.Bool("no-tensors", false, "omit the tensor table")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wgpu-llama inspect [--no-tensors] FILE")
		fs.PrintDefaults()
	}
	files, err := parseInterspersed(fs, args) // flags may come before or after the file
	if err != nil {
		return err
	}
	if len(files) != 1 {
		fs.Usage()
		return fmt.Errorf("inspect: want one FILE, got %d", len(files))
	}
	path := files[0]

	// Open's errors name the path (os.PathError, gguf.FormatError.Path).
	f, err := gguf.Open(path)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	defer f.Close()

	w := bufio.NewWriter(stdout)
	writeInspect(w, path, f, !*noTensors)
	if err := w.Flush(); err != nil {
		return fmt.Errorf("inspect %s: %w", path, err)
	}
	return nil
}

func writeInspect(w io.Writer, path string, f *gguf.File, tensors bool) {
	fmt.Fprintf(w, "file:        %s\n", path)
	fmt.Fprintf(w, "version:     %d\n", f.Version)
	fmt.Fprintf(w, "alignment:   %d\n", f.Alignment)
	fmt.Fprintf(w, "tensors:     %d\n", len(f.Tensors))
	fmt.Fprintf(w, "metadata:    %d keys\n", len(f.KV))
	fmt.Fprintf(w, "data offset: 0x%x (%d)\n", f.DataOffset, f.DataOffset)
	fmt.Fprintf(w, "file size:   %d bytes (%s)\n", f.FileSize, humanBytes(f.FileSize))
	if line := modelLine(f); line != "" {
		fmt.Fprintf(w, "model:       %s\n", line)
	}

	fmt.Fprintf(w, "\nmetadata:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, kv := range f.KV {
		typ := kv.Type.String()
		if a, ok := kv.Value.(gguf.Array); ok {
			typ = arrayHeader(a)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", kv.Key, typ, formatValue(kv.Value))
	}
	tw.Flush()

	var params, size uint64
	for i := range f.Tensors {
		params += f.Tensors[i].NumElements()
		size += f.Tensors[i].Size
	}
	if tensors && len(f.Tensors) > 0 {
		fmt.Fprintf(w, "\ntensors:\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  #\tname\ttype\tshape\toffset\tsize\n")
		for i := range f.Tensors {
			t := &f.Tensors[i]
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t0x%x\t%d\n",
				i, t.Name, t.Type, formatShape(t.Shape), f.DataOffset+t.Offset, t.Size)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\ntotal: %d tensors, %d parameters, %d bytes (%s)\n",
		len(f.Tensors), params, size, humanBytes(size))
}

// modelLine says what the model registry makes of the file: its architecture's shape, or why
// it does not run here (an architecture not among model.Architectures, a bad key). Adapters and
// projectors, which are not models of their own, get none.
func modelLine(f *gguf.File) string {
	if t, _ := f.String("general.type"); t == "adapter" || t == "mmproj" || f.Architecture() == "clip" {
		return ""
	}
	c, err := model.ReadConfig(f)
	if err != nil {
		return "does not run here: " + strings.TrimPrefix(err.Error(), "model: ")
	}
	line := fmt.Sprintf("%s, %d layers, n_embd %d, %d heads (%d KV) of %d", c.Arch, c.NLayer, c.NEmbd, c.NHead, c.NKVHead, c.HeadDim)
	if c.Recurrent != nil {
		n := 0
		for _, r := range c.Recurrent {
			if r {
				n++
			}
		}
		line += fmt.Sprintf(" (%d recurrent layers: %d value heads of %d, %d key heads, conv %d)", n, c.SSMValHeads, c.SSMHeadDim, c.SSMKeyHeads, c.SSMConv)
	}
	if c.NExpert > 0 {
		return line + fmt.Sprintf(", %d experts (%d used) of %d", c.NExpert, c.NExpertUsed, c.NFFExpert)
	}
	return line + fmt.Sprintf(", n_ff %d", c.NFF)
}

func arrayHeader(a gguf.Array) string {
	return fmt.Sprintf("[arr %s x %d]", a.Elem, a.Len())
}

// formatValue renders a metadata value on one line, abbreviating long strings and arrays.
func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return quoteTrunc(x, maxStringShown)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case gguf.Array:
		return formatArray(x)
	}
	return fmt.Sprint(v)
}

func formatArray(a gguf.Array) string {
	n := a.Len()
	shown := n
	if n > arrayShownAll {
		shown = arrayShownHead
	}
	parts := make([]string, 0, shown+1)
	for i := range shown {
		parts = append(parts, formatElem(a.Values, i))
	}
	if shown < n {
		parts = append(parts, "...")
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func formatElem(values any, i int) string {
	switch x := values.(type) {
	case []string:
		return quoteTrunc(x[i], maxElemShown)
	case []gguf.Array:
		return formatArray(x[i])
	case []float32:
		return strconv.FormatFloat(float64(x[i]), 'g', -1, 32)
	case []float64:
		return strconv.FormatFloat(x[i], 'g', -1, 64)
	case []uint8:
		return fmt.Sprint(x[i])
	case []int8:
		return fmt.Sprint(x[i])
	case []uint16:
		return fmt.Sprint(x[i])
	case []int16:
		return fmt.Sprint(x[i])
	case []uint32:
		return fmt.Sprint(x[i])
	case []int32:
		return fmt.Sprint(x[i])
	case []uint64:
		return fmt.Sprint(x[i])
	case []int64:
		return fmt.Sprint(x[i])
	case []bool:
		return fmt.Sprint(x[i])
	}
	return "?"
}

// quoteTrunc quotes s, cutting it (at a rune boundary) to max bytes and noting its full length.
func quoteTrunc(s string, max int) string {
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

func formatShape(shape []uint64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatUint(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
