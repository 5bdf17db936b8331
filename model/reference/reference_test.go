package reference

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// prompt is "Once upon a time" with BOS in stories260K's (and the synthetic models') vocabulary.
var prompt = []int32{1, 403, 407, 261, 378}

func logSoftmax(logits []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range logits {
		m = math.Max(m, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - m)
	}
	out := make([]float64, len(logits))
	for i, v := range logits {
		out[i] = float64(v) - m - math.Log(sum)
	}
	return out
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func open(t *testing.T, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestStories260K checks the first step of stories260K against llama.cpp's recorded top-10
// log-probabilities (llama.cpp ran with an F16 KV cache, hence the tolerance).
func TestStories260K(t *testing.T) {
	f := open(t, shareddata.Path(t, "models", "stories260K.gguf"))
	raw, err := os.ReadFile(shareddata.Path(t, "reference", "stories260K-probs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Probs []struct {
			Top []struct {
				ID      int     `json:"id"`
				LogProb float64 `json:"logprob"`
			} `json:"top_logprobs"`
		} `json:"completion_probabilities"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	logits, err := Forward(f, prompt)
	if err != nil {
		t.Fatal(err)
	}
	if len(logits) != 512 {
		t.Fatalf("%d logits", len(logits))
	}
	lp := logSoftmax(logits)
	if got := argmax(logits); got != 432 {
		t.Errorf("argmax %d, want 432 (\",\")", got)
	}
	if math.Abs(lp[432]-(-0.0318)) > 0.01 {
		t.Errorf("log-softmax of 432 = %.4f, llama.cpp -0.0318", lp[432])
	}
	for _, top := range ref.Probs[0].Top {
		if d := math.Abs(lp[top.ID] - top.LogProb); d > 0.02 {
			t.Errorf("token %d: log-prob %.4f, llama.cpp %.4f", top.ID, lp[top.ID], top.LogProb)
		}
	}
	t.Logf("log-softmax(432) = %.5f (llama.cpp %.5f)", lp[432], ref.Probs[0].Top[0].LogProb)
}

// TestStories260KQuantized runs the files llama.cpp quantized: same first token, log-probs
// near the F32 model's.
func TestStories260KQuantized(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(filepath.Dir(shareddata.Path(t, "models", "quant", "stories260K-Q8_0.gguf")), "stories260K-*.gguf"))
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			logits, err := Forward(open(t, p), prompt)
			if err != nil {
				t.Fatal(err)
			}
			lp := logSoftmax(logits)
			if got := argmax(logits); got != 432 || lp[432] < -0.2 {
				t.Errorf("argmax %d, log-softmax(432) %.4f", got, lp[432])
			}
		})
	}
}

// synthFile generates a tiny synthetic model of arch in mix.
func synthFile(t *testing.T, arch string, mix quantize.Mix) *gguf.File {
	t.Helper()
	return synthWith(t, arch, func(c *synth.Config) { c.Mix = mix })
}

// synthWith generates the tiny synthetic model of arch, in F32, changed by edit.
func synthWith(t *testing.T, arch string, edit func(*synth.Config)) *gguf.File {
	t.Helper()
	c, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.Arch = arch
	if slices.Contains(Hybrids, arch) {
		c.Layers = 4 // the hybrid's fourth block is its first attention
	}
	edit(&c)
	var buf bytes.Buffer
	if _, err := synth.Write(&buf, c, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSynthArchs runs every decoder's synthetic model in F32 and Q8_0: finite, varied
// logits, the two types close, and the answer depending on the earlier tokens.
func TestSynthArchs(t *testing.T) {
	for _, arch := range synth.Archs() {
		if slices.Contains(Encoders, arch) {
			continue // no logits: TestBertEmbed
		}
		if arch == "gemma4" {
			continue // no Go reference yet: checked against llama.cpp itself (model/genmodel_llamacpp_test.go)
		}
		t.Run(arch, func(t *testing.T) {
			f32, err := Forward(synthFile(t, arch, quantize.MixF32), prompt)
			if err != nil {
				t.Fatal(err)
			}
			q8, err := Forward(synthFile(t, arch, quantize.MixQ8_0), prompt)
			if err != nil {
				t.Fatal(err)
			}
			if len(f32) != 512 || len(q8) != 512 {
				t.Fatalf("%d and %d logits", len(f32), len(q8))
			}
			lo, hi := slices.Min(f32), slices.Max(f32)
			if math.IsNaN(float64(lo)) || math.IsInf(float64(lo), 0) || math.IsInf(float64(hi), 0) || hi-lo < 0.1 {
				t.Errorf("logits in [%g, %g]", lo, hi)
			}
			tol := 0.05
			if arch == "qwen35" {
				tol = 0.1 // drawn at its reference generator's wider scales, which amplify rounding (6.5%)
			}
			if e := cpuref.RelErr(q8, f32); e > tol {
				t.Errorf("Q8_0 vs F32: relative error %.4f", e)
			}
			other, err := Forward(synthFile(t, arch, quantize.MixF32), []int32{1, 300, 301, 302, 378})
			if err != nil {
				t.Fatal(err)
			}
			if e := cpuref.RelErr(other, f32); e < 1e-4 {
				t.Errorf("the last token's logits barely depend on the earlier ones (%.2g)", e)
			}
		})
	}
}

// TestNeoXAsLlama checks the qwen2 and phi3 paths against the llama one (itself checked against
// llama.cpp above): the same model rewritten as llama, with the fused matrices split and each
// head's rotated q/k rows reordered so that llama's adjacent pairs are NeoX's (i, i + n_rot/2)
// pairs, as convert_hf_to_gguf's permute does, must give the same logits.
func TestNeoXAsLlama(t *testing.T) {
	for _, arch := range []string{"qwen2", "phi3"} {
		t.Run(arch, func(t *testing.T) {
			f := synthFile(t, arch, quantize.MixF32)
			want, err := Forward(f, prompt)
			if err != nil {
				t.Fatal(err)
			}
			l := asLlama(t, f)
			if l.Architecture() != "llama" {
				t.Fatal("not rewritten")
			}
			if _, ok := l.Tensor("blk.0.attn_q.weight"); !ok {
				t.Fatal("attn_q missing from the rewrite")
			}
			got, err := Forward(l, prompt)
			if err != nil {
				t.Fatal(err)
			}
			if e := cpuref.RelErr(got, want); e > 1e-5 {
				t.Errorf("%s vs its llama rewrite: relative error %.3g", arch, e)
			}
		})
	}
}

// asLlama rewrites an F32 qwen2 or phi3 file as an equivalent llama one.
func asLlama(t *testing.T, f *gguf.File) *gguf.File {
	t.Helper()
	arch := f.Architecture()
	u := func(key string) int { v, _ := f.Uint(arch + "." + key); return int(v) }
	nEmbd, nHead, nKV, nFF, nRot := u("embedding_length"), u("attention.head_count"), u("attention.head_count_kv"), u("feed_forward_length"), u("rope.dimension_count")
	hd := nEmbd / nHead
	var kvs []gguf.KV
	for _, kv := range f.KV {
		kv.Key = strings.Replace(kv.Key, arch+".", "llama.", 1)
		if kv.Key == "general.architecture" {
			kv.Value = "llama"
		}
		kvs = append(kvs, kv)
	}
	// perm reorders each head's rows (of rowLen values) so that row 2i is NeoX row i and row
	// 2i+1 NeoX row i + nRot/2, for i < nRot/2.
	perm := func(vals []float32, heads, rowLen int) []float32 {
		out := slices.Clone(vals)
		for h := range heads {
			for i := range nRot / 2 {
				for _, m := range [][2]int{{2 * i, i}, {2*i + 1, i + nRot/2}} {
					dst, src := (h*hd+m[0])*rowLen, (h*hd+m[1])*rowLen
					copy(out[dst:dst+rowLen], vals[src:src+rowLen])
				}
			}
		}
		return out
	}
	var ts []gguf.TensorData
	add := func(name string, shape []uint64, vals []float32) {
		data, err := gguf.Quantize(gguf.TypeF32, vals)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, gguf.TensorData{Name: name, Shape: shape, Type: gguf.TypeF32, Data: data})
	}
	for _, ti := range f.Tensors {
		vals := make([]float32, ti.NumElements())
		if err := gguf.Dequantize(ti.Type, f.TensorData(&ti), vals); err != nil {
			t.Fatal(err)
		}
		blk, short, _ := strings.Cut(ti.Name, ".")
		if blk == "blk" {
			n, rest, _ := strings.Cut(short, ".")
			blk, short = "blk."+n+".", rest
		} else {
			blk, short = "", ti.Name
		}
		q, kv := nHead*hd*nEmbd, nKV*hd*nEmbd
		switch short {
		case "attn_qkv.weight":
			add(blk+"attn_q.weight", []uint64{uint64(nEmbd), uint64(nHead * hd)}, perm(vals[:q], nHead, nEmbd))
			add(blk+"attn_k.weight", []uint64{uint64(nEmbd), uint64(nKV * hd)}, perm(vals[q:q+kv], nKV, nEmbd))
			add(blk+"attn_v.weight", []uint64{uint64(nEmbd), uint64(nKV * hd)}, vals[q+kv:])
		case "attn_q.weight", "attn_k.weight", "attn_q.bias", "attn_k.bias":
			heads, rowLen := nHead, nEmbd
			if strings.HasPrefix(short, "attn_k") {
				heads = nKV
			}
			if strings.HasSuffix(short, "bias") {
				rowLen = 1
			}
			add(ti.Name, ti.Shape, perm(vals, heads, rowLen))
		case "ffn_up.weight":
			if _, separate := f.Tensor(blk + "ffn_gate.weight"); separate {
				add(ti.Name, ti.Shape, vals)
				break
			}
			add(blk+"ffn_gate.weight", []uint64{uint64(nEmbd), uint64(nFF)}, vals[:nFF*nEmbd])
			add(blk+"ffn_up.weight", []uint64{uint64(nEmbd), uint64(nFF)}, vals[nFF*nEmbd:])
		default:
			add(ti.Name, ti.Shape, vals)
		}
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, kvs, ts); err != nil {
		t.Fatal(err)
	}
	l, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestRoPE checks the normal pairing against cpuref.RoPE, the NeoX pairing against the normal
// one on reordered dimensions, and that dimensions past nRot stay as they are.
func TestRoPE(t *testing.T) {
	const nHeads, headDim, nRot = 3, 12, 8
	rng := rand.New(rand.NewPCG(1, 2))
	pos := []int32{0, 1, 7, 300}
	x := make([]float32, len(pos)*nHeads*headDim)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	normal, want := slices.Clone(x), slices.Clone(x)
	rope(normal, pos, nHeads, headDim, nRot, 10000, 1, false, nil)
	cpuref.RoPE(want, pos, nHeads, headDim, nRot, 10000)
	if !slices.Equal(normal, want) {
		t.Error("normal RoPE differs from cpuref.RoPE")
	}
	// NeoX on x is normal RoPE on x with dimension i moved to 2i and i + nRot/2 to 2i+1.
	reorder := func(v []float32) []float32 {
		out := slices.Clone(v)
		for h := 0; h < len(v); h += headDim {
			for i := range nRot / 2 {
				out[h+2*i], out[h+2*i+1] = v[h+i], v[h+i+nRot/2]
			}
		}
		return out
	}
	neox := slices.Clone(x)
	rope(neox, pos, nHeads, headDim, nRot, 10000, 1, true, nil)
	viaNormal := reorder(x)
	rope(viaNormal, pos, nHeads, headDim, nRot, 10000, 1, false, nil)
	if !slices.Equal(reorder(neox), viaNormal) {
		t.Error("NeoX RoPE is not normal RoPE on reordered dimensions")
	}
	for h := 0; h < len(x); h += headDim {
		if !slices.Equal(neox[h+nRot:h+headDim], x[h+nRot:h+headDim]) {
			t.Fatal("dimensions past nRot changed")
		}
	}
	// Position 0 is the identity; factors of 2 halve every angle, as position p/2 would.
	zero := slices.Clone(x[:headDim])
	rope(zero, []int32{0}, 1, headDim, nRot, 10000, 1, true, nil)
	if !slices.Equal(zero, x[:headDim]) {
		t.Error("position 0 rotated")
	}
	a, b := slices.Clone(x[:headDim]), slices.Clone(x[:headDim])
	rope(a, []int32{8}, 1, headDim, nRot, 10000, 1, true, []float32{2, 2, 2, 2})
	rope(b, []int32{4}, 1, headDim, nRot, 10000, 1, true, nil)
	if e := cpuref.RelErr(a, b); e > 1e-6 {
		t.Errorf("frequency factors: relative error %g", e)
	}
	// So does linear scaling by 1/2 (a rope.scaling.factor of 2).
	c := slices.Clone(x[:headDim])
	rope(c, []int32{8}, 1, headDim, nRot, 10000, 0.5, true, nil)
	if e := cpuref.RelErr(c, b); e > 1e-6 {
		t.Errorf("linear scaling: relative error %g", e)
	}
}

// TestHeadNorm checks qwen3's per-head norm on a worked example.
func TestHeadNorm(t *testing.T) {
	// Two heads of 2: (3, 4) has mean square 12.5, (1, -1) has 1.
	got := headNorm([]float32{3, 4, 1, -1}, []float32{1, 2}, 2, 0)
	r := float32(math.Sqrt(12.5))
	want := []float32{3 / r, 2 * 4 / r, 1, -2}
	if cpuref.RelErr(got, want) > 1e-6 {
		t.Errorf("headNorm = %v, want %v", got, want)
	}
}

func TestErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := gguf.Write(&buf, []gguf.KV{{Key: "general.architecture", Type: gguf.TypeString, Value: "gpt2"}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Forward(f, prompt); err == nil || !strings.Contains(err.Error(), "llama, qwen2, qwen2vl, qwen3, phi3, gemma2, gemma3") {
		t.Errorf("gpt2: %v, want an error listing the supported architectures", err)
	}
	m := synthFile(t, "qwen3", quantize.MixF32)
	if _, err := Forward(m, []int32{1, 512}); err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
		t.Errorf("token 512 of 512: %v", err)
	}
	if _, err := Forward(m, nil); err == nil {
		t.Error("no tokens accepted")
	}
}

// TestQwen3HeadNorm checks that qwen3's q and k go through their per-head norms: scaling
// attn_q and attn_k (whose heads the norms then bring back to unit size) leaves the logits as
// they were, while changing the norm weights does not.
func TestQwen3HeadNorm(t *testing.T) {
	f := synthFile(t, "qwen3", quantize.MixF32)
	want, err := Forward(f, prompt)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		suffix string
		same   bool
	}{{"attn_q.weight", true}, {"attn_k.weight", true}, {"attn_q_norm.weight", false}, {"attn_k_norm.weight", false}} {
		got, err := Forward(scaled(t, f, c.suffix, 4), prompt)
		if err != nil {
			t.Fatal(err)
		}
		e := cpuref.RelErr(got, want)
		t.Logf("%s x4: relative error %.3g", c.suffix, e)
		if (e < 1e-3) != c.same {
			t.Errorf("%s x4: relative error %.3g, want it %s", c.suffix, e, map[bool]string{true: "below 1e-3 (the epsilon's effect)", false: "above"}[c.same])
		}
	}
}

// scaled copies an F32 file with the tensors whose names end in suffix multiplied by k.
func scaled(t *testing.T, f *gguf.File, suffix string, k float32) *gguf.File {
	t.Helper()
	var ts []gguf.TensorData
	for _, ti := range f.Tensors {
		data := f.TensorData(&ti)
		if strings.HasSuffix(ti.Name, suffix) {
			vals := make([]float32, ti.NumElements())
			if err := gguf.Dequantize(ti.Type, data, vals); err != nil {
				t.Fatal(err)
			}
			for i := range vals {
				vals[i] *= k
			}
			var err error
			if data, err = gguf.Quantize(ti.Type, vals); err != nil {
				t.Fatal(err)
			}
		}
		ts = append(ts, gguf.TensorData{Name: ti.Name, Shape: ti.Shape, Type: ti.Type, Data: data})
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, f.KV, ts); err != nil {
		t.Fatal(err)
	}
	s, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// long is a prompt longer than the synthetic Gemma models' sliding window of 4.
var long = []int32{1, 403, 407, 261, 378, 290, 300, 310, 320, 330, 340, 350}

// TestGemmaWindow checks the sliding window: a window of 4 and one of 4096 give the same
// logits while every token fits in 4, and different ones after.
func TestGemmaWindow(t *testing.T) {
	for _, arch := range []string{"gemma2", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			small := synthWith(t, arch, func(c *synth.Config) { c.SlidingWindow = 4 })
			large := synthWith(t, arch, func(c *synth.Config) { c.SlidingWindow = 4096 })
			for _, n := range []int{4, len(long)} {
				a, err := Forward(small, long[:n])
				if err != nil {
					t.Fatal(err)
				}
				b, err := Forward(large, long[:n])
				if err != nil {
					t.Fatal(err)
				}
				e := cpuref.RelErr(a, b)
				t.Logf("%d tokens: relative difference %.3g", n, e)
				if (e == 0) != (n <= 4) {
					t.Errorf("%d tokens, windows 4 and 4096: relative difference %.3g", n, e)
				}
			}
		})
	}
}

// TestGemma2SoftCaps checks gemma2's soft-caps: logits capped at c are c*tanh(l/c) of the
// logits capped far away, and a tight attention cap changes the answer.
func TestGemma2SoftCaps(t *testing.T) {
	forward := func(attn, final float32) []float32 {
		t.Helper()
		logits, err := Forward(synthWith(t, "gemma2", func(c *synth.Config) { c.AttnSoftCap, c.FinalSoftCap = attn, final }), long)
		if err != nil {
			t.Fatal(err)
		}
		return logits
	}
	raw := forward(50, 1e6) // a final cap of 1e6 leaves these logits as they are, to float32 precision
	capped := forward(50, 0.1)
	want := cpuref.SoftCap(raw, 0.1)
	if e := cpuref.RelErr(capped, want); e > 1e-5 {
		t.Errorf("final cap 0.1: relative error %.3g from 0.1*tanh(logits/0.1)", e)
	}
	if hi := max(slices.Max(capped), -slices.Min(capped)); hi >= 0.1 || hi < 0.05 {
		t.Errorf("final cap 0.1: logits reach %g", hi)
	}
	if e := cpuref.RelErr(raw, forward(50, 30)); e < 1e-6 || e > 1e-3 {
		t.Errorf("final cap 30 vs 1e6: relative difference %.3g, want slight", e)
	}
	// Synthetic attention scores are small (|s| ~ 0.03), so only a tight cap shows.
	if e := cpuref.RelErr(raw, forward(0.01, 1e6)); e < 1e-4 {
		t.Errorf("attention cap 0.01 vs 50: relative difference %.3g", e)
	}
	if e := cpuref.RelErr(raw, forward(1e6, 1e6)); e == 0 || e > 1e-5 {
		t.Errorf("attention cap 1e6 vs 50: relative difference %.3g, want slight", e)
	}
}

// TestGemmaPostNorms checks that each block's output goes through its post-norm: scaling
// attn_output or ffn_down (whose outputs the norms bring back to unit size) changes nothing
// but the epsilon's share, while scaling the post-norm weights changes the logits, and the
// blocks and embeddings scaled together scale the (tied) logits alike.
func TestGemmaPostNorms(t *testing.T) {
	for _, arch := range []string{"gemma2", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			// No epsilon to speak of, and gemma2's final cap too far to bend logits scaled by 4.
			f := synthWith(t, arch, func(c *synth.Config) { c.NormEps, c.FinalSoftCap = 1e-12, 1e6 })
			want, err := Forward(f, long)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				suffix string
				same   bool
			}{{"attn_output.weight", true}, {"ffn_down.weight", true}, {"post_attention_norm.weight", false}, {"post_ffw_norm.weight", false}} {
				got, err := Forward(scaled(t, f, c.suffix, 4), long)
				if err != nil {
					t.Fatal(err)
				}
				e := cpuref.RelErr(got, want)
				t.Logf("%s x4: relative difference %.3g", c.suffix, e)
				if (e < 1e-5) != c.same {
					t.Errorf("%s x4: relative difference %.3g", c.suffix, e)
				}
			}
			// x = sqrt(n_embd)*embedding + sum of post-normed blocks: scaling the embeddings
			// and both post-norms by 4 scales every RMSNorm's input by 4, which it undoes, and
			// the logits, through the tied output, by 4.
			g := scaled(t, scaled(t, scaled(t, f, "token_embd.weight", 4), "post_attention_norm.weight", 4), "post_ffw_norm.weight", 4)
			got, err := Forward(g, long)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				want[i] *= 4
			}
			if e := cpuref.RelErr(got, want); e > 1e-5 {
				t.Errorf("embeddings and post-norms x4: relative error %.3g from 4 x the logits", e)
			}
		})
	}
}

// TestGemma3RoPE checks that gemma3's global layers (il % 6 == 5) rotate with rope.freq_base
// and rope.scaling.factor and its sliding ones with neither: with five layers, all sliding,
// changing them changes nothing; with six it does.
func TestGemma3RoPE(t *testing.T) {
	for _, layers := range []int{5, 6} {
		forward := func(base, scale float32) []float32 {
			t.Helper()
			f := synthWith(t, "gemma3", func(c *synth.Config) { c.Layers, c.RopeBase, c.RopeScale = layers, base, scale })
			logits, err := Forward(f, long)
			if err != nil {
				t.Fatal(err)
			}
			return logits
		}
		want := forward(1e6, 8)
		for _, c := range []struct{ base, scale float32 }{{10000, 8}, {1e6, 2}, {10000, 1}} {
			e := cpuref.RelErr(forward(c.base, c.scale), want)
			t.Logf("%d layers, base %g, scale %g: relative difference %.3g", layers, c.base, c.scale, e)
			if (e == 0) != (layers == 5) {
				t.Errorf("%d layers: base %g and scale %g vs 1e6 and 8: relative difference %.3g", layers, c.base, c.scale, e)
			}
		}
	}
}

// TestGemmaHeadNorm checks gemma3's per-head q/k norms as TestQwen3HeadNorm does qwen3's, and
// that gemma2 has none (its q scale matters).
func TestGemmaHeadNorm(t *testing.T) {
	for _, arch := range []string{"gemma2", "gemma3"} {
		f := synthWith(t, arch, func(*synth.Config) {})
		want, err := Forward(f, long)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Forward(scaled(t, f, "attn_q.weight", 4), long)
		if err != nil {
			t.Fatal(err)
		}
		if e := cpuref.RelErr(got, want); (e < 1e-3) != (arch == "gemma3") {
			t.Errorf("%s: attn_q x4: relative difference %.3g", arch, e)
		}
	}
}

// TestGemmaHparams checks the settings read from the metadata against llama.cpp's
// load_hparams: defaults, the 27B models' query scale, and gemma3 without a window.
func TestGemmaHparams(t *testing.T) {
	read := func(arch string, edit func(*synth.Config), drop ...string) hparams {
		t.Helper()
		hp, err := readHparams(rewrite(t, synthWith(t, arch, edit), drop))
		if err != nil {
			t.Fatal(err)
		}
		return hp
	}
	none := func(*synth.Config) {}
	g2 := read("gemma2", none, "gemma2.attn_logit_softcapping", "gemma2.final_logit_softcapping", "gemma2.attention.sliding_window")
	if !g2.gemma || g2.attnSoftCap != 50 || g2.finalSoftCap != 30 || g2.window != 4096 || g2.swaPattern != 2 ||
		g2.attnScale != 0.25 || g2.ropeBaseSWA != g2.ropeBase || g2.ropeScaleSWA != 1 {
		t.Errorf("gemma2 defaults: %+v", g2)
	}
	g3 := read("gemma3", func(c *synth.Config) { c.RopeBase = 1e6 })
	if g3.attnSoftCap != 0 || g3.finalSoftCap != 0 || g3.window != 4 || g3.swaPattern != 6 || g3.ropeBase != 1e6 ||
		g3.ropeScale != 0.5 || g3.ropeBaseSWA != 10000 || g3.ropeScaleSWA != 1 {
		t.Errorf("gemma3: %+v", g3)
	}
	for il, want := range []bool{true, true, true, true, true, false, true} {
		if _, _, w := g3.layerRoPE(il); (w > 0) != want {
			t.Errorf("gemma3 layer %d: window %d", il, w)
		}
	}
	if g := read("gemma3", none, "gemma3.attention.sliding_window"); g.window != 0 {
		t.Errorf("gemma3 without sliding_window: window %d, want none (llama.cpp's LLAMA_SWA_TYPE_NONE)", g.window)
	}
	// 27B: 46 (gemma2) or 62 (gemma3) layers scale by 1/sqrt(n_embd/n_head), here with heads of
	// 32 in a 64-wide model: 1/sqrt(16) rather than 1/sqrt(32).
	for arch, layers := range map[string]int{"gemma2": 46, "gemma3": 62} {
		big := func(c *synth.Config) { c.Layers, c.HeadDim = layers, 32 }
		if hp := read(arch, big); hp.attnScale != 0.25 || hp.headDim != 32 {
			t.Errorf("%s, %d layers: scale %g", arch, layers, hp.attnScale)
		}
		if hp := read(arch, func(c *synth.Config) { c.Layers, c.HeadDim = layers-1, 32 }); hp.attnScale != float32(1/math.Sqrt(32)) {
			t.Errorf("%s, %d layers: scale %g", arch, layers-1, hp.attnScale)
		}
	}
}

// rewrite copies f without the metadata keys in drop and with add appended.
func rewrite(t *testing.T, f *gguf.File, drop []string, add ...gguf.KV) *gguf.File {
	t.Helper()
	var kvs []gguf.KV
	for _, kv := range f.KV {
		if !slices.Contains(drop, kv.Key) {
			kvs = append(kvs, kv)
		}
	}
	var ts []gguf.TensorData
	for _, ti := range f.Tensors {
		ts = append(ts, gguf.TensorData{Name: ti.Name, Shape: ti.Shape, Type: ti.Type, Data: f.TensorData(&ti)})
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

// TestRopeScaling checks the RoPE scaling keys as llama.cpp reads them, for any architecture:
// rope.scaling.factor (or the older rope.scale_linear) divides positions unless the type is
// none, the type defaults to linear, yarn adds YaRN's blend (TestYaRN), and other types are
// refused.
func TestRopeScaling(t *testing.T) {
	f := synthFile(t, "llama", quantize.MixF32)
	str := func(k, v string) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeString, Value: v} }
	f32 := func(k string, v float32) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeFloat32, Value: v} }
	for _, c := range []struct {
		kvs  []gguf.KV
		want float32
	}{
		{nil, 1},
		{[]gguf.KV{f32("llama.rope.scaling.factor", 4)}, 0.25},
		{[]gguf.KV{str("llama.rope.scaling.type", "linear"), f32("llama.rope.scaling.factor", 4)}, 0.25},
		{[]gguf.KV{f32("llama.rope.scale_linear", 4)}, 0.25},
		{[]gguf.KV{str("llama.rope.scaling.type", "none"), f32("llama.rope.scaling.factor", 4)}, 1},
	} {
		hp, err := readHparams(rewrite(t, f, nil, c.kvs...))
		if err != nil || hp.ropeScale != c.want {
			t.Errorf("%v: scale %g (%v), want %g", c.kvs, hp.ropeScale, err, c.want)
		}
	}
	if _, err := Forward(rewrite(t, f, nil, str("llama.rope.scaling.type", "longrope"), f32("llama.rope.scaling.factor", 4)), prompt); err == nil || !strings.Contains(err.Error(), `"longrope" not supported`) {
		t.Errorf("longrope: %v", err)
	}
	plain, err := Forward(f, prompt)
	if err != nil {
		t.Fatal(err)
	}
	scaled, err := Forward(rewrite(t, f, nil, f32("llama.rope.scaling.factor", 4)), prompt)
	if err != nil {
		t.Fatal(err)
	}
	if e := cpuref.RelErr(scaled, plain); e < 1e-4 {
		t.Errorf("factor 4: relative difference %.3g", e)
	}
}
