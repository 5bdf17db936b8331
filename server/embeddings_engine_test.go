package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/reference"
)

// serveEngine serves an engine loaded as cfg says on a loopback port, named "stories260K" as
// in the captures, and returns its URL.
func serveEngine(t *testing.T, cfg engine.Config) (string, *engine.Engine) {
	t.Helper()
	e := enginetest.LoadConfig(t, cfg)
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(e)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL, e
}

// post sends a JSON body and returns the status and body.
func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// keyOrder lists a JSON document's object keys in the order they appear, with their paths.
func keyOrder(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object bool
		key    string
	}
	var stack []frame
	var keys []string
	expectKey := func() bool { return len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].key == "" }
	path := func() string {
		var parts []string
		for _, f := range stack {
			if f.key != "" {
				parts = append(parts, f.key)
			}
		}
		return strings.Join(parts, ".")
	}
	valueDone := func() {
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = ""
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return keys
		}
		if err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				stack = append(stack, frame{object: v == '{'})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if expectKey() {
				stack[len(stack)-1].key = v
				keys = append(keys, path())
				continue
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

// floats collects every number in a decoded JSON value, depth first.
func floats(v any) []float32 {
	var out []float32
	switch x := v.(type) {
	case float64:
		out = append(out, float32(x))
	case []any:
		for _, e := range x {
			out = append(out, floats(e)...)
		}
	}
	return out
}

// decodeBase64Floats reads an OpenAI base64 embedding.
func decodeBase64Floats(t *testing.T, s string) []float32 {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw)%4 != 0 {
		t.Fatalf("base64 %q: %v", s, err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// TestEmbeddingsWireFormat replays the server-embeddings captures (llama-server --embeddings
// --pooling mean on stories260K) against the engine: the status and content type, the keys in
// llama-server's order, the scalars exactly and the vectors within 1e-3 relative error.
func TestEmbeddingsWireFormat(t *testing.T) {
	url, _ := serveEngine(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 512, Embeddings: true, Pooling: "mean"})
	for _, name := range []string{"embedding_native", "v1_embeddings", "v1_embeddings_base64", "v1_embeddings_batch", "health", "completion_on_embedding_server"} {
		t.Run(name, func(t *testing.T) {
			c := loadCaptureIn(t, "server-embeddings", name)
			req, err := http.NewRequest(c.method, url+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != c.header.Get("Content-Type") {
				t.Fatalf("%d %s: %s, llama-server %d %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, c.status, c.header.Get("Content-Type"))
			}
			want, got := decodeAny(t, c.respBody), decodeAny(t, body)
			if name == "completion_on_embedding_server" { // sampled at temperature 0.8: the shape only
				compareShape(t, name, want, got)
				return
			}
			if w, g := keyOrder(t, c.respBody), keyOrder(t, body); !slices.Equal(w, g) {
				t.Errorf("keys %v\nllama-server %v", g, w)
			}
			compareShape(t, name, want, got)
			compareEmbeddingValues(t, name, want, got)
		})
	}
}

// compareEmbeddingValues compares decoded answers: vectors (arrays of numbers, or base64
// strings under "embedding") within 1e-3 relative error, everything else exactly.
func compareEmbeddingValues(t *testing.T, path string, want, got any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		for k, wv := range w {
			if s, ok := wv.(string); ok && k == "embedding" {
				if e := cpuref.RelErr(decodeBase64Floats(t, g[k].(string)), decodeBase64Floats(t, s)); e > 1e-3 {
					t.Errorf("%s.%s: base64 vector relative error %.3g", path, k, e)
				}
				continue
			}
			compareEmbeddingValues(t, path+"."+k, wv, g[k])
		}
	case []any:
		g := got.([]any)
		if len(w) != len(g) {
			t.Errorf("%s: %d elements, llama-server %d", path, len(g), len(w))
			return
		}
		if len(w) > 0 {
			if _, isNum := w[0].(float64); isNum {
				if e := cpuref.RelErr(floats(g), floats(w)); e > 1e-3 {
					t.Errorf("%s: vector relative error %.3g", path, e)
				}
				return
			}
		}
		for i := range w {
			compareEmbeddingValues(t, path, w[i], g[i])
		}
	default:
		if !bytes.Equal(mustMarshal(t, want), mustMarshal(t, got)) {
			t.Errorf("%s = %v, llama-server %v", path, got, want)
		}
	}
}

// TestOpenAIEmbeddings drives /v1/embeddings with the official Go client, as floats and as
// base64, for one input and for a batch: llama-server's vectors (captures) and usage.
func TestOpenAIEmbeddings(t *testing.T) {
	url, _ := serveEngine(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 512, Slots: 2, Embeddings: true, Pooling: "mean"})
	client := openaiClient(url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	capturedVector := func(name string, i int) []float32 {
		data := decodeAny(t, loadCaptureIn(t, "server-embeddings", name).respBody).(map[string]any)["data"].([]any)
		switch v := data[i].(map[string]any)["embedding"].(type) {
		case string:
			return decodeBase64Floats(t, v)
		default:
			return floats(v)
		}
	}

	resp, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "stories260K",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"Once upon a time", "Lily"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Object != "list" || resp.Model != "stories260K" || len(resp.Data) != 2 || resp.Usage.PromptTokens != 7 || resp.Usage.TotalTokens != 7 {
		t.Fatalf("response %+v", resp)
	}
	for i, d := range resp.Data {
		got := make([]float32, len(d.Embedding))
		for j, x := range d.Embedding {
			got[j] = float32(x)
		}
		if e := cpuref.RelErr(got, capturedVector("v1_embeddings_batch", i)); d.Index != int64(i) || d.Object != "embedding" || e > 1e-3 {
			t.Errorf("data[%d]: index %d object %q, relative error %.3g from llama-server", i, d.Index, d.Object, e)
		}
	}

	resp, err = client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model:          "stories260K",
		Input:          openai.EmbeddingNewParamsInputUnion{OfString: openai.String("Lily")},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 1 || resp.Usage.PromptTokens != 2 {
		t.Fatalf("base64 response %+v", resp)
	}
	var b64 string
	if err := json.Unmarshal([]byte(resp.Data[0].JSON.Embedding.Raw()), &b64); err != nil {
		t.Fatalf("base64 embedding %s: %v", resp.Data[0].JSON.Embedding.Raw(), err)
	}
	if e := cpuref.RelErr(decodeBase64Floats(t, b64), capturedVector("v1_embeddings_base64", 0)); e > 1e-3 {
		t.Errorf("base64: relative error %.3g from llama-server", e)
	}

	_, err = client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "m", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{}}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, `"prompt" must not be empty`) {
		t.Errorf("no inputs: %v", err)
	}
}

// TestBertEmbeddingsEndToEnd serves a generated BERT model: its embeddings are the Go
// reference's; an input longer than the batch gets llama-server's 500; completions are refused.
func TestBertEmbeddingsEndToEnd(t *testing.T) {
	path := enginetest.SynthModel(t, nil)
	url, e := serveEngine(t, engine.Config{ModelPath: path, CtxSize: 2 * 256, Slots: 2, BatchSize: 32, Embeddings: true})
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	texts := []string{"Once upon a time", "Lily and Tom went to the park"}
	status, body := post(t, url+"/v1/embeddings", `{"input":["Once upon a time","Lily and Tom went to the park"]}`)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var resp struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		want, err := reference.Embed(f, e.Tokenizer().Encode(text, true, true))
		if err != nil {
			t.Fatal(err)
		}
		if err := cpuref.RelErr(resp.Data[i].Embedding, want); err > 1e-3 {
			t.Errorf("%q: relative error %.3g from the reference", text, err)
		}
	}

	long := strings.Repeat("Lily ", 40)
	n := len(e.Tokenizer().Encode(long, true, true))
	status, body = post(t, url+"/embedding", `{"content":"`+long+`"}`)
	want := `{"error":{"code":500,"message":"input (` + itoa(int32(n)) + ` tokens) is too large to process. increase the physical batch size (current batch size: 32)","type":"server_error"}}`
	if status != 500 || string(body) != want {
		t.Errorf("too large: %d %s\nwant %s", status, body, want)
	}
	if status, body = post(t, url+"/completion", `{"prompt":"Once"}`); status != 501 || !strings.Contains(string(body), "does not generate text") {
		t.Errorf("completion on BERT: %d %s", status, body)
	}
}

