package server

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// Streaming through the generated client: openapi.yaml marks both media types of the
// completion operations x-ogen-raw-response, so ogen does not decode their SSE; the client
// hands back the *http.Response unread (the ...OKRawTextEventStream variants). These tests read
// its event stream themselves and decode each event's data with the generated chunk types,
// which is what the specification says the data is.

// storyText is stories260K's greedy continuation of "Once upon a time", 16 tokens.
const storyText = ", there was a little girl named Lily. She loved to play"

// storyTokens are those 16 tokens (the completion_stream capture's, continued).
var storyTokens = []int32{432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337}

// genEngineClient serves stories260K on an engine loaded as ecfg says (the shared model when
// ecfg.ModelPath is empty) behind a server configured as scfg, and returns the generated client
// pointed at it.
func genEngineClient(t *testing.T, ecfg engine.Config, scfg Config) *gen.Client {
	t.Helper()
	if ecfg.ModelPath == "" {
		ecfg.ModelPath = shareddata.Path(t, "models", "stories260K.gguf")
	}
	if ecfg.CtxSize == 0 {
		ecfg.CtxSize = 512
	}
	b := enginetest.LoadConfig(t, ecfg)
	scfg.Alias = "stories260K"
	srv := New(scfg, testLogger())
	srv.SetBackend(b)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	c, err := gen.NewClient(ts.URL, gen.WithClient(ts.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sseEvent is one server-sent event: its name ("" when unnamed) and data.
type sseEvent struct {
	name string
	data []byte
}

// readEventStream reads a raw event-stream answer to its end.
func readEventStream(t *testing.T, resp *http.Response) []sseEvent {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	wantStreamHeaders(t, resp.Header)
	var events []sseEvent
	var ev sseEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.data == nil {
				t.Fatalf("an event without data after %d events", len(events))
			}
			events = append(events, ev)
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = []byte(strings.TrimPrefix(line, "data: "))
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if ev.data != nil {
		t.Fatalf("the stream ends inside an event")
	}
	return events
}

// decodeEvent decodes one event's data into a generated type.
func decodeEvent[T any, PT interface {
	*T
	Decode(*jx.Decoder) error
}](t *testing.T, ev sseEvent) *T {
	t.Helper()
	v := new(T)
	if err := PT(v).Decode(jx.DecodeBytes(ev.data)); err != nil {
		t.Fatalf("decoding %T: %v\n%s", v, err, ev.data)
	}
	return v
}

// openAIChunks decodes an OpenAI-style stream, which must end with [DONE].
func openAIChunks[T any, PT interface {
	*T
	Decode(*jx.Decoder) error
}](t *testing.T, events []sseEvent) []*T {
	t.Helper()
	if len(events) == 0 || string(events[len(events)-1].data) != "[DONE]" {
		t.Fatalf("the stream does not end with [DONE]")
	}
	var out []*T
	for _, ev := range events[:len(events)-1] {
		out = append(out, decodeEvent[T, PT](t, ev))
	}
	return out
}

// storyChatRequest is the chat_nonstream capture's request.
func storyChatRequest() *gen.ChatCompletionRequest {
	return &gen.ChatCompletionRequest{
		Model:       gen.NewOptNilString("stories260K"),
		Messages:    []gen.ChatMessage{userMessage("system", "You are a storyteller."), userMessage("user", "Tell me a story about Lily.")},
		MaxTokens:   gen.NewOptNilInt(16),
		Temperature: gen.NewOptNilFloat64(0),
		Seed:        gen.NewOptNilInt64(42),
	}
}

// storyCompletionRequest asks for 16 greedy tokens after "Once upon a time".
func storyCompletionRequest() *gen.CompletionRequest {
	return &gen.CompletionRequest{
		Model:       gen.NewOptNilString("stories260K"),
		Prompt:      gen.NewStringPrompt("Once upon a time"),
		MaxTokens:   gen.NewOptNilInt(16),
		Temperature: gen.NewOptNilFloat64(0),
		Seed:        gen.NewOptNilInt64(42),
	}
}

// TestGeneratedClientStreams drives the generation endpoints genclient_test.go leaves out
// through the generated client: chat and /completion streamed, /v1/completions whole and
// streamed, and /v1/messages whole, streamed and counted.
func TestGeneratedClientStreams(t *testing.T) {
	c := genEngineClient(t, engine.Config{}, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("chat stream", func(t *testing.T) {
		req := storyChatRequest()
		req.Stream = gen.NewOptNilBool(true)
		req.StreamOptions = gen.NewOptNilStreamOptions(gen.StreamOptions{IncludeUsage: gen.NewOptNilBool(true)})
		res, err := c.CreateChatCompletion(ctx, req, gen.CreateChatCompletionParams{})
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := res.(*gen.CreateChatCompletionOKRawTextEventStream)
		if !ok {
			t.Fatalf("CreateChatCompletion answered %T, want an event stream", res)
		}
		chunks := openAIChunks[gen.ChatCompletionChunk](t, readEventStream(t, raw.Response))
		// The role chunk, 16 content chunks, the finish chunk and the usage chunk.
		if len(chunks) != 19 {
			t.Fatalf("%d chunks, want 19", len(chunks))
		}
		var text strings.Builder
		var finishes []string
		for i, ch := range chunks {
			if ch.ID != chunks[0].ID || !strings.HasPrefix(ch.ID, "chatcmpl-") || ch.Object != "chat.completion.chunk" || ch.Model != "stories260K" {
				t.Errorf("chunk %d: id %q object %q model %q", i, ch.ID, ch.Object, ch.Model)
			}
			for _, choice := range ch.Choices {
				text.WriteString(choice.Delta.Content.Or(""))
				if !choice.FinishReason.Null {
					finishes = append(finishes, choice.FinishReason.Value)
				}
			}
		}
		if role := chunks[0].Choices[0].Delta; role.Role.Or("") != "assistant" || !role.Content.Null {
			t.Errorf("first delta %+v, want the assistant role with null content", role)
		}
		if got, want := text.String(), "\"Here,\" Annabyed.\n"; got != want {
			t.Errorf("streamed content %q, want the chat_nonstream capture's %q", got, want)
		}
		if len(finishes) != 1 || finishes[0] != "length" {
			t.Errorf("finish reasons %q, want one length", finishes)
		}
		last := chunks[len(chunks)-1]
		u, ok := last.Usage.Get()
		if len(last.Choices) != 0 || !ok || u.PromptTokens != 90 || u.CompletionTokens != 16 || u.TotalTokens != 106 || !last.Timings.Set {
			t.Errorf("usage chunk %+v, want 90 prompt and 16 completion tokens with timings", last)
		}
	})

	t.Run("completion stream", func(t *testing.T) {
		req := storyCompletionRequest()
		req.Stream = gen.NewOptNilBool(true)
		res, err := c.CreateCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := res.(*gen.CreateCompletionOKRawTextEventStream)
		if !ok {
			t.Fatalf("CreateCompletion answered %T, want an event stream", res)
		}
		events := readEventStream(t, raw.Response) // llama.cpp's native stream has no [DONE]
		if len(events) != 17 {
			t.Fatalf("%d events, want 16 tokens and the final one", len(events))
		}
		var text strings.Builder
		var ids []int32
		for i, ev := range events {
			ch := decodeEvent[gen.CompletionChunk](t, ev)
			text.WriteString(ch.Content)
			ids = append(ids, ch.Tokens...)
			wantPredicted := min(i+1, 16)
			if ch.Index != 0 || ch.TokensEvaluated != 5 || ch.TokensPredicted != wantPredicted || ch.Stop != (i == 16) {
				t.Errorf("chunk %d: index %d evaluated %d predicted %d stop %v", i, ch.Index, ch.TokensEvaluated, ch.TokensPredicted, ch.Stop)
			}
		}
		if text.String() != storyText || !reflect.DeepEqual(ids, storyTokens) {
			t.Errorf("streamed %q %v, want %q %v", text.String(), ids, storyText, storyTokens)
		}
	})

	t.Run("v1 completions", func(t *testing.T) {
		res, err := c.CreateOAICompletion(ctx, storyCompletionRequest())
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := res.(*gen.CreateOAICompletionOKRawApplicationJSON)
		if !ok {
			t.Fatalf("CreateOAICompletion answered %T, want JSON", res)
		}
		r := decodeRaw[gen.OAICompletionResponse](t, raw.Response)
		if len(r.Choices) != 1 {
			t.Fatalf("choices %+v", r.Choices)
		}
		ch := r.Choices[0]
		if ch.Text != storyText || ch.Index != 0 || !ch.Logprobs.Null || ch.FinishReason.Null || ch.FinishReason.Value != "length" {
			t.Errorf("choice %+v, want the v1_completions capture's", ch)
		}
		u, ok := r.Usage.Get()
		if !ok || u.PromptTokens != 5 || u.CompletionTokens != 16 || u.TotalTokens != 21 {
			t.Errorf("usage %+v, want 5 + 16 = 21", r.Usage)
		}
		if r.Object != "text_completion" || r.Model != "stories260K" || !strings.HasPrefix(r.ID, "chatcmpl-") || r.SystemFingerprint != DefaultSystemFingerprint {
			t.Errorf("object %q model %q id %q fingerprint %q", r.Object, r.Model, r.ID, r.SystemFingerprint)
		}
	})

	t.Run("v1 completions stream", func(t *testing.T) {
		req := storyCompletionRequest()
		req.Stream = gen.NewOptNilBool(true)
		res, err := c.CreateOAICompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := res.(*gen.CreateOAICompletionOKRawTextEventStream)
		if !ok {
			t.Fatalf("CreateOAICompletion answered %T, want an event stream", res)
		}
		chunks := openAIChunks[gen.OAICompletionResponse](t, readEventStream(t, raw.Response))
		if len(chunks) != 17 {
			t.Fatalf("%d chunks, want 16 with text and the finish", len(chunks))
		}
		var text strings.Builder
		for i, ch := range chunks {
			if len(ch.Choices) != 1 || ch.ID != chunks[0].ID || ch.Object != "text_completion" {
				t.Fatalf("chunk %d: %+v", i, ch)
			}
			text.WriteString(ch.Choices[0].Text)
			if final := i == 16; ch.Choices[0].FinishReason.Null == final || ch.Usage.Set != final {
				t.Errorf("chunk %d: finish_reason %+v usage %+v", i, ch.Choices[0].FinishReason, ch.Usage)
			}
		}
		last := chunks[16]
		if text.String() != storyText || last.Choices[0].FinishReason.Value != "length" || last.Usage.Value.CompletionTokens != 16 || last.Usage.Value.PromptTokens != 5 {
			t.Errorf("streamed %q, finish %+v, usage %+v", text.String(), last.Choices[0].FinishReason, last.Usage)
		}
	})

	anthropicReq := func() *gen.AnthropicMessagesRequest {
		return &gen.AnthropicMessagesRequest{
			Model:       gen.NewOptNilString("stories260K"),
			System:      gen.NewOptNilAnthropicSystem(gen.NewStringAnthropicSystem("You are a storyteller.")),
			Messages:    []gen.AnthropicInputMessage{{Role: "user", Content: gen.NewOptNilAnthropicContent(gen.NewStringAnthropicContent("Tell me a story about Lily."))}},
			MaxTokens:   gen.NewOptNilInt(16),
			Temperature: gen.NewOptNilFloat64(0),
		}
	}

	t.Run("messages", func(t *testing.T) {
		res, err := c.CreateAnthropicMessage(ctx, anthropicReq())
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := res.(*gen.CreateAnthropicMessageOKRawApplicationJSON)
		if !ok {
			t.Fatalf("CreateAnthropicMessage answered %T, want JSON", res)
		}
		m := decodeRaw[gen.AnthropicMessage](t, raw.Response)
		// The chat_nonstream capture's conversation renders the same prompt and text.
		if len(m.Content) != 1 || m.Content[0].Type != "text" || m.Content[0].Text.Or("") != "\"Here,\" Annabyed.\n" {
			t.Fatalf("content %+v", m.Content)
		}
		if m.Type != "message" || m.Role != "assistant" || m.Model != "stories260K" || !strings.HasPrefix(m.ID, "chatcmpl-") ||
			m.StopReason.Value != "max_tokens" || !m.StopSequence.Null {
			t.Errorf("message %+v", m)
		}
		// The prompt cache may hold the conversation from an earlier subtest: the prompt's
		// 90 tokens are the cached and the evaluated together.
		if in, ok := m.Usage.InputTokens.Get(); !ok || in+m.Usage.CacheReadInputTokens.Or(0) != 90 || m.Usage.OutputTokens != 16 {
			t.Errorf("usage %+v, want 90 input (cached and not) and 16 output tokens", m.Usage)
		}
	})

	t.Run("messages stream", func(t *testing.T) {
		req := anthropicReq()
		req.Stream = gen.NewOptNilBool(true)
		res, err := c.CreateAnthropicMessage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := res.(*gen.CreateAnthropicMessageOKRawTextEventStream)
		if !ok {
			t.Fatalf("CreateAnthropicMessage answered %T, want an event stream", res)
		}
		var names []string
		var text strings.Builder
		var delta *gen.AnthropicStreamEvent
		for _, ev := range readEventStream(t, raw.Response) {
			e := decodeEvent[gen.AnthropicStreamEvent](t, ev)
			if e.Type != ev.name {
				t.Errorf("event %q carries type %q", ev.name, e.Type)
			}
			if n := len(names); n == 0 || names[n-1] != e.Type {
				names = append(names, e.Type)
			}
			switch e.Type {
			case "message_start":
				u := e.Message.Value.Usage
				if in := u.InputTokens.Or(0) + u.CacheReadInputTokens.Or(0); in != 90 {
					t.Errorf("message_start input tokens %d (cached and not), want 90", in)
				}
			case "content_block_delta":
				text.WriteString(e.Delta.Value.Text.Or(""))
			case "message_delta":
				delta = e
			}
		}
		want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
		if !reflect.DeepEqual(names, want) {
			t.Errorf("events %v, want %v", names, want)
		}
		if text.String() != "\"Here,\" Annabyed.\n" {
			t.Errorf("streamed text %q", text.String())
		}
		if delta == nil || delta.Delta.Value.StopReason.Value != "max_tokens" || delta.Usage.Value.OutputTokens != 16 {
			t.Errorf("message_delta %+v, want max_tokens after 16 tokens", delta)
		}
	})

	t.Run("count tokens", func(t *testing.T) {
		r, err := c.CountAnthropicTokens(ctx, anthropicReq())
		if err != nil || r.InputTokens != 90 {
			t.Errorf("CountAnthropicTokens = %+v, %v; want 90, the messages' input tokens", r, err)
		}
	})
}
