package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/reference"
)

var embedTexts = []string{
	"Once upon a time",
	"Lily and Tom went to the park to play with a big red ball",
	"The cat",
	"One day, a little bird flew into the garden and saw a shiny stone near the old tree",
	"Ben had a toy car",
	"Sara found a box",
}

// result submits one task and waits for its final result, failing the test on an error.
func result(t *testing.T, e *engine.Engine, task engine.Task) engine.Result {
	t.Helper()
	ch, err := e.Submit(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	var last engine.Result
	n := 0
	for r := range ch {
		last, n = r, n+1
	}
	if n != 1 || !last.Stop || last.Err != nil {
		t.Fatalf("%d results, final %+v", n, last)
	}
	return last
}

// loadModel loads a model file directly, as the embed command does.
func loadModel(t *testing.T, path string) *model.Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.Load(gputest.Device(t), f, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestEmbedMatchesModel embeds texts through the engine's slots and directly with
// model.Embed, for a BERT encoder and for stories260K (a decoder, pooled by the mean): the same
// vectors, and the token counts reported.
func TestEmbedMatchesModel(t *testing.T) {
	for _, c := range []struct{ name, path string }{
		{"bert", enginetest.SynthModel(t, nil)},
		{"decoder", shareddata.Path(t, "models", "stories260K.gguf")},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := enginetest.LoadConfig(t, engine.Config{ModelPath: c.path, CtxSize: 512, Embeddings: true, Pooling: "mean"})
			if info := e.Info(); !info.Embeddings || info.Pooling != model.PoolMean {
				t.Fatalf("info: embeddings %v pooling %v", info.Embeddings, info.Pooling)
			}
			m := loadModel(t, c.path)
			kv, err := m.NewKVCache(512)
			if err != nil {
				t.Fatal(err)
			}
			defer kv.Release()
			for _, text := range embedTexts {
				tokens := e.Tokenizer().Encode(text, true, true)
				res := result(t, e, engine.Task{Kind: engine.TaskEmbed, Prompt: tokens})
				if len(res.Embedding) != 1 || len(res.Embedding[0]) != m.Config.NEmbd {
					t.Fatalf("%q: embedding of %d vectors", text, len(res.Embedding))
				}
				if res.TokensEvaluated != len(tokens) || res.Timings.PromptN != len(tokens) || res.Slot != 0 {
					t.Errorf("%q: evaluated %d, prompt_n %d, slot %d; want %d tokens in slot 0", text, res.TokensEvaluated, res.Timings.PromptN, res.Slot, len(tokens))
				}
				want, err := m.Embed(kv, tokens)
				if err != nil {
					t.Fatal(err)
				}
				if got := model.Normalize(res.Embedding[0], model.NormEuclidean); !slices.Equal(got, want) {
					t.Errorf("%q: engine and model.Embed differ: relative error %.3g", text, cpuref.RelErr(got, want))
				}
			}
		})
	}
}

// TestConcurrentEmbeddingsMatchAlone embeds six texts one at a time, then all at once in four
// slots (several in one pass, the rest queued): the same vectors.
func TestConcurrentEmbeddingsMatchAlone(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: enginetest.SynthModel(t, nil), CtxSize: 4 * 128, Slots: 4, Embeddings: true})
	embed := func(text string) engine.Result {
		return result(t, e, engine.Task{Kind: engine.TaskEmbed, Prompt: e.Tokenizer().Encode(text, true, true)})
	}
	alone := make([][]float32, len(embedTexts))
	for i, text := range embedTexts {
		alone[i] = embed(text).Embedding[0]
	}
	together := make([]engine.Result, len(embedTexts))
	var wg sync.WaitGroup
	for i, text := range embedTexts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			together[i] = embed(text)
		}()
	}
	wg.Wait()
	slotsUsed := map[int]bool{}
	for i := range embedTexts {
		slotsUsed[together[i].Slot] = true
		if err := cpuref.RelErr(together[i].Embedding[0], alone[i]); err > 1e-5 {
			t.Errorf("text %d: together vs alone: relative error %.3g", i, err)
		}
	}
	if len(slotsUsed) < 2 {
		t.Errorf("slots used %v: the requests did not run in parallel", slotsUsed)
	}
}

