package engine

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// A model across several devices (llama.cpp's --device A,B --split-mode layer): the engine
// opens each listed adapter, gives each device consecutive layers (model.SplitLayers, by
// --tensor-split or the devices' memory) and runs everything else as before: the engine
// holds the first stage's model and cache, whose methods cover every stage (model/split.go).
// The first device is the main one: the vision encoder and a draft model live there.

// DeviceLayers is one device of the split and the layers it holds, [Lo, Hi); Output says it
// holds the output norm and matrix.
type DeviceLayers struct {
	Index  int // the adapter's index in `wgpu-llama devices`
	Name   string
	Lo, Hi int
	Output bool
}

// openDevices opens the adapters cfg lists (Devices, else Device), each with the memory cap
// and arithmetic cfg asks for.
func openDevices(cfg Config) ([]*gpu.Device, []int, error) {
	indexes := cfg.Devices
	if len(indexes) == 0 {
		indexes = []int{cfg.Device}
	}
	var devs []*gpu.Device
	for _, i := range indexes {
		dev, err := gpu.Open(i)
		if err != nil {
			closeDevices(devs)
			if len(indexes) > 1 {
				return nil, nil, fmt.Errorf("device %d: %w", i, err)
			}
			return nil, nil, err
		}
		dev.SetBudget(cfg.GPUMemory)
		dev.SetCPUMath(cfg.CPUExact)
		dev.Checked = dev.Checked || cfg.CheckedShaders
		devs = append(devs, dev)
	}
	return devs, indexes, nil
}

// closeDevices closes devs.
func closeDevices(devs []*gpu.Device) {
	for _, d := range devs {
		d.Close()
	}
}

// splitLayers is how many layers each of devs holds: nil for one device; else by
// cfg.TensorSplit (missing entries 0), or in proportion to the memory each device reports
// (equal shares where none reports any).
func splitLayers(devs []*gpu.Device, c model.Config, cfg Config) ([]int, error) {
	if len(devs) == 1 {
		return nil, nil
	}
	weights := make([]float64, len(devs))
	if len(cfg.TensorSplit) > len(devs) {
		return nil, fmt.Errorf("--tensor-split gives %d shares for %d devices", len(cfg.TensorSplit), len(devs))
	}
	copy(weights, cfg.TensorSplit)
	if cfg.TensorSplit == nil {
		known := true
		for i, d := range devs {
			have, _ := d.Memory()
			weights[i] = float64(have)
			known = known && have > 0
		}
		if !known {
			for i := range weights {
				weights[i] = 1
			}
		}
	}
	return model.SplitLayers(c.NLayer, weights)
}

// describeSplit names each device with layers and its layers, for logs and /props; pos[i]
// is the place in devs of the i-th.
func describeSplit(devs []*gpu.Device, indexes, layers []int, nLayer int) (out []DeviceLayers, pos []int) {
	if layers == nil {
		layers = []int{nLayer}
	}
	lo := 0
	for i, n := range layers {
		if n > 0 {
			out = append(out, DeviceLayers{Index: indexes[i], Name: devs[i].Info.Name, Lo: lo, Hi: lo + n})
			pos = append(pos, i)
		}
		lo += n
	}
	if len(out) == 0 { // a model without layers: its embeddings and output on the first
		out, pos = append(out, DeviceLayers{Index: indexes[0], Name: devs[0].Info.Name}), []int{0}
	}
	out[len(out)-1].Output = true
	return out, pos
}

// checkFitsSplit is checkFits for each device of a split: its layers' weights, cache and
// state, and a pass's activations, against what it has.
func checkFitsSplit(devs []*gpu.Device, indexes, layers []int, f *gguf.File, c model.Config, opts model.Options, kp kvPlan, cfg Config) error {
	for _, st := range planStages(devs, indexes, layers, f, c, opts, kp) {
		if st.Have > 0 && st.need.Total() > st.Have {
			_, source := st.dev.Memory()
			return tooBig(st.need, opts, kp, cfg, fmt.Sprintf("device %d (%s), which holds layers %d-%d, has %s (%s)", st.pos, st.Name, st.Lo, st.Hi-1, mib(st.Have), source), nil)
		}
	}
	return nil
}

// stagePlan is one device's share of a split as planStages estimates it.
type stagePlan struct {
	SplitPlan
	pos  int // the device's place in the --device list
	dev  *gpu.Device
	need model.Footprint
}

// planStages estimates what each device with layers would hold (model.EstimateStageFootprint)
// and reports what it has.
func planStages(devs []*gpu.Device, indexes, layers []int, f *gguf.File, c model.Config, opts model.Options, kp kvPlan) []stagePlan {
	c = withVocab(f, c)
	split, pos := describeSplit(devs, indexes, layers, c.NLayer)
	out := make([]stagePlan, len(split))
	for i, d := range split {
		dev := devs[pos[i]]
		have, _ := dev.Memory()
		need := model.EstimateStageFootprint(c, f, opts, kp.nPages<<pageBits, kp.states, dev.BarrierFree, d.Lo, d.Hi)
		out[i] = stagePlan{SplitPlan: SplitPlan{DeviceLayers: d, Need: need.Total(), Have: have}, pos: pos[i], dev: dev, need: need}
	}
	return out
}

// SplitPlan is how Load would put a model on cfg's devices: each device's layers and the
// memory it would take (Footprint.Total), with what it has (0: not told).
type SplitPlan struct {
	DeviceLayers
	Need, Have uint64
}

// PlanSplit opens cfg's devices and plans the model at cfg.ModelPath over them as Load would,
// without loading it: `wgpu-llama devices -m FILE --device A,B` prints it.
func PlanSplit(cfg Config) ([]SplitPlan, error) {
	devs, indexes, err := openDevices(cfg)
	if err != nil {
		return nil, err
	}
	defer closeDevices(devs)
	f, err := gguf.Open(cfg.ModelPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := model.ReadConfig(f)
	if err != nil {
		return nil, err
	}
	nSlots := max(cfg.Slots, 1)
	kp, err := planKV(cfg, c.NCtxTrain, nSlots)
	if err != nil {
		return nil, err
	}
	layers, err := splitLayers(devs, c, cfg)
	if err != nil {
		return nil, err
	}
	opts := model.Options{MaxBatch: cfg.BatchSize, MaxOutputs: nSlots, KVF32: cfg.KVF32}
	var out []SplitPlan
	for _, st := range planStages(devs, indexes, layers, f, c, opts, kp) {
		out = append(out, st.SplitPlan)
	}
	return out, nil
}
