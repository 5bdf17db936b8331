package server

import (
	"context"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// storyCompletion is the request of the v1_completions capture.
func storyCompletion() openai.CompletionNewParams {
	return openai.CompletionNewParams{
		Model:       "stories260K",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens:   openai.Int(16),
		Temperature: openai.Float(0),
		Seed:        openai.Int(42),
	}
}

func TestOpenAICompletions(t *testing.T) {
	forEachBackend(t, testOpenAICompletions)
}

func testOpenAICompletions(t *testing.T, url string, real bool) {
	client := openaiClient(url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	resp, err := client.Completions.New(ctx, storyCompletion())
	if err != nil {
		t.Fatalf("non-streaming: %v", err)
	}
	if len(resp.Choices) != 1 || resp.Object != "text_completion" || !strings.HasPrefix(resp.ID, "chatcmpl-") || resp.Model != "stories260K" {
		t.Fatalf("response %s", resp.RawJSON())
	}
	// The fake's story ends (EOS) after 14 tokens; the model goes on to the limit.
	wantN, wantFinish := int64(14), openai.CompletionChoiceFinishReason("stop")
	if real {
		wantN, wantFinish = 16, "length"
	}
	c := resp.Choices[0]
	if c.Index != 0 || c.FinishReason != wantFinish || c.Text == "" {
		t.Errorf("choice %s", c.RawJSON())
	}
	u := resp.Usage
	if u.CompletionTokens != wantN || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage %s", u.RawJSON())
	}
	if real {
		// The v1_completions capture.
		if want := ", there was a little girl named Lily. She loved to play"; c.Text != want {
			t.Errorf("text %q, want %q", c.Text, want)
		}
		if u.PromptTokens != 5 {
			t.Errorf("prompt tokens %d, want 5", u.PromptTokens)
		}
	}

	params := storyCompletion()
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	var chunks []openai.Completion
	for stream.Next() {
		chunks = append(chunks, stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("streaming: %v", err)
	}
	if len(chunks) < 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	for i, ch := range chunks {
		if ch.Object != "text_completion" || ch.ID != chunks[0].ID || len(ch.Choices) != 1 {
			t.Fatalf("chunk %d: %s", i, ch.RawJSON())
		}
		text.WriteString(ch.Choices[0].Text)
		last := i == len(chunks)-1
		if fr := ch.Choices[0].FinishReason; (fr != "") != last {
			t.Errorf("chunk %d has finish_reason %q", i, fr)
		}
		if ch.JSON.Usage.Valid() != last {
			t.Errorf("chunk %d: usage %v", i, ch.JSON.Usage.Valid())
		}
	}
	final := chunks[len(chunks)-1]
	if final.Choices[0].Text != "" || final.Choices[0].FinishReason != wantFinish || final.Usage.CompletionTokens != wantN || final.Usage.PromptTokens != u.PromptTokens {
		t.Errorf("final chunk %s", final.RawJSON())
	}
	if text.String() != c.Text {
		t.Errorf("streamed %q, non-streamed %q", text.String(), c.Text)
	}

	// Several prompts: one choice each, in order; the usage adds up.
	multi := storyCompletion()
	multi.Prompt = openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: []string{"Once upon a time", "Once upon a time"}}
	mresp, err := client.Completions.New(ctx, multi)
	if err != nil {
		t.Fatalf("several prompts: %v", err)
	}
	if len(mresp.Choices) != 2 || mresp.Choices[0].Index != 0 || mresp.Choices[1].Index != 1 {
		t.Fatalf("several prompts: %s", mresp.RawJSON())
	}
	for _, ch := range mresp.Choices {
		if ch.Text != c.Text {
			t.Errorf("choice %d: %q, want %q (greedy, same prompt)", ch.Index, ch.Text, c.Text)
		}
	}
	if mresp.Usage.CompletionTokens != 2*wantN || mresp.Usage.PromptTokens != 2*u.PromptTokens {
		t.Errorf("several prompts: usage %s", mresp.Usage.RawJSON())
	}

	// Token arrays and n (at most the slots: the engine here has one, the fake two): every
	// prompt is completed n times.
	n := int64(2)
	if real {
		n = 1
	}
	tokens := storyCompletion()
	tokens.Prompt = openai.CompletionNewParamsPromptUnion{OfArrayOfTokenArrays: [][]int64{{1, 100, 101}, {1, 100}}}
	tokens.N = openai.Int(n)
	tokens.MaxTokens = openai.Int(4)
	tresp, err := client.Completions.New(ctx, tokens)
	if err != nil {
		t.Fatalf("token prompts: %v", err)
	}
	if int64(len(tresp.Choices)) != 2*n || tresp.Usage.PromptTokens != n*(3+2) {
		t.Fatalf("token prompts: %s", tresp.RawJSON())
	}
	for i, ch := range tresp.Choices {
		if ch.Index != int64(i) {
			t.Errorf("choice %d has index %d", i, ch.Index)
		}
	}
	if !real && tresp.Choices[0].Text != tresp.Choices[1].Text {
		t.Errorf("the fake's choices differ: %q", []string{tresp.Choices[0].Text, tresp.Choices[1].Text})
	}
}

// TestOAICompletionLogprobs checks that logprobs on /v1/completions gives llama-server's
// per-token probabilities: on the real engine, those of the completion_nprobs capture (same
// prompt, n_probs 3), whole when not streaming and one step per chunk when streaming.
func TestOAICompletionLogprobs(t *testing.T) {
	raw, err := os.ReadFile(shareddata.Path(t, "reference", "llama-server-wire", "server-default", "completion_nprobs.body"))
	if err != nil {
		t.Fatal(err)
	}
	var want []capturedProb
	remarshal(t, decodeJSON(t, raw)["completion_probabilities"], &want)
	b := enginetest.Load(t, "models", "stories260K.gguf")
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(b)
	h := &harness{srv: srv, h: srv.Handler()}

	const body = `{"prompt":"Once upon a time","max_tokens":2,"temperature":0,"logprobs":3`
	rec := h.do(t, http.MethodPost, "/v1/completions", body+"}")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var got []capturedProb
	remarshal(t, lookup(t, decodeJSON(t, rec.Body.Bytes()), "choices.0.logprobs.content"), &got)
	rec = h.do(t, http.MethodPost, "/v1/completions", body+`,"stream":true}`)
	var streamed []capturedProb
	for _, ev := range sseEvents(t, rec.Body.String()) {
		if ev == "[DONE]" {
			continue
		}
		if lp := lookup(t, decodeAny(t, []byte(ev)), "choices.0.logprobs"); lp != nil {
			var step []capturedProb
			remarshal(t, lp.(map[string]any)["content"], &step)
			if len(step) != 1 {
				t.Fatalf("a chunk with %d steps: %s", len(step), ev)
			}
			streamed = append(streamed, step...)
		}
	}
	for name, g := range map[string][]capturedProb{"non-streamed": got, "streamed": streamed} {
		if len(g) != len(want) {
			t.Fatalf("%s: %d steps, want %d", name, len(g), len(want))
		}
		for i := range want {
			if g[i].ID != want[i].ID || g[i].Token != want[i].Token || len(g[i].Top) != len(want[i].Top) || abs(g[i].Logprob-want[i].Logprob) > 0.02 {
				t.Errorf("%s step %d: got %+v, want %+v", name, i, g[i], want[i])
			}
		}
	}
	// Without logprobs the field is null.
	rec = h.do(t, http.MethodPost, "/v1/completions", `{"prompt":"Once","max_tokens":2}`)
	if got := lookup(t, decodeJSON(t, rec.Body.Bytes()), "choices.0.logprobs"); got != nil {
		t.Errorf("logprobs %v, want null", got)
	}
}

func TestOAICompletionErrors(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		body, want string
	}{
		{`{"prompt":"x","echo":true}`, "Only no echo is supported"},
		{`{"prompt":"x","best_of":2}`, "Unsupported param: best_of"},
		{`{"prompt":"x","suffix":"y"}`, "Unsupported param: suffix"},
		{`{"prompt":"x","n":3}`, "n_cmpl cannot be greater than the number of slots, please increase -np"},
		{`{"prompt":[]}`, "the prompt is empty"},
		{`{"prompt":[1,[2]]}`, "'prompt[1]': a prompt of token ids may hold only token ids and strings"},
		{`{"prompt":[[1,999999]]}`, "'prompt[0]' token 999999 is out of range"},
		{`{"max_tokens":2}`, "'prompt' is required"},
	}
	for _, tt := range tests {
		rec := h.do(t, "POST", "/v1/completions", tt.body)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d: %s", tt.body, rec.Code, rec.Body)
			continue
		}
		if msg := lookup(t, decodeJSON(t, rec.Body.Bytes()), "error.message").(string); !strings.Contains(msg, tt.want) {
			t.Errorf("%s: message %q, want it to contain %q", tt.body, msg, tt.want)
		}
	}
}

// TestSumResults: several choices' statistics add up field by field, speculative ones included.
func TestSumResults(t *testing.T) {
	a := engine.Result{TokensEvaluated: 3, TokensPredicted: 5, Timings: engine.Timings{CacheN: 1, PromptN: 2, Prompt: 3, PredictedN: 5, Predicted: 7, DraftN: 8, DraftNAccepted: 6}}
	b := engine.Result{TokensEvaluated: 4, TokensPredicted: 2, Timings: engine.Timings{CacheN: 2, PromptN: 2, Prompt: 1, PredictedN: 2, Predicted: 1, DraftN: 2, DraftNAccepted: 1}}
	got := sumResults([]engine.Result{a, b})
	want := engine.Result{TokensEvaluated: 7, TokensPredicted: 7, Timings: engine.Timings{CacheN: 3, PromptN: 4, Prompt: 4, PredictedN: 7, Predicted: 8, DraftN: 10, DraftNAccepted: 7}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sum %+v, want %+v", got, want)
	}
}
