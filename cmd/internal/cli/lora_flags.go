package cli

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// loraFlags are llama-server's LoRA flags: --lora FILE[,FILE] and --lora-scaled
// FILE:SCALE[,...] (each repeatable, the adapters numbered in the order given) and
// --lora-init-without-apply.
type loraFlags struct {
	specs     []engine.LoraSpec
	initEmpty bool
}

func (l *loraFlags) register(fs *flag.FlagSet) {
	fs.Var(loraList{l, false}, "lora", "LoRA adapter GGUF to load at scale 1; repeat it or give a comma-separated list for several")
	fs.Var(loraList{l, true}, "lora-scaled", "LoRA adapter with its scale, FILE:SCALE; repeat it or give a comma-separated list for several")
	boolVar(fs, &l.initEmpty, false, "load the adapters with every scale at 0 (POST /lora-adapters or a request's lora field sets them)", "lora-init-without-apply")
}

// loraList is --lora's or --lora-scaled's value.
type loraList struct {
	l      *loraFlags
	scaled bool
}

func (f loraList) String() string {
	if f.l == nil {
		return ""
	}
	var parts []string
	for _, s := range f.l.specs {
		parts = append(parts, fmt.Sprintf("%s:%g", s.Path, s.Scale))
	}
	return strings.Join(parts, ",")
}

func (f loraList) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		spec := engine.LoraSpec{Path: item, Scale: 1}
		if f.scaled {
			i := strings.LastIndexByte(item, ':')
			if i < 0 {
				return fmt.Errorf("%q is not FILE:SCALE", item)
			}
			s, err := strconv.ParseFloat(item[i+1:], 32)
			if err != nil || math.IsNaN(s) || math.IsInf(s, 0) {
				return fmt.Errorf("%q: the scale %q is not a number", item, item[i+1:])
			}
			spec = engine.LoraSpec{Path: item[:i], Scale: float32(s)}
		}
		f.l.specs = append(f.l.specs, spec)
	}
	return nil
}

// apply sets the engine's adapters.
func (l *loraFlags) apply(cfg *engine.Config) {
	cfg.Lora, cfg.LoraInitWithoutApply = l.specs, l.initEmpty
}
