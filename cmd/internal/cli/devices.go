package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// runDevices implements `wgpu-llama devices`: the adapters --device N chooses from.
func runDevices(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("devices", "wgpu-llama devices", stderr)
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
	return tw.Flush()
}
