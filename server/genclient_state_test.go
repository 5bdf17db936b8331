package server

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestGeneratedClientServerState reads /slots, /props and /metrics through the generated client
// on a fresh engine after exactly one greedy /completion of 16 tokens, so every count is known.
func TestGeneratedClientServerState(t *testing.T) {
	c := genEngineClient(t, engine.Config{}, Config{Metrics: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	res, err := c.CreateCompletion(ctx, storyCompletionRequest())
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := res.(*gen.CreateCompletionOKRawApplicationJSON)
	if !ok {
		t.Fatalf("CreateCompletion answered %T, want JSON", res)
	}
	if r := decodeRaw[gen.CompletionResponse](t, raw.Response); r.Content != storyText || r.TokensPredicted != 16 || r.TokensEvaluated != 5 {
		t.Fatalf("completion %q, %d predicted, %d evaluated", r.Content, r.TokensPredicted, r.TokensEvaluated)
	}

	t.Run("slots", func(t *testing.T) {
		got, err := c.GetSlots(ctx, gen.GetSlotsParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got.XQueueLength != 0 || got.XQueueLimit != 0 {
			t.Errorf("X-Queue-Length %d, X-Queue-Limit %d; want 0, 0 (idle, no --max-queue)", got.XQueueLength, got.XQueueLimit)
		}
		slots := got.Response
		if len(slots) != 1 {
			t.Fatalf("%d slots, want 1", len(slots))
		}
		s := slots[0]
		// The slot holds the prompt and the 15 tokens fed back (the last one never is).
		if s.ID != 0 || s.NCtx != 512 || s.IsProcessing || s.Speculative || s.NPromptTokens.Or(-1) != 20 {
			t.Errorf("slot %+v, want slot 0 of 512 tokens, idle, holding 20 tokens", s)
		}
		p, ok := s.Params.Get()
		if !ok || p.NPredict != 16 || p.MaxTokens != 16 || p.Temperature != 0 || p.Seed != 42 || p.TopK != 40 || p.Stream {
			t.Errorf("params %+v, want the completion's (16 tokens, temperature 0, seed 42)", s.Params)
		}
		if len(s.NextToken) != 1 || s.NextToken[0].HasNextToken {
			t.Errorf("next_token %+v, want one with has_next_token false", s.NextToken)
		}
		// fail_on_no_slot only fails when every slot is busy.
		if again, err := c.GetSlots(ctx, gen.GetSlotsParams{FailOnNoSlot: gen.NewOptString("1")}); err != nil || len(again.Response) != 1 {
			t.Errorf("GetSlots(fail_on_no_slot) with an idle slot = %v, %v", again, err)
		}
	})

	t.Run("props", func(t *testing.T) {
		p, err := c.GetProps(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p.ModelAlias != "stories260K" || p.TotalSlots != 1 || p.ModelFtype != "(guessed) all F32" ||
			p.ModelPath != shareddata.Path(t, "models", "stories260K.gguf") || p.BosToken != "<s>" || p.EosToken != "</s>" {
			t.Errorf("model: alias %q slots %d ftype %q path %q bos %q eos %q", p.ModelAlias, p.TotalSlots, p.ModelFtype, p.ModelPath, p.BosToken, p.EosToken)
		}
		if !p.EndpointMetrics || !p.EndpointSlots || p.EndpointProps || p.IsSleeping || p.BuildInfo != DefaultSystemFingerprint {
			t.Errorf("endpoints: metrics %v slots %v props %v; sleeping %v build %q", p.EndpointMetrics, p.EndpointSlots, p.EndpointProps, p.IsSleeping, p.BuildInfo)
		}
		d := p.DefaultGenerationSettings
		if d.NCtx != 512 || d.Params.NPredict != -1 || d.Params.Temperature != float64(float32(0.8)) || d.Params.Seed != 4294967295 || d.Params.TopK != 40 {
			t.Errorf("default_generation_settings %+v", d)
		}
		// No template in the GGUF: ChatML, which knows neither tools nor typed content.
		if caps := p.ChatTemplateCaps; caps.SupportsTools || caps.SupportsToolCalls || !caps.SupportsSystemRole || !caps.SupportsStringContent {
			t.Errorf("chat_template_caps %+v", caps)
		}
		if p.Modalities.Vision || p.Modalities.Audio {
			t.Errorf("modalities %+v", p.Modalities)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		res, err := c.GetMetrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := res.(*gen.GetMetricsOKRawTextPlain)
		if !ok {
			t.Fatalf("GetMetrics answered %T, want text", res)
		}
		defer raw.Response.Body.Close()
		if ct := raw.Response.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4" {
			t.Errorf("Content-Type %q", ct)
		}
		body, err := io.ReadAll(raw.Response.Body)
		if err != nil {
			t.Fatal(err)
		}
		m := parseMetrics(t, string(body))
		for _, tt := range []struct {
			name   string
			labels []string
			want   float64
		}{
			{"llamacpp:prompt_tokens_total", nil, 5},
			{"llamacpp:prompt_tokens_cached_total", nil, 0},
			{"llamacpp:tokens_predicted_total", nil, 16},
			{"llamacpp:n_decode_total", nil, 16},
			{"llamacpp:n_tokens_max", nil, 20}, // the slot's 20 tokens, as /slots reports
			{"llamacpp:requests_processing", nil, 0},
			{"llamacpp:requests_deferred", nil, 0},
			{"wgpu_llama_http_requests_total", []string{"path", "/completion", "status", "200"}, 1},
			{"wgpu_llama_http_requests_total", []string{"path", "/slots", "status", "200"}, 2},
			{"wgpu_llama_http_requests_total", []string{"path", "/props", "status", "200"}, 1},
		} {
			if got := value(t, m, tt.name, tt.labels...); got != tt.want {
				t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
			}
		}
	})
}

// TestGeneratedClientEmbeddings calls /v1/embeddings, /embedding and /embeddings through the
// generated client on an engine started with embeddings (mean pooling, as the server-embeddings
// captures): llama-server's vectors within 1e-3 relative error, and its counts exactly.
func TestGeneratedClientEmbeddings(t *testing.T) {
	c := genEngineClient(t, engine.Config{Embeddings: true, Pooling: "mean"}, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// captured is the i-th vector of a capture, from its floats or base64.
	captured := func(name string, i int) []float32 {
		v := decodeAny(t, loadCaptureIn(t, "server-embeddings", name).respBody)
		if name == "embedding_native" {
			return floats(v.([]any)[i].(map[string]any)["embedding"])
		}
		switch e := v.(map[string]any)["data"].([]any)[i].(map[string]any)["embedding"].(type) {
		case string:
			return decodeBase64Floats(t, e)
		default:
			return floats(e)
		}
	}
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	wantVector := func(what string, got, want []float32) {
		t.Helper()
		if len(got) != 64 || len(want) != 64 {
			t.Errorf("%s: %d values, llama-server %d, want 64 (n_embd)", what, len(got), len(want))
			return
		}
		if e := cpuref.RelErr(got, want); e > 1e-3 {
			t.Errorf("%s: relative error %.3g from llama-server", what, e)
		}
	}

	t.Run("v1 batch", func(t *testing.T) {
		r, err := c.CreateEmbedding(ctx, &gen.EmbeddingRequest{
			Model: gen.NewOptNilString("stories260K"),
			Input: gen.NewOptNilEmbeddingInput(gen.NewEmbeddingInputItemArrayEmbeddingInput([]gen.EmbeddingInputItem{
				gen.NewStringEmbeddingInputItem("Once upon a time"), gen.NewStringEmbeddingInputItem("Lily"),
			})),
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, ok := r.GetEmbeddingResponse()
		if !ok {
			t.Fatalf("CreateEmbedding answered %s, want OpenAI's list", r.Type)
		}
		// "Once upon a time" is 5 tokens with BOS, "Lily" 2.
		if resp.Object != "list" || resp.Model != "stories260K" || resp.Usage.PromptTokens != 7 || resp.Usage.TotalTokens != 7 || len(resp.Data) != 2 {
			t.Fatalf("response object %q model %q usage %+v, %d vectors", resp.Object, resp.Model, resp.Usage, len(resp.Data))
		}
		for i, d := range resp.Data {
			if d.Index != i || d.Object != "embedding" || d.Embedding.Type != gen.Float64ArrayEmbeddingVector || d.EncodingFormat.Set {
				t.Errorf("data[%d]: index %d object %q vector %s encoding %+v", i, d.Index, d.Object, d.Embedding.Type, d.EncodingFormat)
				continue
			}
			wantVector("data", f32(d.Embedding.Float64Array), captured("v1_embeddings_batch", i))
		}
	})

	t.Run("v1 base64", func(t *testing.T) {
		r, err := c.CreateEmbedding(ctx, &gen.EmbeddingRequest{
			Input:          gen.NewOptNilEmbeddingInput(gen.NewStringEmbeddingInput("Lily")),
			EncodingFormat: gen.NewOptNilString("base64"),
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, ok := r.GetEmbeddingResponse()
		if !ok || len(resp.Data) != 1 || resp.Usage.PromptTokens != 2 || resp.Model != "stories260K" {
			t.Fatalf("CreateEmbedding = %+v", r)
		}
		d := resp.Data[0]
		if d.Embedding.Type != gen.StringEmbeddingVector {
			t.Fatalf("embedding is %s, want a base64 string", d.Embedding.Type)
		}
		wantVector("base64", decodeBase64Floats(t, d.Embedding.String), captured("v1_embeddings_base64", 0))
	})

	native := func(t *testing.T, name string, call func(context.Context, *gen.EmbeddingRequest) (gen.NativeEmbeddingResponse, error)) {
		r, err := call(ctx, &gen.EmbeddingRequest{Content: gen.NewOptNilEmbeddingInput(gen.NewStringEmbeddingInput("Once upon a time"))})
		if err != nil {
			t.Fatal(err)
		}
		if len(r) != 1 || r[0].Index != 0 || len(r[0].Embedding) != 1 {
			t.Fatalf("%s = %d results, want one pooled vector at index 0", name, len(r))
		}
		wantVector(name, f32(r[0].Embedding[0]), captured("embedding_native", 0))
	}
	t.Run("embedding", func(t *testing.T) { native(t, "/embedding", c.CreateEmbeddingNative) })
	t.Run("embeddings alias", func(t *testing.T) { native(t, "/embeddings", c.CreateEmbeddingNativeAlias) })

	t.Run("empty input", func(t *testing.T) {
		_, err := c.CreateEmbedding(ctx, &gen.EmbeddingRequest{
			Input: gen.NewOptNilEmbeddingInput(gen.NewEmbeddingInputItemArrayEmbeddingInput([]gen.EmbeddingInputItem{})),
		})
		var e *gen.ErrorStatusCode
		if !errors.As(err, &e) || e.StatusCode != 400 || e.Response.Error.Type != "invalid_request_error" {
			t.Errorf("no inputs: %v, want a 400 invalid_request_error", err)
		}
	})
}