// TestEmbedAlongsideGeneration runs an embedding while another slot generates: the text is the
// greedy text alone and the embedding the one computed alone.
func TestEmbedAlongsideGeneration(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 1024, Slots: 2, Embeddings: true, Pooling: "mean"})
	prompt := e.Tokenizer().Encode("Once upon a time", true, true)
	embedTask := engine.Task{Kind: engine.TaskEmbed, Prompt: e.Tokenizer().Encode("Lily and Tom went to the park", true, true)}
	want := result(t, e, embedTask).Embedding[0]
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(24)})
	if err != nil {
		t.Fatal(err)
	}
	<-ch // generating
	got := result(t, e, embedTask)
	text, final, _ := collect(t, ch)
	if err := cpuref.RelErr(got.Embedding[0], want); err > 1e-5 {
		t.Errorf("embedding beside a generation: relative error %.3g", err)
	}
	if final.Err != nil || final.TokensPredicted != 24 || len(text) < 40 {
		t.Errorf("generation beside an embedding: %q, %+v", text, final)
	}
}

// TestPoolingNoneAndLast checks a decoder's other poolings: none gives each token's hidden
// state; last, with a batch smaller than the input, spans several passes and gives the last
// token's, as pooling none's last row.
func TestPoolingNoneAndLast(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	none := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 512, Embeddings: true})
	if p := none.Info().Pooling; p != model.PoolNone {
		t.Fatalf("stories260K's pooling %v, want none (the file has no pooling_type)", p)
	}
	tokens := none.Tokenizer().Encode(embedTexts[1], true, true)
	rows := result(t, none, engine.Task{Kind: engine.TaskEmbed, Prompt: tokens}).Embedding
	if len(rows) != len(tokens) || len(rows[0]) != 64 {
		t.Fatalf("pooling none: %d vectors for %d tokens", len(rows), len(tokens))
	}
	last := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 512, BatchSize: 4, Embeddings: true, Pooling: "last"})
	res := result(t, last, engine.Task{Kind: engine.TaskEmbed, Prompt: tokens})
	if err := cpuref.RelErr(res.Embedding[0], rows[len(rows)-1]); err > 1e-4 {
		t.Errorf("pooling last in passes of 4 vs the last row: relative error %.3g", err)
	}
	if res.TokensCached != len(tokens) {
		t.Errorf("tokens cached %d, want %d", res.TokensCached, len(tokens))
	}
}

// TestRerankMatchesReference scores query-document prompts of a generated reranker through the
// engine, together in three slots, against the Go reference.
func TestRerankMatchesReference(t *testing.T) {
	path := enginetest.SynthModel(t, func(c *synth.Config) { c.Rank = true })
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 3 * 128, Slots: 3, Embeddings: true, Pooling: "rank"})
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prompts := [][]int32{{1, 403, 407, 2, 2, 261, 378, 2}, {1, 403, 407, 2, 2, 290, 300, 310, 2}, {1, 403, 407, 2, 2, 500, 2}}
	got := make([]engine.Result, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = result(t, e, engine.Task{Kind: engine.TaskRerank, Prompt: p})
		}()
	}
	wg.Wait()
	for i, p := range prompts {
		want, err := reference.Rank(f, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got[i].Embedding) != 1 || len(got[i].Embedding[0]) != 1 {
			t.Fatalf("prompt %d: %v, want one score", i, got[i].Embedding)
		}
		if d := got[i].Embedding[0][0] - want[0]; d > 2e-4 || d < -2e-4 {
			t.Errorf("prompt %d: score %g, reference %g", i, got[i].Embedding[0][0], want[0])
		}
	}
}

