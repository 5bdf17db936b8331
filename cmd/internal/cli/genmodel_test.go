package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

func genModel(t *testing.T, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "model.gguf")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), append([]string{"gen-model", "--out", out}, args...), &stdout, &stderr); err != nil {
		t.Fatalf("gen-model %q: %v\n%s", args, err, stderr.String())
	}
	if strings.TrimSpace(stdout.String()) != out {
		t.Errorf("stdout %q, want the file name", stdout.String())
	}
	return out
}

func TestGenModel(t *testing.T) {
	cases := []struct {
		args             []string
		dim, ff          uint64
		matrix, ffnDown  gguf.GGMLType
		output, firstAtV gguf.GGMLType
	}{
		{[]string{"--preset", "tiny", "--type", "Q8_0"}, 64, 172, gguf.TypeQ8_0, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ8_0},
		{[]string{"--preset", "tiny", "--type", "F16"}, 64, 172, gguf.TypeF16, gguf.TypeF16, gguf.TypeF16, gguf.TypeF16},
		{[]string{"--type", "Q4_K_M", "--dim", "256", "--ff", "512"}, 256, 512, gguf.TypeQ4_K, gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeQ4_K},
	}
	for _, c := range cases {
		f, err := gguf.Open(genModel(t, c.args...))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if d, _ := f.Uint("llama.embedding_length"); d != c.dim {
			t.Errorf("%q: dim %d", c.args, d)
		}
		if h, _ := f.Uint("llama.attention.head_count"); h != 4 {
			t.Errorf("%q: heads %d, want the preset's 4", c.args, h)
		}
		for name, want := range map[string]gguf.GGMLType{
			"blk.0.attn_q.weight": c.matrix, "blk.0.ffn_down.weight": c.ffnDown, "output.weight": c.output,
			"blk.0.attn_v.weight": c.firstAtV, "blk.1.attn_norm.weight": gguf.TypeF32,
		} {
			ti, ok := f.Tensor(name)
			if !ok || ti.Type != want {
				t.Errorf("%q: %s is %v, want %s", c.args, name, ti, want)
			}
		}
		if ti, _ := f.Tensor("blk.0.ffn_down.weight"); ti.Shape[0] != c.ff || ti.Shape[1] != c.dim {
			t.Errorf("%q: ffn_down shape %v", c.args, ti.Shape)
		}
		tk, err := tokenizer.FromGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range tk.Encode("Once upon a time", true, false) {
			if id == tk.UNK() {
				t.Errorf("%q: <unk> in Once upon a time", c.args)
			}
		}
	}
}

