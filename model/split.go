package model

import (
	"fmt"
	"sort"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// A model split across devices (llama.cpp's --split-mode layer): each device holds a stage,
// consecutive layers with their weights and KV cache, the first the token embeddings and the
// last the output norm and matrix. A pass runs the stages in order, each as one submit, and
// hands the hidden states to the next through host memory (WebGPU has no copies between
// devices): one readback and one upload of n_tokens × n_embd floats per stage boundary. The
// first stage is the Model the engine holds; its exported methods cover the whole chain.

// SplitLayers assigns nLayer layers to devices in proportion to weights (llama.cpp's
// --tensor-split), as llama.cpp does: with the output counted as one more layer, layer il
// goes to the first device whose cumulative share exceeds il/(nLayer+1). It returns each
// device's count of layers; a device may get none.
func SplitLayers(nLayer int, weights []float64) ([]int, error) {
	if len(weights) == 0 {
		return nil, fmt.Errorf("model: a split over no devices")
	}
	sum := 0.0
	for _, w := range weights {
		if w < 0 {
			return nil, fmt.Errorf("model: negative tensor split %v", weights)
		}
		sum += w
	}
	if sum <= 0 {
		return nil, fmt.Errorf("model: tensor split %v gives every device nothing", weights)
	}
	cum := make([]float64, len(weights))
	acc := 0.0
	for i, w := range weights {
		acc += w
		cum[i] = acc / sum
	}
	counts := make([]int, len(weights))
	for il := range nLayer {
		frac := float64(il) / float64(nLayer+1)
		d := sort.Search(len(cum), func(i int) bool { return cum[i] > frac })
		counts[min(d, len(cum)-1)]++
	}
	return counts, nil
}

// LoadSplit loads the model with layers[i] consecutive layers on devs[i] (nil layers: all on
// devs[0]). Devices given no layers hold nothing; the last device with layers holds the
// output. Splits are refused where a stage would need another's data beyond the hidden
// states: an encoder, or a layer reading the KV cache of a layer on an earlier device.
func LoadSplit(devs []*gpu.Device, layers []int, f *gguf.File, opts Options) (*Model, error) {
	cfg, tok, err := readModel(f, &opts)
	if err != nil {
		return nil, err
	}
	if layers == nil {
		layers = []int{cfg.NLayer}
	}
	if len(layers) != len(devs) {
		return nil, fmt.Errorf("model: %d layer counts for %d devices", len(layers), len(devs))
	}
	type stage struct {
		dev    *gpu.Device
		lo, hi int
	}
	var stages []stage
	lo := 0
	for i, n := range layers {
		if n < 0 {
			return nil, fmt.Errorf("model: %d layers for device %d", n, i)
		}
		if n > 0 {
			stages = append(stages, stage{devs[i], lo, lo + n})
		}
		lo += n
	}
	if lo != cfg.NLayer {
		return nil, fmt.Errorf("model: the split gives %d layers, the model has %d", lo, cfg.NLayer)
	}
	if len(stages) == 0 { // a model without layers still has its embeddings and output
		stages = []stage{{devs[0], 0, 0}}
	}
	if len(stages) > 1 {
		if a, _ := lookupArch(cfg.Arch); a != nil && a.load != nil {
			return nil, fmt.Errorf("model: %s is an encoder: it runs on one device (--split-mode none)", cfg.Arch)
		}
		for _, st := range stages {
			for il := st.lo; il < st.hi; il++ {
				if src := cfg.kvSource(il); src < st.lo {
					return nil, fmt.Errorf("model: layer %d reads layer %d's KV cache, which the split puts on another device: move the split (--tensor-split)", il, src)
				}
			}
		}
	}
	var head, prev *Model
	var done uint64
	for _, st := range stages {
		m, err := loadStage(st.dev, f, opts, cfg, tok, st.lo, st.hi, &done)
		if err != nil {
			if head != nil {
				head.Close()
			}
			return nil, err
		}
		if head == nil {
			head = m
		} else {
			prev.next = m
		}
		prev = m
	}
	return head, nil
}

// last is the stage that ends the model: the one with the output norm and matrix.
func (m *Model) last() *Model {
	for m.next != nil {
		m = m.next
	}
	return m
}

// StageLayers lists the layers of each device the model is split over, in order: [lo, hi)
// pairs, with the device each stage runs on.
func (m *Model) StageLayers() []Stage {
	var out []Stage
	for st := m; st != nil; st = st.next {
		out = append(out, Stage{Device: st.dev, Lo: st.lo, Hi: st.hi})
	}
	return out
}

// Stage is one device's part of a split model: layers [Lo, Hi).
type Stage struct {
	Device *gpu.Device
	Lo, Hi int
}

// begin uploads a checked batch and records its row copies and the decoder's layers on every
// stage, running each stage but the last and handing its hidden states to the next; it returns
// the last stage's recorder, the final hidden states (before the output norm) in that stage's
// scratch x.
func (m *Model) begin(kv *KVCache, b Batch) (*gpu.Recorder, error) {
	var x []byte
	for st, skv := m, kv; ; st, skv = st.next, skv.next {
		r, err := st.beginStage(skv, b, x)
		if err != nil || st.next == nil {
			return r, err
		}
		if x, err = r.SubmitAndRead(st.scratch.x, 0, uint64(len(b.Tokens)*st.Config.NEmbd)*4); err != nil {
			return nil, err
		}
	}
}
