package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
)

const genModelSynopsis = "wgpu-llama gen-model [--preset NAME] [--arch ARCH] [--rank] [--type TYPE] [--dim N --layers N --heads N --kv-heads N --ff N --vocab N --ctx N] [--experts N --experts-used N --expert-ff N] [--ssm-heads N --ssm-groups N --ssm-state N] [--seed S] --out FILE\n" +
	"       wgpu-llama gen-model --projector TYPE [--proj-dim N --image-size N --patch-size N --scale-factor N --longest-edge N --dim N --layers N --heads N --ff N] [--seed S] --out FILE"

// runGenModel implements `wgpu-llama gen-model`: a llama (or qwen2, qwen3, phi3, gemma, bert)
// GGUF of any shape and type with seeded random weights and a working vocabulary, for tests
// and benchmarks at real model sizes without downloading one; with --projector, a multimodal
// projector (mmproj) for such a model instead.
func runGenModel(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("gen-model", genModelSynopsis, stderr)
	var (
		preset, arch, typ, out, name                string
		dim, layers, heads, kvHeads, ff, vocab, ctx int
		experts, expertsUsed, expertFF              int
		ssmHeads, ssmGroups, ssmState               int
		seed                                        uint64
		ropeBase, normEps                           float64
		verbose, rank                               bool
		projector                                   string
		projDim, imageSize, patchSize, scale, edge  int
	)
	stringVar(fs, &preset, "tiny", "shape preset: "+strings.Join(synth.Presets(), ", ")+"; the flags below override its fields", "preset")
	stringVar(fs, &arch, "llama", "architecture: "+strings.Join(synth.Archs(), ", ")+" (default: the preset's, llama for the dense ones)", "arch")
	stringVar(fs, &typ, "F32", "tensor type or llama-quantize mix (F32, F16, BF16, Q8_0, Q4_K_M, ...)", "type")
	stringVar(fs, &out, "", "output GGUF file", "o", "out")
	stringVar(fs, &name, "", "general.name (default synth-PRESET)", "name")
	intVar(fs, &dim, 0, "embedding length", "dim")
	intVar(fs, &layers, 0, "number of layers", "layers")
	intVar(fs, &heads, 0, "attention heads", "heads")
	intVar(fs, &kvHeads, 0, "key/value heads", "kv-heads")
	intVar(fs, &ff, 0, "feed-forward length", "ff")
	intVar(fs, &vocab, 0, "vocabulary size", "vocab")
	intVar(fs, &ctx, 0, "context length", "ctx")
	intVar(fs, &experts, 0, "Mixtures of Experts (qwen2moe, qwen3moe, gpt-oss): experts per block (default 8)", "experts")
	intVar(fs, &expertsUsed, 0, "Mixtures of Experts: experts each token runs (default 2)", "experts-used")
	intVar(fs, &expertFF, 0, "Mixtures of Experts: an expert's feed-forward length (default --ff)", "expert-ff")
	intVar(fs, &ssmHeads, 0, "qwen35: the recurrent layers' value heads (default --heads)", "ssm-heads")
	intVar(fs, &ssmGroups, 0, "qwen35: the recurrent layers' key heads (default --kv-heads)", "ssm-groups")
	intVar(fs, &ssmState, 0, "qwen35: the recurrent layers' state and head size (default the attention's head size)", "ssm-state")
	fs.Uint64Var(&seed, "seed", 1, "random seed (the same seed gives the same file)")
	floatVar(fs, &ropeBase, 0, "rope.freq_base", "rope-base")
	floatVar(fs, &normEps, 0, "RMS norm epsilon", "norm-eps")
	fs.BoolVar(&rank, "rank", false, "bert: add a reranker's classification head (pooling rank), for --reranking")
	fs.BoolVar(&verbose, "v", false, "log every tensor")
	stringVar(fs, &projector, "", "write a multimodal projector (mmproj) of this type instead: "+strings.Join(synth.ProjectorTypes(), ", ")+"; --dim, --layers, --heads and --ff then shape its vision encoder", "projector")
	intVar(fs, &projDim, 0, "projector: the text model's embedding length (default 64, the tiny preset's)", "proj-dim")
	intVar(fs, &imageSize, 0, "projector: the encoder's square input side in pixels", "image-size")
	intVar(fs, &patchSize, 0, "projector: the patch side in pixels", "patch-size")
	intVar(fs, &scale, 0, "projector: idefics3's pixel shuffle factor", "scale-factor")
	intVar(fs, &edge, -1, "projector: idefics3's longest edge, to which images are scaled and cut into tiles (0: no tiles)", "longest-edge")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if out == "" {
		fs.Usage()
		return fmt.Errorf("gen-model: --out FILE is required")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if projector != "" {
		p := synth.TinyProjector(projector)
		for _, o := range []struct {
			flag string
			dst  *int
			v    int
		}{{"dim", &p.Dim, dim}, {"layers", &p.Layers, layers}, {"heads", &p.Heads, heads}, {"ff", &p.FF, ff}, {"proj-dim", &p.ProjDim, projDim},
			{"image-size", &p.ImageSize, imageSize}, {"patch-size", &p.PatchSize, patchSize}, {"scale-factor", &p.ScaleFactor, scale}, {"longest-edge", &p.LongestEdge, edge}} {
			if set[o.flag] {
				*o.dst = o.v
			}
		}
		p.Seed = seed
		if err := synth.WriteProjectorFile(out, p); err != nil {
			return fmt.Errorf("gen-model: %w", err)
		}
		newLogger(stderr, verbose).Info("done", "out", out, "projector", p.Type, "image_size", p.ImageSize, "patch_size", p.PatchSize, "dim", p.Dim, "layers", p.Layers, "proj_dim", p.ProjDim)
		fmt.Fprintln(stdout, out)
		return nil
	}
	cfg, err := synth.Preset(preset)
	if err != nil {
		return fmt.Errorf("gen-model: %w", err)
	}
	if cfg.Mix, err = quantize.ParseMix(typ); err != nil {
		return fmt.Errorf("gen-model: %w", err)
	}
	for _, o := range []struct {
		flag string
		dst  *int
		v    int
	}{{"dim", &cfg.Dim, dim}, {"layers", &cfg.Layers, layers}, {"heads", &cfg.Heads, heads},
		{"kv-heads", &cfg.KVHeads, kvHeads}, {"ff", &cfg.FF, ff}, {"vocab", &cfg.Vocab, vocab}, {"ctx", &cfg.Ctx, ctx},
		{"experts", &cfg.Experts, experts}, {"experts-used", &cfg.ExpertsUsed, expertsUsed}, {"expert-ff", &cfg.ExpertFF, expertFF},
		{"ssm-heads", &cfg.SSMHeads, ssmHeads}, {"ssm-groups", &cfg.SSMGroups, ssmGroups}, {"ssm-state", &cfg.SSMState, ssmState}} {
		if set[o.flag] {
			*o.dst = o.v
		}
	}
	if set["rope-base"] {
		cfg.RopeBase = float32(ropeBase)
	}
	if set["norm-eps"] {
		cfg.NormEps = float32(normEps)
	}
	if set["name"] {
		cfg.Name = name
	}
	cfg.Seed = seed
	if set["arch"] {
		cfg.Arch = arch
		if (arch == "qwen35" || arch == "qwen35moe" || arch == "gemma4") && !set["layers"] && cfg.Layers < 4 {
			cfg.Layers = 4 // every fourth block is attention (hybrids) or global (gemma4): at least one
		}
		if !synth.MoE(arch) && !set["experts"] && !set["experts-used"] && !set["expert-ff"] {
			cfg.Experts, cfg.ExpertsUsed, cfg.ExpertFF = 0, 0, 0 // a dense architecture over a MoE preset's shape
		}
		if arch != "qwen35" && arch != "qwen35moe" && !set["ssm-heads"] && !set["ssm-groups"] && !set["ssm-state"] {
			cfg.SSMHeads, cfg.SSMGroups, cfg.SSMState = 0, 0, 0 // another architecture over a hybrid preset's shape
		}
	}
	cfg.Rank = rank
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("gen-model: %w", err)
	}

	logger := newLogger(stderr, verbose)
	logger.Info("generating", "out", out, "arch", cfg.Arch, "type", cfg.Mix, "dim", cfg.Dim, "layers", cfg.Layers, "heads", cfg.Heads,
		"kv_heads", cfg.KVHeads, "ff", cfg.FF, "experts", cfg.Experts, "experts_used", cfg.ExpertsUsed, "expert_ff", cfg.ExpertFF,
		"vocab", cfg.Vocab, "ctx", cfg.Ctx, "seed", cfg.Seed)
	start := time.Now()
	last := start
	progress := func(p quantize.Progress) {
		if p.Plan.Fallback() {
			logger.Warn("fallback", "tensor", p.Plan.Name, "why", p.Plan.Note)
		}
		logger.Debug("tensor", "n", fmt.Sprintf("%d/%d", p.Index, p.Count), "name", p.Plan.Name,
			"shape", formatShape(p.Plan.Shape), "type", p.Plan.To)
		if now := time.Now(); now.Sub(last) >= 5*time.Second {
			last = now
			logger.Info("progress", "tensors", fmt.Sprintf("%d/%d", p.Index, p.Count), "elapsed", now.Sub(start).Round(time.Second))
		}
	}
	sum, err := synth.WriteFile(out, cfg, progress)
	if err != nil {
		return fmt.Errorf("gen-model: %w", err)
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	logger.Info("done", "out", out, "size", humanBytes(uint64(st.Size())), "params", sum.Elements,
		"bpw", fmt.Sprintf("%.2f", float64(sum.NewSize)*8/float64(max(sum.Elements, 1))), "took", time.Since(start).Round(time.Millisecond))
	fmt.Fprintln(stdout, out)
	return nil
}