// TestGenModelArch checks --arch: the architecture's metadata prefix and tensors.
func TestGenModelArch(t *testing.T) {
	// qwen35 takes 4 layers where --layers is not given: its fourth block is the first attention.
	for arch, tensor := range map[string]string{"qwen2": "blk.0.attn_q.bias", "qwen3": "blk.1.attn_k_norm.weight", "phi3": "blk.0.attn_qkv.weight",
		"qwen35": "blk.3.attn_q_norm.weight"} {
		f, err := gguf.Open(genModel(t, "--arch", arch, "--type", "Q8_0"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if a := f.Architecture(); a != arch {
			t.Errorf("--arch %s: general.architecture %q", arch, a)
		}
		if d, _ := f.Uint(arch + ".embedding_length"); d != 64 {
			t.Errorf("--arch %s: %s.embedding_length %d", arch, arch, d)
		}
		if _, ok := f.Tensor(tensor); !ok {
			t.Errorf("--arch %s: no %s", arch, tensor)
		}
	}
}

// TestGenModelRank checks --rank: a bert reranker, with the classification head and rank
// pooling.
func TestGenModelRank(t *testing.T) {
	f, err := gguf.Open(genModel(t, "--arch", "bert", "--rank"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p, _ := f.Uint("bert.pooling_type"); p != 4 {
		t.Errorf("pooling_type %d, want 4 (rank)", p)
	}
	for _, name := range []string{"cls.weight", "cls.bias", "cls.output.weight", "cls.output.bias"} {
		if _, ok := f.Tensor(name); !ok {
			t.Errorf("no %s", name)
		}
	}
}

func TestGenModelSeed(t *testing.T) {
	read := func(args ...string) []byte {
		b, err := os.ReadFile(genModel(t, args...))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := read("--seed", "7"), read("--seed", "7"), read("--seed", "8")
	if !bytes.Equal(a, b) {
		t.Error("same seed, different files")
	}
	if bytes.Equal(a, c) {
		t.Error("different seeds, same file")
	}
}

func TestGenModelErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.gguf")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--preset", "70b", "--out", out}, `unknown preset "70b"`},
		{[]string{"--type", "Q9", "--out", out}, "unknown quantization type"},
		{[]string{"--preset", "tiny"}, "--out FILE is required"},
		{[]string{"--heads", "3", "--out", out}, "not a multiple of heads"},
		{[]string{"--arch", "gpt2", "--out", out}, `architecture "gpt2" not supported (supported: llama, qwen2, qwen2vl, qwen3, qwen2moe, qwen3moe, gpt-oss, qwen35, qwen35moe, phi3, gemma2, gemma3, gemma4, bert)`},
		{[]string{"--vocab", "100", "--out", out}, "below the minimum"},
		{[]string{"--rank", "--out", out}, "a rank head is bert's alone"},
		{[]string{"--type", "Q4_K", "--out", filepath.Join(out, "no", "dir")}, "no such file"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"gen-model"}, c.args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gen-model %q: %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

// --projector writes an mmproj the vision loader reads, shaped by the flags.
func TestGenModelProjector(t *testing.T) {
	for _, c := range []struct {
		args      []string
		typ       string
		tokens    int
		longest   int
		projector int
	}{
		{[]string{"--projector", "mlp"}, "mlp", 25, 0, 64},
		{[]string{"--projector", "mlp", "--image-size", "28", "--patch-size", "7", "--proj-dim", "96"}, "mlp", 16, 0, 96},
		{[]string{"--projector", "idefics3", "--longest-edge", "108"}, "idefics3", 9, 108, 64},
		{[]string{"--projector", "qwen2.5vl_merger", "--proj-dim", "32"}, "qwen2.5vl_merger", 16, 0, 32},
	} {
		f, err := gguf.Open(genModel(t, c.args...))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		h, err := vision.ReadHparams(f)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if h.Projector != c.typ || h.Tokens() != c.tokens || h.LongestEdge != c.longest || h.ProjDim != c.projector {
			t.Errorf("%q: %+v (%d tokens)", c.args, h, h.Tokens())
		}
	}
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"gen-model", "--projector", "qformer", "--out", filepath.Join(t.TempDir(), "x.gguf")}, &bytes.Buffer{}, &stderr); err == nil || !strings.Contains(err.Error(), `projector type "qformer" not supported`) {
		t.Errorf("an unknown projector: %v", err)
	}
}

// TestGenModelMoE writes Mixtures of Experts: a preset keeps its architecture, --arch and the
// expert flags override it, and the expert keys say what was asked.
func TestGenModelMoE(t *testing.T) {
	for _, c := range []struct {
		args           []string
		arch           string
		experts, used  uint64
		expertFF, dims uint64
	}{
		{[]string{"--preset", "moe-tiny"}, "qwen3moe", 8, 2, 96, 64},
		{[]string{"--preset", "moe-tiny", "--arch", "gpt-oss", "--experts", "6", "--experts-used", "3", "--expert-ff", "32"}, "gpt-oss", 6, 3, 32, 64},
	} {
		f, err := gguf.Open(genModel(t, c.args...))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		a := f.Architecture()
		n, _ := f.Uint(a + ".expert_count")
		used, _ := f.Uint(a + ".expert_used_count")
		ff, _ := f.Uint(a + ".expert_feed_forward_length")
		if a != c.arch || n != c.experts || used != c.used || ff != c.expertFF {
			t.Errorf("%q: %s with %d experts, %d used, of %d", c.args, a, n, used, ff)
		}
		if ti, ok := f.Tensor("blk.1.ffn_down_exps.weight"); !ok || len(ti.Shape) != 3 || ti.Shape[1] != c.dims || ti.Shape[2] != c.experts {
			t.Errorf("%q: ffn_down_exps %v", c.args, ti)
		}
	}
}
