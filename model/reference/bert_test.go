package reference

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
)

// bertWith is the tiny synthetic bert (F32, BERT's LayerNorm epsilon 1e-12) changed by edit.
func bertWith(t *testing.T, edit func(*synth.Config)) *gguf.File {
	t.Helper()
	return synthWith(t, "bert", func(c *synth.Config) {
		c.NormEps = 1e-12
		edit(c)
	})
}

func embed(t *testing.T, f *gguf.File, tokens []int32) []float32 {
	t.Helper()
	e, err := Embed(f, tokens)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestBertEmbed runs the synthetic bert in F32 and Q8_0: an embedding of n_embd finite values
// of unit length, the two types close, and different texts giving different embeddings.
func TestBertEmbed(t *testing.T) {
	f32 := embed(t, bertWith(t, func(*synth.Config) {}), long)
	q8 := embed(t, bertWith(t, func(c *synth.Config) { c.Mix = quantize.MixQ8_0 }), long)
	for name, e := range map[string][]float32{"F32": f32, "Q8_0": q8} {
		if len(e) != 64 {
			t.Fatalf("%s: %d values, want 64", name, len(e))
		}
		var ss float64
		for _, v := range e {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: %v", name, e)
			}
			ss += float64(v) * float64(v)
		}
		if math.Abs(math.Sqrt(ss)-1) > 1e-5 {
			t.Errorf("%s: norm %g, want 1", name, math.Sqrt(ss))
		}
		if hi := max(slices.Max(e), -slices.Min(e)); hi > 0.9 {
			t.Errorf("%s: one value of %g dominates", name, hi)
		}
	}
	e := cpuref.RelErr(q8, f32)
	t.Logf("Q8_0 vs F32: relative error %.3g", e)
	if e > 0.02 {
		t.Errorf("Q8_0 vs F32: relative error %.4f", e)
	}
	if d := cpuref.RelErr(embed(t, bertWith(t, func(*synth.Config) {}), prompt), f32); d < 0.01 {
		t.Errorf("two texts: relative difference %.3g", d)
	}
}

// TestBertPooling checks the pooling types against the final hidden states (mean of all rows,
// first row, last row, each L2-normalised), that they differ, and that a file without
// pooling_type pools by the mean.
func TestBertPooling(t *testing.T) {
	byType := map[int][]float32{}
	for _, p := range []int{PoolMean, PoolCLS, PoolLast} {
		byType[p] = embed(t, bertWith(t, func(c *synth.Config) { c.Pooling = p }), long)
	}
	f := bertWith(t, func(*synth.Config) {})
	hp, err := readBert(f)
	if err != nil {
		t.Fatal(err)
	}
	hidden, err := encode(f, hp, long)
	if err != nil {
		t.Fatal(err)
	}
	n, d := len(long), hp.nEmbd
	unit := func(x []float64) []float32 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		out := make([]float32, len(x))
		for i, v := range x {
			out[i] = float32(v / math.Sqrt(ss))
		}
		return out
	}
	mean, first, last := make([]float64, d), make([]float64, d), make([]float64, d)
	for i := range d {
		for r := range n {
			mean[i] += float64(hidden[r*d+i]) / float64(n)
		}
		first[i], last[i] = float64(hidden[i]), float64(hidden[(n-1)*d+i])
	}
	for p, want := range map[int][]float32{PoolMean: unit(mean), PoolCLS: unit(first), PoolLast: unit(last)} {
		if e := cpuref.RelErr(byType[p], want); e > 1e-6 {
			t.Errorf("pooling %d: relative error %.3g from the hidden states", p, e)
		}
	}
	for _, pair := range [][2]int{{PoolMean, PoolCLS}, {PoolMean, PoolLast}, {PoolCLS, PoolLast}} {
		if e := cpuref.RelErr(byType[pair[0]], byType[pair[1]]); e < 0.01 {
			t.Errorf("poolings %d and %d: relative difference %.3g", pair[0], pair[1], e)
		}
	}
	if got := embed(t, rewrite(t, f, []string{"bert.pooling_type"}), long); !slices.Equal(got, byType[PoolMean]) {
		t.Error("without pooling_type: not the mean pooling")
	}
}

