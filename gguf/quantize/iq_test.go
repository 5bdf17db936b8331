package quantize

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// llamaQuantize runs llama.cpp's llama-quantize (shared/llama.cpp) on in, writing TYPE mix into
// a temporary directory, and returns the file's bytes. It skips the test when the shared data
// or the tool is absent.
func llamaQuantize(t *testing.T, in, mix string) []byte {
	t.Helper()
	dir := shareddata.Dir()
	if dir == "" {
		t.Skipf("shared test data not configured: set %s to the shared/ directory", shareddata.EnvVar)
	}
	tool := filepath.Join(dir, "llama.cpp", "llama-quantize")
	if _, err := os.Stat(tool); err != nil {
		t.Skipf("llama-quantize not available: %v", err)
	}
	out := filepath.Join(t.TempDir(), "out.gguf")
	cmd := exec.Command(tool, in, out, mix)
	log, err := cmd.CombinedOutput()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			t.Fatalf("llama-quantize %s %s: %v\n%s", filepath.Base(in), mix, err, tail(log, 2000))
		}
		t.Skipf("llama-quantize does not run here: %v", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tail(b []byte, n int) []byte { return b[max(0, len(b)-n):] }

// TestIQFilesMatchLlamaQuantize quantizes the shared F32 models to IQ4_NL, IQ4_XS and
// MXFP4_MOE both here and with llama-quantize (run by the test, without an importance matrix)
// and compares the files byte for byte: metadata, tensor order and types, padding and data.
// The MoE models have 3-D expert tensors, quantized row by row across the experts.
func TestIQFilesMatchLlamaQuantize(t *testing.T) {
	cases := []struct{ src, mix, types string }{
		{"iq/dense256-F32.gguf", "IQ4_NL", "F32 5, IQ4_NL 15, Q6_K 1"},
		{"iq/dense256-F32.gguf", "IQ4_XS", "F32 5, IQ4_XS 15, Q6_K 1"},
		{"moe/qwen3moe-F32.gguf", "MXFP4_MOE", "F32 21, MXFP4 12, Q8_0 18"},
		{"moe/gptoss-F32.gguf", "MXFP4_MOE", "F32 49, MXFP4 12, Q8_0 18"},
		{"moe/llamamoe-F32.gguf", "MXFP4_MOE", "F32 13, MXFP4 12, Q8_0 18"},
		// Rows of 128 (and 64): IQ4_XS falls back to IQ4_NL, the K-quants of the rules to Q5_x,
		// and the expert tensors are 3-D.
		{"moe/qwen3moe-F32.gguf", "IQ4_XS", ""},
		{"moe/qwen3moe-F32.gguf", "IQ4_NL", ""},
		{"moe/llamamoe-F32.gguf", "IQ4_XS", ""},
		{"moe/gptoss-F32.gguf", "IQ4_NL", ""},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(filepath.Base(c.src), "-F32.gguf")+"-"+c.mix, func(t *testing.T) {
			inPath := shareddata.Path(t, append([]string{"models"}, strings.Split(c.src, "/")...)...)
			mix, err := ParseMix(c.mix)
			if err != nil {
				t.Fatal(err)
			}
			src, err := gguf.Open(inPath)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			var buf bytes.Buffer
			sum, err := File(src, &buf, mix, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := typeCounts(sum.Plans); c.types != "" && got != c.types {
				t.Errorf("types %s, want %s", got, c.types)
			}
			want := llamaQuantize(t, inPath, c.mix)
			if !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("output differs from llama-quantize's: %s", firstDifference(t, buf.Bytes(), want))
			}
			out, err := gguf.Parse(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if ft, _ := out.Uint("general.file_type"); ft != uint64(mix.FileType()) {
				t.Errorf("general.file_type = %d, want %d", ft, mix.FileType())
			}
		})
	}
}

// TestIQPlanMatchesReferences compares the plans with the types of the shared files
// llama-quantize made (the dense256 IQ4 files with an importance matrix, which changes no type
// of a 2-layer model in these mixes), and the MXFP4_MOE files byte for byte.
func TestIQPlanMatchesReferences(t *testing.T) {
	for _, c := range []struct{ src, ref string }{
		{"iq/dense256-F32.gguf", "iq/dense256-IQ4_NL.gguf"},
		{"iq/dense256-F32.gguf", "iq/dense256-IQ4_XS.gguf"},
		{"moe/qwen3moe-F32.gguf", "moe/qwen3moe-MXFP4_MOE.gguf"},
		{"moe/gptoss-F32.gguf", "moe/gptoss-MXFP4_MOE.gguf"},
		{"moe/llamamoe-F32.gguf", "moe/llamamoe-MXFP4_MOE.gguf"},
	} {
		t.Run(filepath.Base(c.ref), func(t *testing.T) {
			src := openShared(t, append([]string{"models"}, strings.Split(c.src, "/")...)...)
			ref := openShared(t, append([]string{"models"}, strings.Split(c.ref, "/")...)...)
			mix, err := ParseMix(strings.TrimSuffix(c.ref[strings.LastIndex(c.ref, "-")+1:], ".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			plans, err := Plan(src, mix)
			if err != nil {
				t.Fatal(err)
			}
			if len(plans) != len(ref.Tensors) {
				t.Fatalf("%d tensors, llama-quantize wrote %d", len(plans), len(ref.Tensors))
			}
			for i, p := range plans {
				r := ref.Tensors[i]
				if p.Name != r.Name || p.To != r.Type || !slices.Equal(p.Shape, r.Shape) {
					t.Errorf("tensor %d: %s %s %v, llama-quantize wrote %s %s %v", i, p.Name, p.To, p.Shape, r.Name, r.Type, r.Shape)
				}
			}
			if ft, _ := ref.Uint("general.file_type"); ft != uint64(mix.FileType()) {
				t.Errorf("file type %d, llama-quantize wrote %d", mix.FileType(), ft)
			}
			if mix != MixMXFP4_MOE {
				return // the IQ4 files were made with an importance matrix
			}
			// The MXFP4_MOE files were made without one: the whole file must match.
			var buf bytes.Buffer
			if _, err := File(src, &buf, mix, nil); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(shareddata.Path(t, append([]string{"models"}, strings.Split(c.ref, "/")...)...))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("output differs from %s: %s", c.ref, firstDifference(t, buf.Bytes(), want))
			}
		})
	}
}

// TestIQMixRules checks the IQ4 and MXFP4_MOE rules on shapes the shared models lack: GQA 4
// and 8 experts (more bits in attention), ffn_down in the first eighth of the layers, rows that
// 256 or 32 does not divide, and 3-D tensors that are not experts.
func TestIQMixRules(t *testing.T) {
	var ts []Tensor
	for i := range 16 {
		ts = append(ts,
			Tensor{Name: fmt.Sprintf("blk.%d.attn_v.weight", i), Shape: []uint64{4096, 1024}},
			Tensor{Name: fmt.Sprintf("blk.%d.attn_k.weight", i), Shape: []uint64{4096, 1024}},
			Tensor{Name: fmt.Sprintf("blk.%d.attn_output.weight", i), Shape: []uint64{4096, 4096}},
			Tensor{Name: fmt.Sprintf("blk.%d.ffn_down.weight", i), Shape: []uint64{14336, 4096}},
			Tensor{Name: fmt.Sprintf("blk.%d.ffn_up.weight", i), Shape: []uint64{4096, 14336}})
	}
	ts = append(ts,
		Tensor{Name: "token_embd.weight", Shape: []uint64{4096, 32000}},
		Tensor{Name: "output.weight", Shape: []uint64{4096, 32000}},
		Tensor{Name: "blk.0.odd.weight", Shape: []uint64{4160, 8}}, // 32 divides 4160, 256 does not
		Tensor{Name: "blk.0.odder.weight", Shape: []uint64{100, 8}})
	type want struct{ attnV, attnK, attnOut, down0, down2, up, embd, output, odd, odder gguf.GGMLType }
	cases := []struct {
		name string
		mix  Mix
		m    Model
		want want
	}{
		{"IQ4_NL GQA 4", MixIQ4_NL, Model{Arch: "llama", Layers: 16, Heads: 32, KVHeads: 8},
			want{gguf.TypeQ5_K, gguf.TypeIQ4_NL, gguf.TypeIQ4_NL, gguf.TypeQ5_K, gguf.TypeIQ4_NL, gguf.TypeIQ4_NL, gguf.TypeIQ4_NL, gguf.TypeQ6_K, gguf.TypeIQ4_NL, gguf.TypeF16}},
		{"IQ4_XS GQA 2", MixIQ4_XS, Model{Arch: "llama", Layers: 16, Heads: 32, KVHeads: 16},
			want{gguf.TypeIQ4_XS, gguf.TypeIQ4_XS, gguf.TypeIQ4_XS, gguf.TypeQ5_K, gguf.TypeIQ4_XS, gguf.TypeIQ4_XS, gguf.TypeIQ4_XS, gguf.TypeQ6_K, gguf.TypeIQ4_NL, gguf.TypeF16}},
		{"IQ4_XS 8 experts", MixIQ4_XS, Model{Arch: "llama", Layers: 16, Heads: 32, KVHeads: 8, Experts: 8},
			want{gguf.TypeQ8_0, gguf.TypeQ8_0, gguf.TypeQ5_K, gguf.TypeQ5_K, gguf.TypeIQ4_XS, gguf.TypeIQ4_XS, gguf.TypeIQ4_XS, gguf.TypeQ6_K, gguf.TypeIQ4_NL, gguf.TypeF16}},
		{"MXFP4_MOE dense", MixMXFP4_MOE, Model{Arch: "llama", Layers: 16, Heads: 32, KVHeads: 8, Experts: 8},
			want{gguf.TypeQ8_0, gguf.TypeQ8_0, gguf.TypeQ8_0, gguf.TypeQ8_0, gguf.TypeQ8_0, gguf.TypeQ8_0, gguf.TypeQ8_0, gguf.TypeQ8_0, gguf.TypeQ8_0, gguf.TypeF16}},
	}
	for _, c := range cases {
		plans, err := PlanTensors(c.m, ts, c.mix)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]gguf.GGMLType{}
		for _, p := range plans {
			got[p.Name] = p.To
		}
		for name, w := range map[string]gguf.GGMLType{
			"blk.5.attn_v.weight": c.want.attnV, "blk.5.attn_k.weight": c.want.attnK,
			"blk.5.attn_output.weight": c.want.attnOut, "blk.1.ffn_down.weight": c.want.down0,
			"blk.2.ffn_down.weight": c.want.down2, "blk.0.ffn_up.weight": c.want.up,
			"token_embd.weight": c.want.embd, "output.weight": c.want.output,
			"blk.0.odd.weight": c.want.odd, "blk.0.odder.weight": c.want.odder,
		} {
			if got[name] != w {
				t.Errorf("%s: %s = %s, want %s", c.name, name, got[name], w)
			}
		}
	}

	// MXFP4_MOE: 3-D tensors (one matrix per expert) get MXFP4, the rest Q8_0, tied embeddings
	// too; bailingmoe3's 3-D tensors other than ffn experts stay Q8_0.
	moe := []struct {
		t        Tensor
		want     gguf.GGMLType
		bailing3 gguf.GGMLType // under bailingmoe3, where it differs
	}{
		{Tensor{Name: "token_embd.weight", Shape: []uint64{128, 512}}, gguf.TypeQ8_0, 0},
		{Tensor{Name: "blk.0.ffn_gate_exps.weight", Shape: []uint64{128, 64, 8}}, gguf.TypeMXFP4, 0},
		{Tensor{Name: "blk.0.ffn_down_exps.weight", Shape: []uint64{64, 128, 8}}, gguf.TypeMXFP4, 0},
		{Tensor{Name: "blk.0.ffn_gate_inp.weight", Shape: []uint64{128, 8}}, gguf.TypeF32, 0}, // the router: kept
		{Tensor{Name: "blk.0.attn_k_b.weight", Shape: []uint64{128, 64, 4}}, gguf.TypeMXFP4, gguf.TypeQ8_0},
		{Tensor{Name: "blk.0.ffn_up_exps.weight", Shape: []uint64{128, 64, 1}}, gguf.TypeQ8_0, 0}, // one expert: 2-D
		{Tensor{Name: "blk.1.ffn_up_exps.weight", Shape: []uint64{100, 64, 8}}, gguf.TypeF16, 0},  // no MXFP4 fallback
		{Tensor{Name: "blk.1.ffn_down.weight", Shape: []uint64{100, 64}}, gguf.TypeF16, 0},        // nor a Q8_0 one
	}
	var ts3 []Tensor
	for _, c := range moe {
		c.t.Type = gguf.TypeF32
		ts3 = append(ts3, c.t)
	}
	for _, arch := range []string{"qwen3moe", "bailingmoe3"} {
		plans, err := PlanTensors(Model{Arch: arch, Layers: 2, Heads: 4, KVHeads: 2, Experts: 8}, ts3, MixMXFP4_MOE)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range moe {
			w := c.want
			if arch == "bailingmoe3" && c.bailing3 != 0 {
				w = c.bailing3
			}
			if plans[i].To != w {
				t.Errorf("%s: %s = %s, want %s", arch, plans[i].Name, plans[i].To, w)
			}
		}
	}
}
