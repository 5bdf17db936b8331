package model_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// edited copies the shared file at parts with its metadata and tensors changed: keys in drop
// left out and add appended; each tensor passed through tensor (nil: dropped).
func edited(t *testing.T, drop []string, add []gguf.KV, tensor func(gguf.TensorData) *gguf.TensorData, parts ...string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(shareddata.Path(t, parts...))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var kvs []gguf.KV
	for _, kv := range f.KV {
		if !slices.Contains(drop, kv.Key) {
			kvs = append(kvs, kv)
		}
	}
	var ts []gguf.TensorData
	for _, ti := range f.Tensors {
		td := gguf.TensorData{Name: ti.Name, Shape: ti.Shape, Type: ti.Type, Data: bytes.Clone(f.TensorData(&ti))}
		if tensor != nil {
			if e := tensor(td); e != nil {
				ts = append(ts, *e)
			}
			continue
		}
		ts = append(ts, td)
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, append(kvs, add...), ts); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestMoELoadErrors checks that a damaged Mixture-of-Experts file fails to load with a
// message naming the key or tensor at fault.
func TestMoELoadErrors(t *testing.T) {
	dev := gputest.Device(t)
	u32 := func(k string, v uint32) []gguf.KV { return []gguf.KV{{Key: k, Type: gguf.TypeUint32, Value: v}} }
	drop := func(name string) func(gguf.TensorData) *gguf.TensorData {
		return func(td gguf.TensorData) *gguf.TensorData {
			if td.Name == name {
				return nil
			}
			return &td
		}
	}
	for _, c := range []struct {
		name   string
		drop   []string
		add    []gguf.KV
		tensor func(gguf.TensorData) *gguf.TensorData
		want   string
	}{
		{"no expert count", []string{"qwen3moe.expert_count", "qwen3moe.expert_used_count"}, nil, nil,
			`tensor "blk.0.ffn_gate_inp.weight": a router, but qwen3moe.expert_count is missing`},
		{"more used than experts", []string{"qwen3moe.expert_used_count"}, u32("qwen3moe.expert_used_count", 9), nil,
			"qwen3moe.expert_used_count = 9 invalid for 8 experts"},
		{"other expert count", []string{"qwen3moe.expert_count"}, u32("qwen3moe.expert_count", 6), nil,
			`tensor "blk.0.ffn_gate_inp.weight" has shape [128 8], want [128 6]`},
		{"router without experts", nil, nil, drop("blk.1.ffn_up_exps.weight"),
			`tensor "blk.1.ffn_up_exps.weight" missing`},
		{"experts without a router", nil, nil, drop("blk.2.ffn_gate_inp.weight"),
			`tensor "blk.2.ffn_gate_inp.weight" missing`},
		{"expert of another size", nil, nil, func(td gguf.TensorData) *gguf.TensorData {
			if td.Name == "blk.3.ffn_down_exps.weight" {
				td.Shape = []uint64{64, 128, 4}
				td.Data = td.Data[:len(td.Data)/2]
			}
			return &td
		}, `tensor "blk.3.ffn_down_exps.weight" has shape [64 128 4], want [64 128 8]`},
		{"unknown type", nil, nil, func(td gguf.TensorData) *gguf.TensorData {
			if td.Name == "blk.0.ffn_gate_exps.weight" {
				td.Type = gguf.TypeQ8_1 // 40 bytes per 32 values; no kernel reads it
				td.Data = make([]byte, 128/32*40*64*8)
			}
			return &td
		}, `tensor "blk.0.ffn_gate_exps.weight": type Q8_1 not supported`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := edited(t, c.drop, c.add, c.tensor, "models", "moe", "qwen3moe-F32.gguf")
			m, err := model.Load(dev, f, model.Options{})
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q\nwant it to contain %q", err, c.want)
			}
		})
	}
}

