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
	c, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.Arch, c.Mix = arch, mix
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

// TestSynthArchs runs every architecture's synthetic model in F32 and Q8_0: finite, varied
// logits, the two types close, and the answer depending on the earlier tokens.
func TestSynthArchs(t *testing.T) {
	for _, arch := range synth.Archs() {
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
			if e := cpuref.RelErr(q8, f32); e > 0.05 {
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
	rope(normal, pos, nHeads, headDim, nRot, 10000, false, nil)
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
	rope(neox, pos, nHeads, headDim, nRot, 10000, true, nil)
	viaNormal := reorder(x)
	rope(viaNormal, pos, nHeads, headDim, nRot, 10000, false, nil)
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
	rope(zero, []int32{0}, 1, headDim, nRot, 10000, true, nil)
	if !slices.Equal(zero, x[:headDim]) {
		t.Error("position 0 rotated")
	}
	a, b := slices.Clone(x[:headDim]), slices.Clone(x[:headDim])
	rope(a, []int32{8}, 1, headDim, nRot, 10000, true, []float32{2, 2, 2, 2})
	rope(b, []int32{4}, 1, headDim, nRot, 10000, true, nil)
	if e := cpuref.RelErr(a, b); e > 1e-6 {
		t.Errorf("frequency factors: relative error %g", e)
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
	if _, err := Forward(f, prompt); err == nil || !strings.Contains(err.Error(), "llama, qwen2, qwen3, phi3") {
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