// TestBertNonCausal checks that every token attends to every other: the first token's output
// (CLS pooling) depends on the last token, which under a causal mask it could not see; with
// attention.causal set true it does not. And, with the position embeddings zeroed, mean pooling
// is blind to the tokens' order, as only a non-causal attention makes it.
func TestBertNonCausal(t *testing.T) {
	f := bertWith(t, func(c *synth.Config) { c.Pooling = PoolCLS })
	changed := slices.Clone(long)
	changed[len(changed)-1] = 400
	e := cpuref.RelErr(embed(t, f, changed), embed(t, f, long))
	t.Logf("CLS pooling, last token changed: relative difference %.3g", e)
	if e < 1e-4 {
		t.Errorf("CLS pooling, last token changed: relative difference %.3g", e)
	}
	causal := rewrite(t, f, []string{"bert.attention.causal"}, gguf.KV{Key: "bert.attention.causal", Type: gguf.TypeBool, Value: true})
	if !slices.Equal(embed(t, causal, changed), embed(t, causal, long)) {
		t.Error("causal: the first token sees the last")
	}

	noPos := edited(t, bertWith(t, func(*synth.Config) {}), "position_embd.weight", func(v []float32) { clear(v) })
	reversed := slices.Clone(long)
	slices.Reverse(reversed)
	if e := cpuref.RelErr(embed(t, noPos, reversed), embed(t, noPos, long)); e > 1e-5 {
		t.Errorf("no positions, tokens reversed: relative difference %.3g", e)
	}
	if e := cpuref.RelErr(embed(t, rewrite(t, noPos, []string{"bert.attention.causal"}, gguf.KV{Key: "bert.attention.causal", Type: gguf.TypeBool, Value: true}), reversed),
		embed(t, rewrite(t, noPos, []string{"bert.attention.causal"}, gguf.KV{Key: "bert.attention.causal", Type: gguf.TypeBool, Value: true}), long)); e < 1e-3 {
		t.Errorf("no positions, causal, tokens reversed: relative difference %.3g", e)
	}
	with := bertWith(t, func(*synth.Config) {})
	if e := cpuref.RelErr(embed(t, with, reversed), embed(t, with, long)); e < 1e-3 {
		t.Errorf("positions, tokens reversed: relative difference %.3g", e)
	}
}

// TestBertEmbeddings checks the input embeddings: the sum of token, type-0 and position rows
// goes through a LayerNorm (scaling all three by 4 changes nothing), type 1 is never used, and
// type 0's row is added to every token (folding it into token_embd and dropping token_types
// changes nothing).
func TestBertEmbeddings(t *testing.T) {
	f := bertWith(t, func(*synth.Config) {})
	want := embed(t, f, long)
	all := scaled(t, scaled(t, scaled(t, f, "token_embd.weight", 4), "position_embd.weight", 4), "token_types.weight", 4)
	if e := cpuref.RelErr(embed(t, all, long), want); e > 1e-5 {
		t.Errorf("embeddings x4: relative error %.3g", e)
	}
	if e := cpuref.RelErr(embed(t, scaled(t, f, "position_embd.weight", 4), long), want); e < 1e-3 {
		t.Errorf("positions alone x4: relative difference %.3g", e)
	}
	row := func(r int) func([]float32) {
		return func(v []float32) {
			for i := range 64 {
				v[r*64+i] += float32(i%3) - 1 // not a constant, which the LayerNorm would remove
			}
		}
	}
	if got := embed(t, edited(t, f, "token_types.weight", row(1)), long); !slices.Equal(got, want) {
		t.Error("token type 1's row changes the embedding")
	}
	if e := cpuref.RelErr(embed(t, edited(t, f, "token_types.weight", row(0)), long), want); e < 1e-3 {
		t.Errorf("token type 0's row changed: relative difference %.3g", e)
	}
	types := values(t, f, "token_types.weight")
	folded := edited(t, f, "token_embd.weight", func(v []float32) {
		for r := range len(v) / 64 {
			for i := range 64 {
				v[r*64+i] += types[i]
			}
		}
	})
	if e := cpuref.RelErr(embed(t, dropTensor(t, folded, "token_types.weight"), long), want); e > 1e-6 {
		t.Errorf("type 0 folded into token_embd, token_types dropped: relative error %.3g", e)
	}
}

func TestBertErrors(t *testing.T) {
	f := bertWith(t, func(*synth.Config) {})
	if _, err := Forward(f, prompt); err == nil || !strings.Contains(err.Error(), "use Embed") {
		t.Errorf("Forward(bert): %v, want an error pointing to Embed", err)
	}
	if _, err := Embed(synthFile(t, "llama", quantize.MixF32), prompt); err == nil || !strings.Contains(err.Error(), "use Forward") {
		t.Errorf("Embed(llama): %v, want an error pointing to Forward", err)
	}
	for _, c := range []struct {
		drop []string
		add  []gguf.KV
		want string
	}{
		{[]string{"general.architecture"}, []gguf.KV{{Key: "general.architecture", Type: gguf.TypeString, Value: "nomic-bert"}}, `"nomic-bert" not supported by Embed (supported: bert)`},
		{[]string{"bert.attention.layer_norm_epsilon"}, nil, "layer_norm_epsilon missing"},
		{[]string{"bert.attention.causal"}, nil, "attention.causal missing"},
		{[]string{"bert.context_length"}, nil, "context_length missing"},
		{[]string{"bert.pooling_type"}, []gguf.KV{{Key: "bert.pooling_type", Type: gguf.TypeUint32, Value: uint32(0)}}, "pooling_type 0 not supported"},
		{[]string{"bert.pooling_type"}, []gguf.KV{{Key: "bert.pooling_type", Type: gguf.TypeUint32, Value: uint32(4)}}, "pooling_type 4 (rank) scores a query and document: use Rank"},
		{[]string{"bert.pooling_type"}, []gguf.KV{{Key: "bert.pooling_type", Type: gguf.TypeUint32, Value: uint32(5)}}, "pooling_type 5 not supported"},
	} {
		if _, err := Embed(rewrite(t, f, c.drop, c.add...), prompt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: %v, want %q", c.drop, c.add, err, c.want)
		}
	}
	for _, c := range []struct {
		tokens []int32
		want   string
	}{{nil, "no tokens"}, {[]int32{1, 512}, "outside the vocabulary"}, {make([]int32, 513), "exceed the 512 learned positions"}} {
		if _, err := Embed(f, c.tokens); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d tokens: %v, want %q", len(c.tokens), err, c.want)
		}
	}
	if _, err := Embed(dropTensor(t, f, "blk.1.ffn_up.bias"), prompt); err == nil || !strings.Contains(err.Error(), "blk.1.ffn_up.bias missing") {
		t.Errorf("without blk.1.ffn_up.bias: %v", err)
	}
}

