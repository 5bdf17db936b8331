package model_test

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/reference"
)

// seqBatch lays sequences out in one batch, each in its own cache region of stride rows.
func seqBatch(seqs [][]int32, stride int) (model.Batch, []int) {
	var b model.Batch
	var firsts []int
	for i, s := range seqs {
		firsts = append(firsts, len(b.Tokens))
		for p, tok := range s {
			b.Tokens = append(b.Tokens, tok)
			b.Pos = append(b.Pos, int32(p))
			b.Base = append(b.Base, int32(i*stride))
		}
	}
	return b, firsts
}

// TestEncoderBatchMatchesSeparate runs three BERT sequences of different lengths in one batch:
// each token attends to its own sequence only, so every sequence's hidden states equal those of
// the sequence run alone, and each pooled embedding equals the reference's.
func TestEncoderBatchMatchesSeparate(t *testing.T) {
	dev := gputest.Device(t)
	f := tinyModel(t, func(cfg *synth.Config) { cfg.Arch, cfg.Pooling, cfg.KVHeads = "bert", 1, cfg.Heads })
	m, err := model.Load(dev, f, model.Options{MaxBatch: 32, KVF32: true, RawActivations: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	kv, err := m.NewKVCache(48)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	seqs := [][]int32{{1, 403, 407, 261, 378}, {1, 290, 300, 310, 320, 330, 340, 350, 360}, {1, 500}}
	b, firsts := seqBatch(seqs, 16)
	all, err := m.ForwardEmbed(kv, b)
	if err != nil {
		t.Fatal(err)
	}
	d := m.Config.NEmbd
	for i, s := range seqs {
		alone, err := m.ForwardEmbed(kv, model.Batch{Tokens: s, Pos: b.Pos[firsts[i] : firsts[i]+len(s)], Base: make([]int32, len(s))})
		if err != nil {
			t.Fatal(err)
		}
		batched := all[firsts[i]*d : (firsts[i]+len(s))*d]
		if e := cpuref.RelErr(batched, alone); e > pathTol(m, 1e-5) {
			t.Errorf("sequence %d: batched vs alone hidden states: relative error %.3g", i, e)
		}
		want, err := reference.Embed(f, s)
		if err != nil {
			t.Fatal(err)
		}
		got := model.Normalize(model.Pool(batched, d, model.PoolMean), model.NormEuclidean)
		if e := cpuref.RelErr(got, want); e > 1e-3 {
			t.Errorf("sequence %d: GPU vs reference embedding: relative error %.3g", i, e)
		}
	}
}

// TestRankMatchesReference scores three query-document prompts of a generated reranker in one
// batch and compares each with the Go reference; the scores differ from each other by far more
// than the error, so they rank the documents as the reference does.
func TestRankMatchesReference(t *testing.T) {
	dev := gputest.Device(t)
	f := tinyModel(t, func(cfg *synth.Config) { cfg.Arch, cfg.Rank, cfg.KVHeads = "bert", true, cfg.Heads })
	m, err := model.Load(dev, f, model.Options{MaxBatch: 32, MaxOutputs: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.CanRank() || m.RankOutputs() != 1 || m.Config.Pooling != model.PoolRank {
		t.Fatalf("CanRank %v, outputs %d, pooling %v", m.CanRank(), m.RankOutputs(), m.Config.Pooling)
	}
	kv, err := m.NewKVCache(48)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	seqs := [][]int32{{1, 403, 407, 2, 2, 261, 378, 2}, {1, 403, 407, 2, 2, 290, 300, 310, 2}, {1, 403, 407, 2, 2, 500, 2}}
	b, firsts := seqBatch(seqs, 16)
	got, err := m.ForwardRank(kv, b, firsts)
	if err != nil {
		t.Fatal(err)
	}
	// The tolerance is a tenth of the smallest gap between the reference's scores, so the GPU
	// ranks the documents as the reference does.
	const tol = 2e-4
	var scores []float64
	for i, s := range seqs {
		want, err := reference.Rank(f, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(got[i]) != 1 || len(want) != 1 {
			t.Fatalf("sequence %d: %d outputs, reference %d; want 1", i, len(got[i]), len(want))
		}
		if math.Abs(float64(got[i][0]-want[0])) > tol {
			t.Errorf("sequence %d: score %g, reference %g", i, got[i][0], want[0])
		}
		scores = append(scores, float64(want[0]))
	}
	for i := range scores {
		for j := range i {
			if math.Abs(scores[i]-scores[j]) < 10*tol {
				t.Errorf("reference scores %d and %d too close to rank: %g, %g", j, i, scores[j], scores[i])
			}
		}
	}
	if _, err := m.ForwardRank(kv, b, []int{0, 1, 2, 3, 4}); err == nil {
		t.Error("5 rows ranked with 4 outputs")
	}
}

// TestDecoderEmbeddingMatchesLlamaServer pools stories260K's final hidden states (after the
// output norm) by the mean and normalises them: llama-server --embeddings --pooling mean's
// answer for "Once upon a time" (server-embeddings/v1_embeddings capture).
func TestDecoderEmbeddingMatchesLlamaServer(t *testing.T) {
	m := load(t, "models", "stories260K.gguf")
	raw, err := os.ReadFile(shareddata.Path(t, "reference", "llama-server-wire", "server-embeddings", "v1_embeddings.body"))
	if err != nil {
		t.Fatal(err)
	}
	var capture struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &capture); err != nil {
		t.Fatal(err)
	}
	tokens := m.Tokenizer.Encode("Once upon a time", true, true)
	if len(tokens) != capture.Usage.PromptTokens {
		t.Fatalf("%d tokens, llama-server counted %d", len(tokens), capture.Usage.PromptTokens)
	}
	kv, err := m.NewKVCache(32)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	b, _ := seqBatch([][]int32{tokens}, 0)
	hidden, err := m.ForwardEmbed(kv, b)
	if err != nil {
		t.Fatal(err)
	}
	got := model.Normalize(model.Pool(hidden, m.Config.NEmbd, model.PoolMean), model.NormEuclidean)
	want := capture.Data[0].Embedding
	if e := cpuref.RelErr(got, want); e > 1e-3 {
		t.Errorf("embedding vs llama-server: relative error %.3g\ngot  %v\nwant %v", e, got[:4], want[:4])
	}
	// The decoder's Embed pools as the file says: stories260K has no pooling_type, so the mean.
	emb, err := m.Embed(kv, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(emb, got) {
		t.Error("Embed differs from ForwardEmbed pooled by the mean")
	}
}

// TestNormalize checks llama.cpp's embd_normalize variants on a small vector.
func TestNormalize(t *testing.T) {
	v := []float32{3, -4, 0}
	for _, c := range []struct {
		norm int
		want []float32
	}{
		{model.NormNone, []float32{3, -4, 0}},
		{model.NormMaxAbs, []float32{3 * 32760 / 4.0, -32760, 0}},
		{model.NormTaxicab, []float32{3 / 7.0, -4 / 7.0, 0}},
		{model.NormEuclidean, []float32{0.6, -0.8, 0}},
		{3, []float32{float32(3 / math.Cbrt(91)), float32(-4 / math.Cbrt(91)), 0}},
	} {
		got := model.Normalize(v, c.norm)
		for i := range got {
			if math.Abs(float64(got[i]-c.want[i])) > 1e-3*math.Max(1, math.Abs(float64(c.want[i]))) {
				t.Errorf("norm %d: %v, want %v", c.norm, got, c.want)
				break
			}
		}
	}
	if got := model.Normalize([]float32{0, 0}, model.NormEuclidean); !slices.Equal(got, []float32{0, 0}) {
		t.Errorf("zero vector: %v", got)
	}
}

// TestParsePooling checks the --pooling names round-trip and a bad one is refused.
func TestParsePooling(t *testing.T) {
	for p := model.PoolNone; p <= model.PoolRank; p++ {
		got, err := model.ParsePooling(p.String())
		if err != nil || got != p {
			t.Errorf("%v: parsed as %v, %v", p, got, err)
		}
	}
	if _, err := model.ParsePooling("max"); err == nil || err.Error() != `pooling "max" not supported (supported: none, mean, cls, last, rank)` {
		t.Errorf("max: %v", err)
	}
}
