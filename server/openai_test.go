package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
)

// openaiClient is the official Go client pointed at url, without retries.
func openaiClient(url string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(url+"/v1/"),
		option.WithAPIKey("unused"),
		option.WithMaxRetries(0),
	)
}

// storyParams is the request of the chat_nonstream capture.
func storyParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model: "stories260K",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a storyteller."),
			openai.UserMessage("Tell me a story about Lily."),
		},
		MaxTokens:   openai.Int(16),
		Temperature: openai.Float(0),
		Seed:        openai.Int(42),
	}
}

func TestOpenAIClient(t *testing.T) {
	forEachBackend(t, testOpenAIClient)
}

func testOpenAIClient(t *testing.T, url string, real bool) {
	client := openaiClient(url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	resp, err := client.Chat.Completions.New(ctx, storyParams())
	if err != nil {
		t.Fatalf("non-streaming: %v", err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" {
		t.Fatalf("choices = %+v", resp.Choices)
	}
	if !strings.HasPrefix(resp.ID, "chatcmpl-") || resp.Object != "chat.completion" || resp.Model != "stories260K" {
		t.Errorf("id %q object %q model %q", resp.ID, resp.Object, resp.Model)
	}
	fr := resp.Choices[0].FinishReason
	if fr != "stop" && fr != "length" {
		t.Errorf("finish_reason = %q", fr)
	}
	u := resp.Usage
	if u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage = %+v", u)
	}
	if real {
		// chat_nonstream capture: greedy decoding of the ChatML-rendered request.
		if got, want := resp.Choices[0].Message.Content, "\"Here,\" Annabyed.\n"; got != want {
			t.Errorf("content = %q, want %q", got, want)
		}
		if u.PromptTokens != 90 || u.CompletionTokens != 16 || fr != "length" {
			t.Errorf("usage %+v finish %q, want 90 prompt and 16 completion tokens, length", u, fr)
		}
	}

	params := storyParams()
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			t.Fatalf("accumulator rejected chunk %d: %s", chunks, chunk.RawJSON())
		}
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("streaming: %v", err)
	}
	if chunks < 3 {
		t.Errorf("only %d chunks", chunks)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("accumulated choices = %+v", acc.Choices)
	}
	if got, want := acc.Choices[0].Message.Content, resp.Choices[0].Message.Content; got != want {
		t.Errorf("streamed content %q, non-streamed %q", got, want)
	}
	if acc.Choices[0].FinishReason != fr {
		t.Errorf("streamed finish_reason %q, non-streamed %q", acc.Choices[0].FinishReason, fr)
	}
	if acc.Usage.PromptTokens != u.PromptTokens || acc.Usage.CompletionTokens != u.CompletionTokens {
		t.Errorf("streamed usage %+v, non-streamed %+v", acc.Usage, u)
	}
}

func TestOpenAIClientErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string, _ bool) {
		testOpenAIClientErrors(t, url)
	})
}

func testOpenAIClientErrors(t *testing.T, url string) {
	client := openaiClient(url)
	ctx := context.Background()

	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "stories260K",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
		TopP:     openai.Float(2),
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want an *openai.Error", err)
	}
	if apiErr.StatusCode != http.StatusBadRequest || apiErr.Type != "invalid_request_error" || !strings.Contains(apiErr.Message, "top_p") {
		t.Errorf("error = %d %q %q", apiErr.StatusCode, apiErr.Type, apiErr.Message)
	}
}

// TestOpenAIClientStreamError checks the client surfaces an error that happens mid-stream.
func TestOpenAIClientStreamError(t *testing.T) {
	fake := newFakeBackend(t)
	fake.failAfter, fake.finalErr = 2, errors.New("device lost")
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(fake)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	client := openaiClient(ts.URL)
	stream := client.Chat.Completions.NewStreaming(context.Background(), storyParams())
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "device lost") {
		t.Errorf("stream error = %v, want one naming the engine failure", err)
	}
}
