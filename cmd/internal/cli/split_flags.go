package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// splitFlags are llama.cpp's multi-device flags: --device A,B lists the adapters (indices from
// `wgpu-llama devices`; one may repeat), --split-mode how a model uses them, --tensor-split
// each one's share of the layers, --main-gpu the one --split-mode none uses.
type splitFlags struct {
	devices     string
	splitMode   string
	tensorSplit string
	mainGPU     int
}

func (s *splitFlags) register(fs *flag.FlagSet) {
	stringVar(fs, &s.devices, "", "GPU adapters by their index in wgpu-llama devices, comma-separated: one, or several to split the model's layers across (-1 or empty: the best one)", "dev", "device")
	stringVar(fs, &s.splitMode, "layer", "how a model uses several --device adapters: layer (consecutive layers on each, the activations handed on through host memory) or none (--main-gpu's alone); row is not supported", "sm", "split-mode")
	stringVar(fs, &s.tensorSplit, "", "each --device adapter's share of the layers, comma-separated (e.g. 1,3; default: in proportion to their memory)", "ts", "tensor-split")
	intVar(fs, &s.mainGPU, 0, "with --split-mode none, the --device entry (by position) that holds the whole model", "mg", "main-gpu")
}

// apply resolves the flags into cfg's Device, Devices and TensorSplit.
func (s *splitFlags) apply(cfg *engine.Config) error {
	var devs []int
	if strings.TrimSpace(s.devices) != "" {
		for _, p := range strings.Split(s.devices, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil || i < -1 {
				return fmt.Errorf("--device %q: want adapter indices from `wgpu-llama devices`, comma-separated", s.devices)
			}
			devs = append(devs, i)
		}
	}
	var shares []float64
	if strings.TrimSpace(s.tensorSplit) != "" {
		for _, p := range strings.FieldsFunc(s.tensorSplit, func(r rune) bool { return r == ',' || r == '/' }) {
			v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil || v < 0 {
				return fmt.Errorf("--tensor-split %q: want non-negative shares, comma-separated", s.tensorSplit)
			}
			shares = append(shares, v)
		}
		if len(shares) > max(len(devs), 1) {
			return fmt.Errorf("--tensor-split gives %d shares for %d devices", len(shares), max(len(devs), 1))
		}
	}
	cfg.Device = -1
	switch s.splitMode {
	case "none":
		if len(devs) == 0 {
			if s.mainGPU != 0 {
				cfg.Device = s.mainGPU
			}
			return nil
		}
		if s.mainGPU < 0 || s.mainGPU >= len(devs) {
			return fmt.Errorf("--main-gpu %d: --device lists %d adapters", s.mainGPU, len(devs))
		}
		cfg.Device = devs[s.mainGPU]
	case "layer":
		switch len(devs) {
		case 0:
		case 1:
			cfg.Device = devs[0]
		default:
			for _, d := range devs {
				if d < 0 {
					return fmt.Errorf("--device %q: name each adapter of a split by its index", s.devices)
				}
			}
			cfg.Devices, cfg.TensorSplit = devs, shares
		}
	case "row":
		return fmt.Errorf("--split-mode row is not supported: splitting each matrix's rows needs copies between devices on every layer, which WebGPU does not have; use --split-mode layer")
	default:
		return fmt.Errorf("--split-mode %q: want layer or none", s.splitMode)
	}
	return nil
}