// TestMoEBatchLimit checks that a batch size whose token-expert pairs exceed what one pass
// routes is refused at load with the size to use.
func TestMoEBatchLimit(t *testing.T) {
	f, err := gguf.Open(shareddata.Path(t, "models", "moe", "qwen3moe-F32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = model.Load(gputest.Device(t), f, model.Options{MaxBatch: gpu.MoEMaxAssignments/2 + 1})
	want := fmt.Sprintf("more than the %d one pass takes: lower the batch size (-ub %d)", gpu.MoEMaxAssignments, gpu.MoEMaxAssignments/2)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}
}

// moeVariants are the device's kernel shapes the MoE tests run: CPU adapters' barrier-free
// kernels, and GPUs' cooperative ones with and without subgroups.
var moeVariants = []struct {
	name                   string
	barrierFree, subgroups bool
}{{"barrier-free", true, false}, {"gpu", false, false}, {"gpu-subgroups", false, true}}

// withVariant runs fn with the device set to v's kernel shape.
func withVariant(t *testing.T, dev *gpu.Device, barrierFree, subgroups bool, fn func()) {
	t.Helper()
	if subgroups && !dev.Features.Subgroups {
		t.Skip("the adapter has no subgroups")
	}
	defer func(bf, sg bool) { dev.BarrierFree, dev.SubgroupMath = bf, sg }(dev.BarrierFree, dev.SubgroupMath)
	dev.BarrierFree, dev.SubgroupMath = barrierFree, subgroups
	fn()
}

// TestMoEBatchMatchesSeparate decodes four sequences in shared batches (so the experts see
// several tokens, each its own) and checks that every sequence's greedy tokens equal decoding
// it alone, for each MoE reference architecture and kernel shape.
func TestMoEBatchMatchesSeparate(t *testing.T) {
	dev := gputest.Device(t)
	for _, file := range []string{"qwen3moe-Q4_K_M.gguf", "gptoss-MXFP4_MOE.gguf", "llamamoe-Q8_0.gguf"} {
		for _, v := range moeVariants {
			t.Run(file+"/"+v.name, func(t *testing.T) {
				withVariant(t, dev, v.barrierFree, v.subgroups, func() {
					m := loadBatch(t, 64, "models", "moe", file)
					m2 := loadOpts(t, model.Options{MaxBatch: 64, MaxOutputs: 4}, "models", "moe", file)
					seqs := [][]int32{{1, 403, 407, 261, 378}, {1, 300, 301}, {1, 403, 407, 261, 378, 432, 383, 286, 261}, {1, 50, 60, 70}}
					const steps = 8
					var alone [][]int32
					for _, s := range seqs {
						alone = append(alone, greedy(t, m, s, steps, nil))
					}
					got := greedyBatched(t, m2, seqs, steps)
					for i := range seqs {
						if !equal(got[i], alone[i]) {
							t.Errorf("sequence %d: batched %v, alone %v", i, got[i], alone[i])
						}
					}
				})
			})
		}
	}
}

// greedyBatched decodes every sequence steps tokens greedily: each prompt in a pass of its own
// (as greedy runs it), then one token of every sequence per pass, so that the decode passes
// are what batching changes.
func greedyBatched(t *testing.T, m *model.Model, seqs [][]int32, steps int) [][]int32 {
	t.Helper()
	const region = 64
	kv, err := m.NewKVCache(len(seqs) * region)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	out := make([][]int32, len(seqs))
	var next model.Batch
	for i, s := range seqs {
		b := model.Batch{Logits: []int{len(s) - 1}}
		for p, tok := range s {
			b.Tokens, b.Pos, b.Base = append(b.Tokens, tok), append(b.Pos, int32(p)), append(b.Base, int32(i*region))
		}
		logits, err := m.ForwardBatch(kv, b)
		if err != nil {
			t.Fatal(err)
		}
		id := argmax(logits[0])
		out[i] = append(out[i], id)
		next.Tokens, next.Pos, next.Base = append(next.Tokens, id), append(next.Pos, int32(len(s))), append(next.Base, int32(i*region))
		next.Logits = append(next.Logits, i)
	}
	for step := 1; step < steps; step++ {
		logits, err := m.ForwardBatch(kv, next)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range logits {
			id := argmax(l)
			out[i] = append(out[i], id)
			next.Tokens[i] = id
			next.Pos[i]++
		}
	}
	return out
}

// TestMoEPromptMatchesTokenByToken runs a 100-token prompt in one pass (so the grouped
// prefill kernels run, each expert's tiles of tokens) and token by token (the decode
// kernels), for each kernel shape: the last logits agree and give the same greedy token. On
// CPU adapters an F32 or Q8_0 model gives the same bits either way; GPUs' tiles sum in another
// order than their matrix-vector kernel (1.5e-4 measured for F32). Quantized weights get a
// looser bound where the two paths' sums differ in the last bits (GPUs; K-quants on CPU
// adapters, packed Q8_K rows against f32 block loops): a last-bit difference moves an 8-bit
// rounding of the next product's input, and these random models amplify it, as they do for a
// dense model (synth256-Q4_K_M: 1.3e-2 between the two on CPU adapters).
func TestMoEPromptMatchesTokenByToken(t *testing.T) {
	dev := gputest.Device(t)
	prompt := []int32{1}
	for i := range 99 {
		prompt = append(prompt, int32(3+(i*37)%500))
	}
	for _, c := range []struct {
		file     string
		cpu, gpu float64
	}{{"gptoss-F32.gguf", 0, 1e-3}, {"llamamoe-Q8_0.gguf", 0, 3e-2}, {"qwen3moe256-Q4_K_M.gguf", 3e-2, 3e-2}} {
		for _, v := range moeVariants {
			t.Run(c.file+"/"+v.name, func(t *testing.T) {
				withVariant(t, dev, v.barrierFree, v.subgroups, func() {
					m := loadBatch(t, 128, "models", "moe", c.file)
					whole := forwardAlone(t, m, prompt)
					kv2, err := m.NewKVCache(256)
					if err != nil {
						t.Fatal(err)
					}
					defer kv2.Release()
					var one []float32
					for i, tok := range prompt {
						if one, err = m.Forward(kv2, []int32{tok}, i); err != nil {
							t.Fatal(err)
						}
					}
					tol := c.gpu
					if v.barrierFree {
						tol = c.cpu
					}
					if e := cpuref.RelErr(whole, one); e > tol {
						t.Errorf("whole prompt vs token by token: relative error %.3g (tolerance %g)", e, tol)
					}
					if argmax(whole) != argmax(one) {
						t.Errorf("greedy token %d from the whole prompt, %d token by token", argmax(whole), argmax(one))
					}
				})
			})
		}
	}
}

// TestMoEHparams checks the Mixture-of-Experts keys as each architecture reads them.
func TestMoEHparams(t *testing.T) {
	for _, c := range []struct {
		file string
		want string
	}{
		{"qwen3moe-F32.gguf", "qwen3moe experts 8 used 2 ff 64 gating 1 norm true scale 1 oai false window 0/0"},
		{"llamamoe-F32.gguf", "llama experts 4 used 2 ff 64 gating 1 norm true scale 1 oai false window 0/0"},
		{"gptoss-F32.gguf", "gpt-oss experts 8 used 2 ff 64 gating 3 norm false scale 1 oai true window 8/2"},
	} {
		f, err := gguf.Open(shareddata.Path(t, "models", "moe", c.file))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := model.ReadConfig(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprintf("%s experts %d used %d ff %d gating %d norm %v scale %g oai %v window %d/%d", cfg.Arch, cfg.NExpert, cfg.NExpertUsed,
			cfg.NFFExpert, cfg.ExpertGating, cfg.ExpertNorm, cfg.ExpertScale, cfg.SwiGLUOAI, cfg.SlidingWindow, cfg.SWAPattern)
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.file, got, c.want)
		}
	}
}
