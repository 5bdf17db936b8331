package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// runDevices implements `wgpu-llama devices`: the adapters --device chooses from, and with -m
// FILE how the model's layers would go on the --device adapters and what each would hold.
func runDevices(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("devices", "wgpu-llama devices [-m FILE --device A,B [--tensor-split X,Y] [-c N] [-np N]]", stderr)
	var mf modelFlags
	mf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	list, err := gpu.Adapters()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tNAME\tBACKEND\tTYPE\tDRIVER\tFEATURES")
	for _, a := range list {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", a.Index, a.Name, a.Backend, a.Type, a.Driver, a.Features)
	}
	if err := tw.Flush(); err != nil || mf.path == "" {
		return err
	}
	cfg, err := mf.engineConfig("", newLogger(stderr, mf.verbose))
	if err != nil {
		return err
	}
	plan, err := engine.PlanSplit(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%s on %d device(s):\n", cfg.ModelPath, len(plan))
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tNAME\tLAYERS\tOUTPUT\tNEEDS\tHAS")
	for _, p := range plan {
		layers := "none"
		if p.Hi > p.Lo {
			layers = fmt.Sprintf("%d-%d", p.Lo, p.Hi-1)
		}
		has := "?"
		if p.Have > 0 {
			has = fmt.Sprintf("%d MiB", p.Have>>20)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%v\t%d MiB\t%s\n", p.Index, p.Name, layers, p.Output, p.Need>>20, has)
	}
	return tw.Flush()
}
