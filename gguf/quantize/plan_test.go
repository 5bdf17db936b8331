package quantize

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

func openShared(t *testing.T, parts ...string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(shareddata.Path(t, parts...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// typeCounts renders a plan's output types as "Q4_K 13, Q6_K 3, F32 5" (sorted by name), to
// compare with the tables in shared/models/quant/README.md.
func typeCounts(plans []TensorPlan) string {
	n := map[string]int{}
	for _, p := range plans {
		n[p.To.String()]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	return strings.Join(parts, ", ")
}

// TestPlanMatchesLlamaQuantize compares each plan with the tensor types (and order) of the
// file llama-quantize wrote for the same mix.
func TestPlanMatchesLlamaQuantize(t *testing.T) {
	cases := []struct {
		src, mix, want string
		special        map[string]string // tensors whose type the README names
	}{
		{"synth256", "F16", "F16 16, F32 5", nil},
		{"synth256", "BF16", "BF16 16, F32 5", nil},
		{"synth256", "Q8_0", "F32 5, Q8_0 16", nil},
		{"synth256", "Q6_K", "F32 5, Q6_K 16", nil},
		{"synth256", "Q5_K_M", "F32 5, Q5_K 13, Q6_K 3", map[string]string{"output.weight": "Q6_K", "blk.1.attn_v.weight": "Q6_K", "blk.1.ffn_down.weight": "Q6_K"}},
		{"synth256", "Q5_1", "F32 5, Q5_1 15, Q6_K 1", map[string]string{"output.weight": "Q6_K"}},
		{"synth256", "Q5_0", "F32 5, Q5_0 15, Q6_K 1", map[string]string{"output.weight": "Q6_K"}},
		{"synth256", "Q4_K_M", "F32 5, Q4_K 13, Q6_K 3", map[string]string{"output.weight": "Q6_K", "blk.1.attn_v.weight": "Q6_K", "blk.1.ffn_down.weight": "Q6_K"}},
		{"synth256", "Q4_1", "F32 5, Q4_1 15, Q6_K 1", map[string]string{"output.weight": "Q6_K"}},
		{"synth256", "Q4_0", "F32 5, Q4_0 15, Q6_K 1", map[string]string{"output.weight": "Q6_K"}},
		{"synth256", "Q3_K_M", "F32 5, Q3_K 9, Q4_K 4, Q5_K 2, Q6_K 1", map[string]string{
			"blk.0.attn_output.weight": "Q4_K", "blk.1.ffn_down.weight": "Q4_K", "blk.0.attn_v.weight": "Q5_K", "blk.1.attn_v.weight": "Q5_K"}},
		{"synth256", "Q3_K_S", "F32 5, Q3_K 15, Q6_K 1", nil},
		{"synth256", "Q2_K", "F32 5, Q2_K 9, Q3_K 6, Q6_K 1", map[string]string{
			"token_embd.weight": "Q2_K", "blk.0.attn_v.weight": "Q3_K", "blk.1.ffn_down.weight": "Q3_K", "blk.1.attn_output.weight": "Q3_K"}},
		{"stories260K", "Q8_0", "F16 5, F32 11, Q8_0 32", nil},
		{"stories260K", "Q4_0", "F16 5, F32 11, Q4_0 31, Q8_0 1", map[string]string{"output.weight": "Q8_0", "blk.3.ffn_down.weight": "F16"}},
		{"stories260K", "Q4_1", "F16 5, F32 11, Q4_1 31, Q8_0 1", nil},
		{"stories260K", "Q5_0", "F16 5, F32 11, Q5_0 31, Q8_0 1", nil},
		{"stories260K", "Q5_1", "F16 5, F32 11, Q5_1 31, Q8_0 1", nil},
		{"stories260K", "Q4_K_M", "F16 5, F32 11, Q5_0 29, Q8_0 3", map[string]string{
			"output.weight": "Q8_0", "blk.2.attn_v.weight": "Q8_0", "blk.4.attn_v.weight": "Q8_0", "blk.0.ffn_down.weight": "F16", "blk.0.attn_v.weight": "Q5_0"}},
		{"stories260K", "Q6_K", "F16 5, F32 11, Q8_0 32", nil},
	}
	for _, c := range cases {
		t.Run(c.src+"-"+c.mix, func(t *testing.T) {
			srcName := c.src + ".gguf"
			srcPath := []string{"models", srcName}
			if c.src == "synth256" {
				srcPath = []string{"models", "quant", "synth256-F32.gguf"}
			}
			src := openShared(t, srcPath...)
			ref := openShared(t, "models", "quant", c.src+"-"+c.mix+".gguf")
			mix, err := ParseMix(c.mix)
			if err != nil {
				t.Fatal(err)
			}
			plans, err := Plan(src, mix)
			if err != nil {
				t.Fatal(err)
			}
			if got := typeCounts(plans); got != c.want {
				t.Errorf("types %s, README says %s", got, c.want)
			}
			if len(plans) != len(ref.Tensors) {
				t.Fatalf("%d tensors, llama-quantize wrote %d", len(plans), len(ref.Tensors))
			}
			for i, p := range plans {
				r := ref.Tensors[i]
				if p.Name != r.Name || p.To != r.Type || !slices.Equal(p.Shape, r.Shape) {
					t.Errorf("tensor %d: %s %s %v, llama-quantize wrote %s %s %v", i, p.Name, p.To, p.Shape, r.Name, r.Type, r.Shape)
				}
				if w, ok := c.special[p.Name]; ok && p.To.String() != w {
					t.Errorf("%s: %s, README says %s", p.Name, p.To, w)
				}
			}
			if ft, _ := ref.Uint("general.file_type"); ft != uint64(mix.FileType()) {
				t.Errorf("file type %d, llama-quantize wrote %d", mix.FileType(), ft)
			}
		})
	}
}

// TestPlanFallbackNotes checks the reasons given for stories260K's Q4_K_M fallbacks: 36 of 48
// tensors, as llama-quantize reported.
func TestPlanFallbackNotes(t *testing.T) {
	plans, err := Plan(openShared(t, "models", "stories260K.gguf"), MixQ4_K_M)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range plans {
		if !p.Fallback() {
			continue
		}
		n++
		switch {
		case strings.Contains(p.Name, "ffn_down"):
			if p.Wanted != gguf.TypeQ4_K && p.Wanted != gguf.TypeQ6_K || !strings.Contains(p.Note, "must use F16 due to unusual shape") {
				t.Errorf("%s: wanted %s, note %q", p.Name, p.Wanted, p.Note)
			}
		case p.To == gguf.TypeQ8_0:
			if p.Wanted != gguf.TypeQ6_K || !strings.Contains(p.Note, "ncols 64 not divisible by 256") {
				t.Errorf("%s: wanted %s, note %q", p.Name, p.Wanted, p.Note)
			}
		case p.To != gguf.TypeQ5_0 || p.Wanted != gguf.TypeQ4_K:
			t.Errorf("%s: %s -> %s", p.Name, p.Wanted, p.To)
		}
	}
	// output.weight asks for Q6_K only if 256 divides its rows; otherwise it is Q8_0 by rule,
	// not by fallback, so 36 = 48 - 11 norms - output.
	if n != 36 {
		t.Errorf("%d fallbacks, llama-quantize reported 36", n)
	}
}

func TestMixRules(t *testing.T) {
	// A 32-layer GQA-4 model (Llama-3-8B's shape): the _M mixes give more bits to attn_v and
	// ffn_down in layers 0-3, 28-31 and every third layer from 6.
	var ts []Tensor
	for i := range 32 {
		ts = append(ts,
			Tensor{Name: fmt.Sprintf("blk.%d.attn_v.weight", i), Shape: []uint64{4096, 1024}},
			Tensor{Name: fmt.Sprintf("blk.%d.ffn_down.weight", i), Shape: []uint64{14336, 4096}})
	}
	ts = append(ts, Tensor{Name: "token_embd.weight", Shape: []uint64{4096, 128256}})
	m := Model{Arch: "llama", Layers: 32, Heads: 32, KVHeads: 8}
	more := []int{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}
	cases := []struct {
		mix            Mix
		attnV, ffnDown func(i int) gguf.GGMLType
	}{
		{MixQ4_K_M,
			func(i int) gguf.GGMLType { return pick(slices.Contains(more, i), gguf.TypeQ6_K, gguf.TypeQ4_K) },
			func(i int) gguf.GGMLType { return pick(slices.Contains(more, i), gguf.TypeQ6_K, gguf.TypeQ4_K) }},
		{MixQ4_K_S,
			func(i int) gguf.GGMLType { return pick(i < 4, gguf.TypeQ5_K, gguf.TypeQ4_K) },
			func(i int) gguf.GGMLType { return pick(i < 4, gguf.TypeQ5_K, gguf.TypeQ4_K) }},
		{MixQ3_K_M,
			func(i int) gguf.GGMLType { return pick(i < 2, gguf.TypeQ5_K, gguf.TypeQ4_K) },
			func(i int) gguf.GGMLType { return pick(i < 2, gguf.TypeQ5_K, gguf.TypeQ4_K) }},
		{MixQ3_K_L,
			func(int) gguf.GGMLType { return gguf.TypeQ5_K },
			func(int) gguf.GGMLType { return gguf.TypeQ5_K }},
		{MixQ2_K, // GQA 4: attn_v gets Q4_K
			func(int) gguf.GGMLType { return gguf.TypeQ4_K },
			func(int) gguf.GGMLType { return gguf.TypeQ3_K }},
		{MixQ5_K_S,
			func(int) gguf.GGMLType { return gguf.TypeQ5_K },
			func(int) gguf.GGMLType { return gguf.TypeQ5_K }},
	}
	for _, c := range cases {
		plans, err := PlanTensors(m, ts, c.mix)
		if err != nil {
			t.Fatal(err)
		}
		for j, p := range plans[:64] {
			i := j / 2
			want := c.attnV(i)
			if j%2 == 1 {
				want = c.ffnDown(i)
			}
			if p.To != want {
				t.Errorf("%v: %s = %s, want %s", c.mix, p.Name, p.To, want)
			}
		}
		// No output.weight: the embeddings are tied and take the output's type.
		if got := plans[64].To; got != gguf.TypeQ6_K {
			t.Errorf("%v: tied token_embd = %s, want Q6_K", c.mix, got)
		}
	}
}

func pick(b bool, yes, no gguf.GGMLType) gguf.GGMLType {
	if b {
		return yes
	}
	return no
}

func TestParseMix(t *testing.T) {
	for _, m := range Mixes() {
		got, err := ParseMix(strings.ToLower(m.String()))
		if err != nil || got != m {
			t.Errorf("ParseMix(%q) = %v, %v", strings.ToLower(m.String()), got, err)
		}
	}
	if m, err := ParseMix("Q4_K"); err != nil || m != MixQ4_K_M {
		t.Errorf("ParseMix(Q4_K) = %v, %v; llama-quantize reads it as Q4_K_M", m, err)
	}
	if m, err := ParseMix("15"); err != nil || m != MixQ4_K_M {
		t.Errorf("ParseMix(15) = %v, %v", m, err)
	}
	for _, bad := range []string{"Q4_K_X", "", "4", "Q8_1"} {
		if _, err := ParseMix(bad); err == nil || !strings.Contains(err.Error(), "unknown quantization type") {
			t.Errorf("ParseMix(%q) = %v", bad, err)
		}
	}
	for name, m := range map[string]Mix{"iq4_nl": MixIQ4_NL, "IQ4_XS": MixIQ4_XS, "MXFP4_MOE": MixMXFP4_MOE,
		"25": MixIQ4_NL, "30": MixIQ4_XS, "38": MixMXFP4_MOE} {
		if got, err := ParseMix(name); err != nil || got != m {
			t.Errorf("ParseMix(%q) = %v, %v, want %v", name, got, err, m)
		}
	}
	// llama-quantize's other types are refused by name (or number), saying why and what works.
	for _, bad := range []string{"IQ2_XXS", "iq2_xs", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M", "IQ3_XXS", "IQ3_S", "IQ3_M",
		"IQ3_XS", "19", "Q2_K_S", "TQ1_0", "COPY"} {
		_, err := ParseMix(bad)
		if err == nil || !strings.Contains(err.Error(), "is not supported") ||
			!strings.Contains(err.Error(), "supported: Q4_0, Q4_1, MXFP4_MOE,") || !strings.Contains(err.Error(), "IQ4_NL, IQ4_XS") {
			t.Errorf("ParseMix(%q) = %v", bad, err)
		}
		if strings.HasPrefix(strings.ToUpper(bad), "IQ") && !strings.Contains(err.Error(), "importance matrix") {
			t.Errorf("ParseMix(%q) = %v, want the reason", bad, err)
		}
	}
}

func TestFallbackTable(t *testing.T) {
	cases := []struct {
		cols     uint64
		want, to gguf.GGMLType
	}{
		{512, gguf.TypeQ4_K, gguf.TypeQ4_K},
		{96, gguf.TypeQ2_K, gguf.TypeQ4_0},
		{96, gguf.TypeQ3_K, gguf.TypeQ4_0},
		{96, gguf.TypeQ4_K, gguf.TypeQ5_0},
		{96, gguf.TypeQ5_K, gguf.TypeQ5_1},
		{96, gguf.TypeQ6_K, gguf.TypeQ8_0},
		{100, gguf.TypeQ6_K, gguf.TypeF16},
		{100, gguf.TypeQ8_0, gguf.TypeF16},
		// IQ4_XS falls back to IQ4_NL; the 32-block types, for which llama.cpp has no fallback
		// and aborts, to F16.
		{512, gguf.TypeIQ4_XS, gguf.TypeIQ4_XS},
		{96, gguf.TypeIQ4_XS, gguf.TypeIQ4_NL},
		{100, gguf.TypeIQ4_XS, gguf.TypeF16},
		{96, gguf.TypeIQ4_NL, gguf.TypeIQ4_NL},
		{100, gguf.TypeIQ4_NL, gguf.TypeF16},
		{100, gguf.TypeMXFP4, gguf.TypeF16},
	}
	for _, c := range cases {
		got, note := fallback(Tensor{Name: "x.weight", Shape: []uint64{c.cols, 8}}, c.want)
		if got != c.to || (got != c.want) != (note != "") {
			t.Errorf("fallback(%d cols, %s) = %s %q, want %s", c.cols, c.want, got, note, c.to)
		}
	}
}