// TestBertRank checks the classification head: one score per prompt, different prompts
// scoring differently; without cls.output the head's tanh layer (n_embd values in (-1, 1)),
// which cls.output then maps to the score; a file without a head refused.
func TestBertRank(t *testing.T) {
	f := bertWith(t, func(c *synth.Config) { c.Rank = true })
	score, err := Rank(f, long)
	if err != nil {
		t.Fatal(err)
	}
	if len(score) != 1 || math.IsNaN(float64(score[0])) {
		t.Fatalf("score %v, want one value", score)
	}
	if other, err := Rank(f, prompt); err != nil || math.Abs(float64(other[0]-score[0])) < 1e-3 {
		t.Errorf("another prompt scores %v (%v), the first %v", other, err, score)
	}
	tanh, err := Rank(dropTensor(t, dropTensor(t, f, "cls.output.weight"), "cls.output.bias"), long)
	if err != nil {
		t.Fatal(err)
	}
	if len(tanh) != 64 || slices.Max(tanh) >= 1 || slices.Min(tanh) <= -1 {
		t.Fatalf("without cls.output: %d values from %g to %g, want 64 in (-1, 1)", len(tanh), slices.Min(tanh), slices.Max(tanh))
	}
	w, b := values(t, f, "cls.output.weight"), values(t, f, "cls.output.bias")
	sum := float64(b[0])
	for i, h := range tanh {
		sum += float64(w[i]) * float64(h)
	}
	if math.Abs(sum-float64(score[0])) > 1e-5 {
		t.Errorf("cls.output over the tanh layer gives %g, Rank %g", sum, score[0])
	}
	if _, err := Embed(f, long); err == nil || !strings.Contains(err.Error(), "use Rank") {
		t.Errorf("Embed(reranker): %v, want an error pointing to Rank", err)
	}
	if _, err := Rank(bertWith(t, func(*synth.Config) {}), long); err == nil || !strings.Contains(err.Error(), "not a reranker") {
		t.Errorf("Rank(bert without a head): %v", err)
	}
}

// values returns an F32 tensor's values.
func values(t *testing.T, f *gguf.File, name string) []float32 {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("%s missing", name)
	}
	vals := make([]float32, ti.NumElements())
	if err := gguf.Dequantize(ti.Type, f.TensorData(ti), vals); err != nil {
		t.Fatal(err)
	}
	return vals
}

// edited copies an F32 file with the named tensor's values changed by edit.
func edited(t *testing.T, f *gguf.File, name string, edit func([]float32)) *gguf.File {
	t.Helper()
	return retensor(t, f, func(ti gguf.TensorInfo, data []byte) []byte {
		if ti.Name != name {
			return data
		}
		vals := values(t, f, name)
		edit(vals)
		out, err := gguf.Quantize(ti.Type, vals)
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
}

// dropTensor copies f without the named tensor.
func dropTensor(t *testing.T, f *gguf.File, name string) *gguf.File {
	t.Helper()
	return retensor(t, f, func(ti gguf.TensorInfo, data []byte) []byte {
		if ti.Name == name {
			return nil
		}
		return data
	})
}

// retensor copies f with each tensor's data replaced by fn's answer, dropped when nil.
func retensor(t *testing.T, f *gguf.File, fn func(gguf.TensorInfo, []byte) []byte) *gguf.File {
	t.Helper()
	var ts []gguf.TensorData
	for _, ti := range f.Tensors {
		if data := fn(ti, f.TensorData(&ti)); data != nil {
			ts = append(ts, gguf.TensorData{Name: ti.Name, Shape: ti.Shape, Type: ti.Type, Data: data})
		}
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, f.KV, ts); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return g
}
