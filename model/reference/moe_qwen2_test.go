package reference

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// qwen2moeSHA256 is the SHA-256 of the file qwen2moeFile writes, the one whose llama.cpp
// runs testdata/llamacpp/qwen2moe-F32.*.json record.
const qwen2moeSHA256 = "cd477c5ebe9e53de1fce761732d7b027fc8bd0dcef0cc78d1a95e92a6f376336"

// qwen2moeFile writes a random qwen2moe model (Qwen1.5-MoE's layout: qwen2's attention with
// q/k/v biases, 4 experts of which 2 run, unnormalised weights, and a shared expert gated by
// sigmoid(x . ffn_gate_inp_shexp)) with stories260K's tokenizer, taken from the qwen3moe
// test file, and returns its bytes. Its values come from a fixed PCG stream turned into
// near-normal values by hand, so that it stays the same file byte for byte.
func qwen2moeFile(t *testing.T) []byte {
	t.Helper()
	src := open(t, shareddata.Path(t, "models", "moe", "qwen3moe-F32.gguf"))
	const (
		nEmbd, nLayer, nHead, nKV, hd = 128, 2, 4, 2, 32
		nExpert, nUsed, ffExp, ffSh   = 4, 2, 64, 96
	)
	u32 := func(k string, v int) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeUint32, Value: uint32(v)} }
	f32 := func(k string, v float32) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeFloat32, Value: v} }
	a := "qwen2moe."
	kvs := []gguf.KV{
		{Key: "general.architecture", Type: gguf.TypeString, Value: "qwen2moe"},
		{Key: "general.name", Type: gguf.TypeString, Value: "random qwen2moe 128x2 e4k2 shexp96"},
		u32(a+"block_count", nLayer), u32(a+"context_length", 2048), u32(a+"embedding_length", nEmbd),
		u32(a+"feed_forward_length", 4*ffExp), u32(a+"attention.head_count", nHead), u32(a+"attention.head_count_kv", nKV),
		f32(a+"attention.layer_norm_rms_epsilon", 1e-6), f32(a+"rope.freq_base", 1e6),
		u32(a+"expert_count", nExpert), u32(a+"expert_used_count", nUsed),
		u32(a+"expert_feed_forward_length", ffExp), u32(a+"expert_shared_feed_forward_length", ffSh),
	}
	var byteTokens []int
	for _, kv := range src.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			kvs = append(kvs, kv)
		}
	}
	types, _ := src.Int32s("tokenizer.ggml.token_type")
	for i, ty := range types {
		if ty == 6 { // byte fallback: small output rows, so that greedy text stays whole UTF-8
			byteTokens = append(byteTokens, i)
		}
	}
	nVocab := int(src.Tensors[0].Shape[1])
	if tok, ok := src.Tensor("token_embd.weight"); ok {
		nVocab = int(tok.Shape[1])
	}
	rng := rand.New(rand.NewPCG(2024, 11))
	normal := func() float32 { // Irwin-Hall: the sum of 12 uniforms, less 6
		var s float64
		for range 12 {
			s += float64(rng.Uint64()>>11) / (1 << 53)
		}
		return float32(s - 6)
	}
	var ts []gguf.TensorData
	add := func(name string, std, mean float32, shape ...uint64) []float32 {
		n := uint64(1)
		for _, d := range shape {
			n *= d
		}
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = mean + std*normal()
		}
		data, err := gguf.Quantize(gguf.TypeF32, vals)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, gguf.TensorData{Name: name, Shape: shape, Type: gguf.TypeF32, Data: data})
		return vals
	}
	d, e := uint64(nEmbd), uint64(nExpert)
	add("token_embd.weight", 0.5, 0, d, uint64(nVocab))
	add("output_norm.weight", 0.1, 1, d)
	out := add("output.weight", 0.7, 0, d, uint64(nVocab))
	for _, id := range byteTokens {
		for j := range nEmbd {
			out[id*nEmbd+j] *= 0.05
		}
	}
	data, err := gguf.Quantize(gguf.TypeF32, out)
	if err != nil {
		t.Fatal(err)
	}
	ts[len(ts)-1].Data = data
	for il := range nLayer {
		p := fmt.Sprintf("blk.%d.", il)
		add(p+"attn_norm.weight", 0.1, 1, d)
		add(p+"attn_q.weight", 0.15, 0, d, nHead*hd)
		add(p+"attn_q.bias", 0.1, 0, nHead*hd)
		add(p+"attn_k.weight", 0.15, 0, d, nKV*hd)
		add(p+"attn_k.bias", 0.1, 0, nKV*hd)
		add(p+"attn_v.weight", 0.15, 0, d, nKV*hd)
		add(p+"attn_v.bias", 0.1, 0, nKV*hd)
		add(p+"attn_output.weight", 0.1, 0, nHead*hd, d)
		add(p+"ffn_norm.weight", 0.1, 1, d)
		add(p+"ffn_gate_inp.weight", 0.5, 0, d, e)
		add(p+"ffn_gate_exps.weight", 0.15, 0, d, ffExp, e)
		add(p+"ffn_up_exps.weight", 0.15, 0, d, ffExp, e)
		add(p+"ffn_down_exps.weight", 0.15, 0, ffExp, d, e)
		add(p+"ffn_gate_inp_shexp.weight", 0.2, 0, d)
		add(p+"ffn_gate_shexp.weight", 0.15, 0, d, ffSh)
		add(p+"ffn_up_shexp.weight", 0.15, 0, d, ffSh)
		add(p+"ffn_down_shexp.weight", 0.15, 0, ffSh, d)
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, kvs, ts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestQwen2MoEFile writes qwen2moeFile's model to $QWEN2MOE_OUT when that is set (to run
// llama.cpp on it: testdata/llamacpp/README.md), and checks that it is still the file the
// references were made from.
func TestQwen2MoEFile(t *testing.T) {
	raw := qwen2moeFile(t)
	sum := sha256.Sum256(raw)
	if out := os.Getenv("QWEN2MOE_OUT"); out != "" {
		if err := os.WriteFile(out, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes, sha256 %x)", out, len(raw), sum)
	}
	if got := hex.EncodeToString(sum[:]); got != qwen2moeSHA256 {
		t.Errorf("qwen2moeFile's sha256 is %s, the references' file's %s", got, qwen2moeSHA256)
	}
}