// TestEmbedErrors checks what Submit refuses: tasks the engine does not serve, empty and
// oversized inputs with llama-server's messages; and what Load refuses.
func TestEmbedErrors(t *testing.T) {
	bert := enginetest.SynthModel(t, nil)
	plain := enginetest.LoadConfig(t, engine.Config{ModelPath: bert, CtxSize: 512})
	small := enginetest.LoadConfig(t, engine.Config{ModelPath: bert, CtxSize: 16, BatchSize: 32, Embeddings: true})
	long := make([]int32, 20)
	for i := range long {
		long[i] = int32(300 + i)
	}
	for _, c := range []struct {
		name string
		e    *engine.Engine
		task engine.Task
		is   error
		msg  string
	}{
		{"not enabled", plain, engine.Task{Kind: engine.TaskEmbed, Prompt: []int32{1, 300}}, engine.ErrEmbeddingsDisabled, ""},
		{"generate on an encoder", plain, engine.Task{Prompt: []int32{1, 300}, Params: greedy(4)}, engine.ErrNoGeneration, ""},
		{"rerank without rank pooling", small, engine.Task{Kind: engine.TaskRerank, Prompt: []int32{1, 300}}, engine.ErrNotReranker, ""},
		{"empty", small, engine.Task{Kind: engine.TaskEmbed}, engine.ErrEmptyPrompt, ""},
		{"out of range", small, engine.Task{Kind: engine.TaskEmbed, Prompt: []int32{1, 512}}, nil, "engine: prompt token 512 out of range (vocabulary 512)"},
		{"longer than the context", small, engine.Task{Kind: engine.TaskEmbed, Prompt: long}, engine.ErrPromptTooBig,
			"input (20 tokens) is larger than the max context size (16 tokens). skipping"},
		{"longer than the batch", small, engine.Task{Kind: engine.TaskEmbed, Prompt: append(long, long...)}, nil,
			"input (40 tokens) is too large to process. increase the physical batch size (current batch size: 32)"},
	} {
		_, err := c.e.Submit(context.Background(), c.task)
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) || (c.msg != "" && err.Error() != c.msg) {
			t.Errorf("%s: %v, want %v %q", c.name, err, c.is, c.msg)
		}
	}
	var tooLarge *engine.InputTooLargeError
	if _, err := small.Submit(context.Background(), engine.Task{Kind: engine.TaskEmbed, Prompt: append(long, long...)}); !errors.As(err, &tooLarge) || tooLarge.Tokens != 40 || tooLarge.BatchSize != 32 {
		t.Errorf("too large: %v", err)
	}

	rank := enginetest.LoadConfig(t, engine.Config{ModelPath: enginetest.SynthModel(t, func(c *synth.Config) { c.Rank = true }), CtxSize: 128, Embeddings: true})
	if _, err := rank.Submit(context.Background(), engine.Task{Kind: engine.TaskEmbed, Prompt: []int32{1, 300}}); !errors.Is(err, engine.ErrRankPooling) {
		t.Errorf("embedding on a reranker: %v", err)
	}

	for _, c := range []struct {
		cfg  engine.Config
		want string
	}{
		{engine.Config{ModelPath: bert, Embeddings: true, Pooling: "max"}, `engine: --pooling: pooling "max" not supported (supported: none, mean, cls, last, rank)`},
		{engine.Config{ModelPath: bert, Embeddings: true, Pooling: "rank"}, "engine: rank pooling needs a reranker, and " + bert + " has no classification head (cls.weight)"},
	} {
		c.cfg.Device = -1
		if e, err := engine.Load(context.Background(), c.cfg); err == nil || err.Error() != c.want {
			if e != nil {
				e.Close()
			}
			t.Errorf("load with pooling %q: %v, want %q", c.cfg.Pooling, err, c.want)
		}
	}
}

// TestEmbedCancelled checks that a cancelled embedding request ends with the context's error.
func TestEmbedCancelled(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: enginetest.SynthModel(t, nil), CtxSize: 128, Embeddings: true})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ch, err := e.Submit(ctx, engine.Task{Kind: engine.TaskEmbed, Prompt: []int32{1, 300}})
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		return
	}
	var last engine.Result
	for r := range ch {
		last = r
	}
	if !errors.Is(last.Err, context.Canceled) || last.Embedding != nil {
		t.Errorf("cancelled: %+v", last)
	}
	// The slot is free again.
	if res := result(t, e, engine.Task{Kind: engine.TaskEmbed, Prompt: []int32{1, 300}}); len(res.Embedding) != 1 {
		t.Errorf("after a cancel: %+v", res)
	}
}
