package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// serveStories serves stories260K on the real engine with cfg over HTTP until the test ends.
func serveStories(t *testing.T, cfg Config) *httptest.Server {
	t.Helper()
	b := enginetest.Load(t, "models", "stories260K.gguf")
	srv := New(cfg, testLogger())
	srv.SetBackend(b)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	return ts
}

// genClient serves stories260K on the real engine and returns the client ogen generated from
// the same specification, pointed at it.
func genClient(t *testing.T) *gen.Client {
	t.Helper()
	ts := serveStories(t, Config{Alias: "stories260K"})
	c, err := gen.NewClient(ts.URL, gen.WithClient(ts.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// decodeRaw decodes the JSON body of a raw (x-ogen-raw-response) answer into a generated type.
func decodeRaw[T any, PT interface {
	*T
	Decode(*jx.Decoder) error
}](t *testing.T, resp *http.Response) *T {
	t.Helper()
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type = %q, want JSON", ct)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	v := new(T)
	if err := PT(v).Decode(jx.DecodeBytes(data)); err != nil {
		t.Fatalf("decoding %T: %v\n%s", v, err, data)
	}
	return v
}

// userMessage is a chat message with string content.
func userMessage(role, content string) gen.ChatMessage {
	return gen.ChatMessage{Role: role, Content: gen.NewOptNilChatMessageContent(gen.NewStringChatMessageContent(content))}
}

// TestGeneratedClient calls every JSON route through the generated Go client and checks the
// answers against llama-server's captures (shared/reference/llama-server-wire/server-default).
func TestGeneratedClient(t *testing.T) {
	c := genClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("health", func(t *testing.T) {
		h, err := c.GetHealth(ctx)
		if err != nil || h.Status != "ok" {
			t.Errorf("GetHealth = %+v, %v", h, err)
		}
	})

	t.Run("models", func(t *testing.T) {
		m, err := c.ListModels(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Object != "list" || len(m.Data) != 1 || len(m.Models) != 1 {
			t.Fatalf("ListModels = %+v", m)
		}
		d := m.Data[0]
		want := gen.ModelMeta{VocabType: true, NVocab: 512, NCtx: 512, NCtxTrain: 2048, NEmbd: 64, NParams: 292800, Size: 1171200, Ftype: "(guessed) all F32"}
		if d.ID != "stories260K" || d.OwnedBy != "llamacpp" || d.Object != "model" || d.Meta != want {
			t.Errorf("model = %+v, want stories260K owned by llamacpp with %+v", d, want)
		}
		if m.Models[0].Name != "stories260K" || m.Models[0].Details.Format != "gguf" {
			t.Errorf("models[0] = %+v", m.Models[0])
		}
	})

	t.Run("tokenize", func(t *testing.T) {
		r, err := c.Tokenize(ctx, &gen.TokenizeRequest{Content: gen.NewOptTokenizeContent(gen.NewStringTokenizeContent("Once upon a time"))})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		for _, tok := range r.Tokens {
			if tok.Type != gen.Int32TokenizeToken {
				t.Fatalf("token %+v is not an id", tok)
			}
			ids = append(ids, tok.Int32)
		}
		if want := []int32{403, 407, 261, 378}; !reflect.DeepEqual(ids, want) {
			t.Errorf("tokens = %v, want %v", ids, want)
		}

		r, err = c.Tokenize(ctx, &gen.TokenizeRequest{
			Content:    gen.NewOptTokenizeContent(gen.NewStringTokenizeContent("Once")),
			WithPieces: gen.NewOptNilBool(true),
		})
		if err != nil {
			t.Fatal(err)
		}
		want := gen.TokenPiece{ID: 403, Piece: gen.NewStringPieceText(" Once")}
		if len(r.Tokens) != 1 || r.Tokens[0].Type != gen.TokenPieceTokenizeToken || !reflect.DeepEqual(r.Tokens[0].TokenPiece, want) {
			t.Errorf("with pieces = %+v, want %+v", r.Tokens, want)
		}
	})

	t.Run("detokenize", func(t *testing.T) {
		r, err := c.Detokenize(ctx, &gen.DetokenizeRequest{Tokens: gen.NewOptNilInt32Array([]int32{1, 403, 407, 261, 378})})
		if err != nil || r.Content != "<s> Once upon a time" {
			t.Errorf("Detokenize = %+v, %v", r, err)
		}
	})

	t.Run("apply-template", func(t *testing.T) {
		r, err := c.ApplyTemplate(ctx, &gen.ApplyTemplateRequest{Messages: []gen.ChatMessage{userMessage("user", "Hi")}})
		if want := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"; err != nil || r.Prompt != want {
			t.Errorf("ApplyTemplate = %+v, %v; want %q", r, err, want)
		}
	})

	t.Run("completion", func(t *testing.T) {
		res, err := c.CreateCompletion(ctx, &gen.CompletionRequest{
			Prompt:      gen.NewStringPrompt("Once upon a time"),
			NPredict:    gen.NewOptNilInt(16),
			Temperature: gen.NewOptNilFloat64(0),
			Seed:        gen.NewOptNilInt64(42),
		})
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := res.(*gen.CreateCompletionOKRawApplicationJSON)
		if !ok {
			t.Fatalf("CreateCompletion answered %T, want JSON", res)
		}
		r := decodeRaw[gen.CompletionResponse](t, raw.Response)
		if r.Content != ", there was a little girl named Lily. She loved to play" || r.TokensPredicted != 16 ||
			r.TokensEvaluated != 5 || r.StopType != gen.CompletionResponseStopTypeLimit || r.Prompt != "<s> Once upon a time" ||
			r.Model != "stories260K" || !r.Stop || r.GenerationSettings.NPredict != 16 {
			t.Errorf("completion = %+v", r)
		}
	})

	t.Run("chat", func(t *testing.T) {
		res, err := c.CreateChatCompletion(ctx, &gen.ChatCompletionRequest{
			Model:       gen.NewOptNilString("stories260K"),
			Messages:    []gen.ChatMessage{userMessage("system", "You are a storyteller."), userMessage("user", "Tell me a story about Lily.")},
			MaxTokens:   gen.NewOptNilInt(16),
			Temperature: gen.NewOptNilFloat64(0),
			Seed:        gen.NewOptNilInt64(42),
		}, gen.CreateChatCompletionParams{})
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := res.(*gen.CreateChatCompletionOKRawApplicationJSON)
		if !ok {
			t.Fatalf("CreateChatCompletion answered %T, want JSON", res)
		}
		r := decodeRaw[gen.ChatCompletionResponse](t, raw.Response)
		if len(r.Choices) != 1 {
			t.Fatalf("choices = %+v", r.Choices)
		}
		ch := r.Choices[0]
		if ch.Message.Content.Value != "\"Here,\" Annabyed.\n" || ch.Message.Content.Null || ch.Message.Role != "assistant" || ch.FinishReason != "length" {
			t.Errorf("choice = %+v, want the chat_nonstream capture's", ch)
		}
		if r.Usage.PromptTokens != 90 || r.Usage.CompletionTokens != 16 || r.Object != "chat.completion" || r.Model != "stories260K" {
			t.Errorf("usage %+v object %q model %q", r.Usage, r.Object, r.Model)
		}
	})

	t.Run("error", func(t *testing.T) {
		_, err := c.CreateChatCompletion(ctx, &gen.ChatCompletionRequest{Messages: []gen.ChatMessage{}}, gen.CreateChatCompletionParams{})
		var e *gen.ErrorStatusCode
		if !errors.As(err, &e) || e.StatusCode != 400 || e.Response.Error.Type != "invalid_request_error" {
			t.Errorf("empty messages: %v, want a 400 invalid_request_error", err)
		}
	})

	t.Run("stream lookup", func(t *testing.T) {
		r, err := c.LookupStreams(ctx, &gen.StreamLookupRequest{Ids: []gen.StreamId{"never-started"}})
		if err != nil || !r.IsStreamLookupResponse() || len(r.StreamLookupResponse.Streams) != 0 {
			t.Errorf("LookupStreams = %+v, %v; want no streams", r, err)
		}
		r, err = c.LookupStreams(ctx, &gen.StreamLookupRequest{ConversationIds: []gen.StreamId{"never-started"}})
		if err != nil || !r.IsStreamSessionArray() || len(r.StreamSessionArray) != 0 {
			t.Errorf("LookupStreams (llama-server's form) = %+v, %v; want an empty array", r, err)
		}
		if err := c.DeleteStreamByQuery(ctx, gen.DeleteStreamByQueryParams{ConvID: "never-started"}); err != nil {
			t.Errorf("DeleteStreamByQuery of an unknown id: %v, want 204", err)
		}
		_, err = c.DeleteStream(ctx, gen.DeleteStreamParams{ID: "never-started"})
		var e *gen.ErrorStatusCode
		if !errors.As(err, &e) || e.StatusCode != 404 {
			t.Errorf("DeleteStream of an unknown id: %v, want 404", err)
		}
	})
}
