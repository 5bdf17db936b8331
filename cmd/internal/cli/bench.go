package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// benchResult is one test's figures, also the --json shape.
type benchResult struct {
	Test            string  `json:"test"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	Stddev          float64 `json:"stddev"`
	GBPerSecond     float64 `json:"gb_per_second"`
	// RooflineShare is the weight bandwidth as a share of the device's copy bandwidth
	// (generation tests); GFLOPPerSecond the weights' multiply-adds per second (prompt tests).
	RooflineShare   float64 `json:"roofline_share,omitempty"`
	GFLOPPerSecond  float64 `json:"gflop_per_second,omitempty"`
	CopyGBPerSecond float64 `json:"copy_gb_per_second"`
	Adapter         string  `json:"adapter"`
	Model           string  `json:"model"`
	SizeBytes       uint64  `json:"size_bytes"`
	Params          uint64  `json:"params"`
	// ActiveBytes and ActiveParams are the weights one token goes through: all of a dense
	// model's, a Mixture of Experts' chosen experts only. GB/s and GFLOP/s count them.
	ActiveBytes  uint64 `json:"active_bytes"`
	ActiveParams uint64 `json:"active_params"`
	Reps         int    `json:"reps"`
	// BaseTimeRatio is a +lora test's time per token over the base test's (bench --lora).
	BaseTimeRatio float64 `json:"base_time_ratio,omitempty"`
	// With bench --against: llama.cpp's llama-bench on the same file and test (mean and
	// stddev of its runs, interleaved with ours), and our tokens/s over its.
	AgainstTokensPerSecond float64 `json:"against_tokens_per_second,omitempty"`
	AgainstStddev          float64 `json:"against_stddev,omitempty"`
	AgainstRatio           float64 `json:"against_ratio,omitempty"`
}

// runBench implements `wgpu-llama bench`, like llama-bench: prompt processing (ppN: N prompt
// tokens in one batch) and generation (tgN: N tokens one at a time from an empty context),
// each repeated, reported as mean ± stddev tokens/s, the weight bytes read per second and how
// far that is from the roofline: generation's bandwidth as a share of the device's measured copy
// bandwidth, prompt processing's GFLOP/s. --profile adds a table of GPU time by kernel family
// for one pass of each test. --lora adds a "+lora" run of each test with the adapters, and
// how many times the base's time per token it takes. --against LLAMA_BENCH runs llama.cpp's
// llama-bench on the same file and tests, a repetition of it after each of ours, and prints
// both and the ratio.
func runBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", "wgpu-llama bench -m FILE [-p 512] [-n 128] [-d 0] [-r 5] [--lora FILE] [--against LLAMA_BENCH] [--json]", stderr)
	var (
		mf         modelFlags
		nPrompt    int
		nGen, reps int
		depth      int
		jsonOut    bool
		profile    bool
		against    string
		lf         loraFlags
	)
	mf.register(fs)
	fs.Var(loraList{&lf, false}, "lora", "LoRA adapter to run every test with at scale 1 (repeatable, or a comma-separated list)")
	fs.Var(loraList{&lf, true}, "lora-scaled", "LoRA adapter to run with, FILE:SCALE (repeatable, or a comma-separated list)")
	intVar(fs, &nPrompt, 512, "prompt tokens for the pp test (0: skip)", "p", "n-prompt")
	intVar(fs, &nGen, 128, "generated tokens for the tg test (0: skip)", "n", "n-gen")
	intVar(fs, &depth, 0, "tokens already in the cache when each test runs, as llama-bench's -d", "d", "n-depth")
	intVar(fs, &reps, 5, "repetitions of each test", "r", "repetitions")
	fs.BoolVar(&jsonOut, "json", false, "print a JSON array, one object per test")
	fs.StringVar(&against, "against", "", "llama.cpp's llama-bench to run on the same file and tests, a repetition of it after each of ours; prints both and the ratio")
	fs.BoolVar(&profile, "profile", false, "also time one pass of each test by kernel family (GPU timestamps, else each kernel submitted on its own)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if reps < 1 || nPrompt < 0 || nGen < 0 || depth < 0 {
		return fmt.Errorf("bench: -r must be at least 1 and -p, -n, -d not negative")
	}
	if against != "" && (mf.path == "" || len(lf.specs) > 0) {
		return fmt.Errorf("bench: --against needs a model file (-m) and no --lora: llama-bench runs the same file")
	}
	batch := max(nPrompt, min(depth, 512), 1) // the depth is filled in batches of this size
	// The copy bandwidth is measured on the device before the weights arrive: on an H100 it
	// read half as much with an 8B model resident.
	var copyGBs float64
	m, dev, closeModel, err := mf.loadModel(stderr, batch, func(dev *gpu.Device) (err error) {
		copyGBs, err = dev.CopyBandwidth(64<<20, 3)
		return err
	})
	if err != nil {
		return err
	}
	defer closeModel()
	// the base tests' figures count the model's weights, the +lora tests' the adapters' too
	baseBytes, baseParams := m.WeightBytes(), m.Params()
	activeBytes, activeParams := m.ActiveWeightBytes(), m.ActiveParams()
	var scales []float32
	for _, sp := range lf.specs {
		if _, err := m.LoadAdapterFile(sp.Path); err != nil {
			return fmt.Errorf("bench: lora %s: %w", sp.Path, err)
		}
		scales = append(scales, sp.Scale)
	}
	// forward runs a pass with the adapters at their scales (lora) or off; with them off it
	// records the same dispatches as a model without adapters.
	forward := func(kv *model.KVCache, tokens []int32, pos int, lora bool) error {
		b := model.Batch{Tokens: tokens, Pos: make([]int32, len(tokens)), Base: make([]int32, len(tokens)), Logits: []int{len(tokens) - 1}}
		if lora {
			b.Lora = scales
		}
		for i := range b.Pos {
			b.Pos[i] = int32(pos + i)
		}
		_, err := m.ForwardBatch(kv, b)
		return err
	}
	kv, err := m.NewKVCache(depth + max(nPrompt, nGen, 1))
	if err != nil {
		return err
	}
	defer kv.Release()

	base := benchResult{Adapter: dev.Info.Name, Model: filepath.Base(mf.path), SizeBytes: baseBytes, Params: baseParams,
		ActiveBytes: activeBytes, ActiveParams: activeParams, Reps: reps, CopyGBPerSecond: copyGBs}
	if mf.path == "" {
		base.Model = "stories260K.gguf"
	}
	rng := rand.New(rand.NewPCG(1, 2))
	token := func() int32 { return int32(3 + rng.IntN(m.Config.NVocab-3)) }
	// The depth's tokens go into the cache once; the tests write after them and leave them.
	for pos := 0; pos < depth; pos += batch {
		fill := make([]int32, min(batch, depth-pos))
		for i := range fill {
			fill[i] = token()
		}
		if err := forward(kv, fill, pos, false); err != nil {
			return err
		}
	}
	at := "" // llama-bench's name for a test at a depth
	if depth > 0 {
		at = fmt.Sprintf(" @ d%d", depth)
	}
	// With adapters each test runs twice, the base (adapters off) and the adapters, their
	// repetitions interleaved so that both see the same machine: a shared or throttled one
	// drifts more between runs than the adapters cost.
	variants := []bool{false}
	if scales != nil {
		variants = append(variants, true)
	}
	var lb *llamaBench
	if against != "" {
		lb = &llamaBench{path: against, model: mf.path, depth: depth, samples: map[string][]float64{}}
	}
	// test measures a test; with --against, llama-bench's run of it (prompt or gen tokens)
	// follows each repetition.
	test := func(name string, tokens, prompt, gen int, fn func(lora bool) error) ([]benchResult, error) {
		var afterRep func() error
		if lb != nil {
			afterRep = func() error { return lb.run(name, prompt, gen) }
		}
		rs, err := measure(reps, tokens, len(variants), func(v int) error { return fn(variants[v]) }, afterRep)
		if err != nil {
			return nil, err
		}
		rs[0] = base.with(rs[0], name)
		if lb != nil {
			lb.fill(&rs[0])
		}
		if len(rs) > 1 {
			withLora := base
			withLora.SizeBytes, withLora.Params = m.WeightBytes(), m.Params()
			withLora.ActiveBytes, withLora.ActiveParams = m.ActiveWeightBytes(), m.ActiveParams()
			rs[1] = withLora.with(rs[1], name+" +lora")
		}
		return rs, nil
	}
	var results []benchResult
	if nPrompt > 0 {
		prompt := make([]int32, nPrompt)
		for i := range prompt {
			prompt[i] = token()
		}
		rs, err := test(fmt.Sprintf("pp%d%s", nPrompt, at), nPrompt, nPrompt, 0, func(lora bool) error { return forward(kv, prompt, depth, lora) })
		if err != nil {
			return err
		}
		for _, r := range rs {
			r.GBPerSecond = float64(r.SizeBytes) / 1e9 * r.TokensPerSecond / float64(nPrompt)
			r.GFLOPPerSecond = 2 * float64(r.ActiveParams) * r.TokensPerSecond / 1e9
			results = append(results, r)
		}
	}
	if nGen > 0 {
		rs, err := test(fmt.Sprintf("tg%d%s", nGen, at), nGen, 0, nGen, func(lora bool) error {
			for pos := depth; pos < depth+nGen; pos++ {
				if err := forward(kv, []int32{token()}, pos, lora); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range rs {
			r.GBPerSecond = float64(r.ActiveBytes) / 1e9 * r.TokensPerSecond // every active weight once per token
			r.RooflineShare = r.GBPerSecond / copyGBs
			results = append(results, r)
		}
	}
	var profiles []testProfile
	if profile {
		if profiles, err = profilePasses(dev, nPrompt, nGen > 0, func(tokens []int32, pos int) error {
			return forward(kv, tokens, depth+pos, scales != nil)
		}, token); err != nil {
			return err
		}
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, " model\t size\t params\t adapter\t test\t t/s\t GB/s\t roofline")
	for _, r := range results {
		roof := fmt.Sprintf("%.1f%% of copy", 100*r.RooflineShare)
		if r.GFLOPPerSecond > 0 {
			roof = fmt.Sprintf("%.1f GFLOP/s", r.GFLOPPerSecond)
		}
		fmt.Fprintf(tw, " %s\t %.2f MiB\t %.2f M\t %s\t %s\t %.2f ± %.2f\t %.2f\t %s\n", r.Model, float64(r.SizeBytes)/(1<<20),
			float64(r.Params)/1e6, r.Adapter, r.Test, r.TokensPerSecond, r.Stddev, r.GBPerSecond, roof)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "device copy bandwidth: %.2f GB/s\n", copyGBs)
	if lb != nil {
		fmt.Fprintf(stdout, "\nagainst %s (a repetition of it after each of ours):\n", against)
		if err := writeAgainst(stdout, results); err != nil {
			return err
		}
	}
	for _, r := range results {
		if r.BaseTimeRatio > 0 {
			fmt.Fprintf(stdout, "%s: %.3f× the base's time per token (median of %d interleaved pairs)\n", r.Test, r.BaseTimeRatio, reps)
		}
	}
	for _, p := range profiles {
		how := "CPU-timed, one submit per kernel"
		if p.profile.GPUTimed {
			how = "GPU timestamps"
		}
		fmt.Fprintf(stdout, "\n%s, one pass by kernel family (%s):\n", p.test, how)
		if err := p.profile.Write(stdout); err != nil {
			return err
		}
	}
	return nil
}

// with fills a measured result's test name and the run's common fields.
func (b benchResult) with(r benchResult, test string) benchResult {
	r.Test, r.Adapter, r.Model, r.SizeBytes, r.Params, r.Reps, r.CopyGBPerSecond = test, b.Adapter, b.Model, b.SizeBytes, b.Params, b.Reps, b.CopyGBPerSecond
	r.ActiveBytes, r.ActiveParams = b.ActiveBytes, b.ActiveParams
	return r
}

// testProfile is one test's kernel profile.
type testProfile struct {
	test    string
	profile *gpu.Profile
}

// profilePasses times one prompt pass (nPrompt tokens) and one generation step by kernel
// family.
func profilePasses(dev *gpu.Device, nPrompt int, gen bool, forward func([]int32, int) error, token func() int32) ([]testProfile, error) {
	var out []testProfile
	run := func(test string, tokens []int32, pos int) error {
		dev.Profile = gpu.NewProfile()
		defer func() { dev.Profile = nil }()
		if err := forward(tokens, pos); err != nil {
			return err
		}
		out = append(out, testProfile{test, dev.Profile})
		return nil
	}
	if nPrompt > 0 {
		prompt := make([]int32, nPrompt)
		for i := range prompt {
			prompt[i] = token()
		}
		if err := run(fmt.Sprintf("pp%d", nPrompt), prompt, 0); err != nil {
			return nil, err
		}
	}
	if gen {
		if err := run("tg (one token)", []int32{token()}, 0); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// measure runs each of n variants of a test once to warm up (pipeline compilation) and then
// reps times, the variants' repetitions interleaved, returning each variant's mean and sample
// standard deviation of tokens/s; a variant after the first also gets its time per token
// relative to the first's (BaseTimeRatio), the median over repetitions of the ratio between
// adjacent runs. afterRep, when set, runs after each repetition (bench --against's
// llama-bench), outside the timing.
func measure(reps, tokens, n int, fn func(variant int) error, afterRep func() error) ([]benchResult, error) {
	for v := range n {
		if err := fn(v); err != nil {
			return nil, err
		}
	}
	rates := make([][]float64, n)
	for range reps {
		for v := range n {
			start := time.Now()
			if err := fn(v); err != nil {
				return nil, err
			}
			rates[v] = append(rates[v], float64(tokens)/time.Since(start).Seconds())
		}
		if afterRep != nil {
			if err := afterRep(); err != nil {
				return nil, err
			}
		}
	}
	out := make([]benchResult, n)
	for v, rs := range rates {
		var mean, sd float64
		for _, r := range rs {
			mean += r
		}
		mean /= float64(reps)
		if reps > 1 {
			for _, r := range rs {
				sd += (r - mean) * (r - mean)
			}
			sd = math.Sqrt(sd / float64(reps-1))
		}
		out[v] = benchResult{TokensPerSecond: mean, Stddev: sd}
		if v > 0 {
			ratios := make([]float64, reps)
			for i := range ratios {
				ratios[i] = rates[0][i] / rs[i]
			}
			slices.Sort(ratios)
			out[v].BaseTimeRatio = (ratios[(reps-1)/2] + ratios[reps/2]) / 2
		}
	}
	return out, nil
}