// TestRerankEndToEnd serves a generated reranker: documents come back sorted exactly as the Go
// reference's scores of llama-server's rerank prompts sort them, with those scores, cut to
// top_n; TEI's format too.
func TestRerankEndToEnd(t *testing.T) {
	path := enginetest.SynthModel(t, func(c *synth.Config) { c.Rank = true })
	url, e := serveEngine(t, engine.Config{ModelPath: path, CtxSize: 4 * 128, Slots: 4, Embeddings: true, Pooling: "rank"})
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	query := "What did Lily find?"
	docs := []string{"Lily found a shiny stone near the old tree.", "The cat sat.", "Tom went to the park to play with a big red ball.", "A box", "Once upon a time there was a little girl."}
	type scored struct {
		index int
		score float32
	}
	var want []scored
	tokens := 0
	for i, d := range docs {
		p := rerankPrompt(e.Tokenizer(), "", query, d)
		if p[0] != 1 || p[len(p)-1] != 2 {
			t.Fatalf("prompt %v: want BOS ... EOS", p)
		}
		tokens += len(p)
		s, err := reference.Rank(f, p)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, scored{i, s[0]})
	}
	sort.Slice(want, func(a, b int) bool { return want[a].score > want[b].score })
	for i := 1; i < len(want); i++ {
		if want[i-1].score-want[i].score < 2e-3 {
			t.Fatalf("reference scores %v too close to rank", want)
		}
	}
	docsJSON, _ := json.Marshal(docs)
	status, body := post(t, url+"/v1/rerank", `{"query":"`+query+`","documents":`+string(docsJSON)+`,"top_n":4}`)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var resp struct {
		Model   string `json:"model"`
		Object  string `json:"object"`
		Usage   struct{ PromptTokens, TotalTokens int }
		Results []struct {
			Index          int     `json:"index"`
			RelevanceScore float32 `json:"relevance_score"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Model != "stories260K" || resp.Object != "list" || len(resp.Results) != 4 {
		t.Fatalf("response %s", body)
	}
	if !strings.Contains(string(body), `"usage":{"prompt_tokens":`+itoa(int32(tokens))+`,"total_tokens":`+itoa(int32(tokens))+`}`) {
		t.Errorf("usage in %s, want %d tokens", body, tokens)
	}
	for i, r := range resp.Results {
		if r.Index != want[i].index || math.Abs(float64(r.RelevanceScore-want[i].score)) > 2e-4 {
			t.Errorf("result %d: document %d score %g, reference document %d score %g", i, r.Index, r.RelevanceScore, want[i].index, want[i].score)
		}
	}
	status, body = post(t, url+"/rerank", `{"query":"`+query+`","texts":`+string(docsJSON)+`}`)
	var tei []struct {
		Index int     `json:"index"`
		Score float32 `json:"score"`
	}
	if err := json.Unmarshal(body, &tei); status != 200 || err != nil || len(tei) != len(docs) {
		t.Fatalf("TEI: %d %s", status, body)
	}
	for i, r := range tei {
		if r.Index != want[i].index {
			t.Errorf("TEI result %d: document %d, reference %d", i, r.Index, want[i].index)
		}
	}
	if status, body := post(t, url+"/v1/embeddings", `{"input":"x"}`); status != 501 {
		t.Errorf("embeddings on a reranker: %d %s", status, body)
	}
}

// TestKeyOrder checks the key lister the wire comparisons rely on.
func TestKeyOrder(t *testing.T) {
	got := keyOrder(t, []byte(`{"b":1,"a":{"c":[{"d":"x","e":[1,2]}],"f":"y"},"g":[]}`))
	if want := []string{"b", "a", "a.c", "a.c.d", "a.c.e", "a.f", "g"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
}
