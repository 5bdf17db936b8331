package server

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// newEmbedHarness is a harness whose fake serves embeddings pooled as pooling says (rank:
// reranking), as --embeddings (--reranking) would.
func newEmbedHarness(t *testing.T, pooling model.Pooling) *harness {
	t.Helper()
	fake := newFakeBackend(t)
	fake.info.Embeddings, fake.info.Pooling = true, pooling
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(fake)
	return &harness{srv: srv, fake: fake, h: srv.Handler()}
}

// wantBody checks a response's status and exact body.
func wantBody(t *testing.T, rec *httptest.ResponseRecorder, status int, body string) {
	t.Helper()
	if rec.Code != status || rec.Body.String() != body {
		t.Errorf("%d %s\nwant %d %s", rec.Code, rec.Body, status, body)
	}
}

// mustTokenizer builds a tokenizer from v.
func mustTokenizer(t *testing.T, v tokenizer.Vocab) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.New(v)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// unit is fakeVector normalised to unit length, as the server answers it, in float64.
func unit(seed int32) []float64 {
	v := model.Normalize(fakeVector(seed, 64), model.NormEuclidean)
	return widen(v)
}

// TestEmbeddingErrors checks every refusal of the embedding and rerank endpoints, with
// llama-server's statuses and exact bodies.
func TestEmbeddingErrors(t *testing.T) {
	plain := newHarness(t)
	mean := newEmbedHarness(t, model.PoolMean)
	none := newEmbedHarness(t, model.PoolNone)
	rank := newEmbedHarness(t, model.PoolRank)
	notSupported := `{"error":{"code":501,"message":"This server does not support embeddings. Start it with ` + "`--embeddings`" + `","type":"not_supported_error"}}`
	noRerank := `{"error":{"code":501,"message":"This server does not support reranking. Start it with ` + "`--reranking`" + `","type":"not_supported_error"}}`
	bad := func(msg string) string {
		b, _ := json.Marshal(msg)
		return `{"error":{"code":400,"message":` + string(b) + `,"type":"invalid_request_error"}}`
	}
	for _, c := range []struct {
		name   string
		h      *harness
		path   string
		body   string
		status int
		want   string
	}{
		{"v1 without --embeddings", plain, "/v1/embeddings", `{"input":"hello"}`, 501, notSupported},
		{"native without --embeddings", plain, "/embedding", `{"content":"hello"}`, 501, notSupported},
		{"alias without --embeddings", plain, "/embeddings", `{"content":"hello"}`, 501, notSupported},
		{"rerank without --reranking", plain, "/v1/rerank", `{"query":"a","documents":["b"]}`, 501, noRerank},
		{"rerank on an embedding server", mean, "/rerank", `{"query":"a","documents":["b"]}`, 501, noRerank},
		{"embeddings on a reranker", rank, "/v1/embeddings", `{"input":"a"}`, 501,
			`{"error":{"code":501,"message":"This server is a reranker (--reranking): it scores documents and computes no embeddings; use /v1/rerank","type":"not_supported_error"}}`},
		{"OpenAI with pooling none", none, "/v1/embeddings", `{"input":"a"}`, 400, bad("Pooling type 'none' is not OAI compatible. Please use a different pooling type")},
		{"no input", mean, "/v1/embeddings", `{"model":"x"}`, 400, bad(`"input" or "content" must be provided`)},
		{"null input", mean, "/embedding", `{"input":null}`, 400, bad(`"input" or "content" must be provided`)},
		{"bad encoding_format", mean, "/v1/embeddings", `{"input":"a","encoding_format":"int8"}`, 400, bad("The format to return the embeddings in. Can be either float or base64")},
		{"no inputs", mean, "/v1/embeddings", `{"input":[]}`, 400, bad(`"prompt" must not be empty`)},
		{"empty input", mean, "/v1/embeddings", `{"input":["a",[]]}`, 400, bad("Input content cannot be empty")},
		{"token out of range", mean, "/v1/embeddings", `{"input":[1,99999]}`, 400, bad("'input' token 99999 is out of range at index 1 (the vocabulary has 365 tokens, ids 0 to 364)")},
		{"input of the wrong type", mean, "/v1/embeddings", `{"input":true}`, 400, bad("'input' must be a string, or an array of strings, token ids and arrays of them (or null)")},
		{"prompt object without its string", mean, "/v1/embeddings", `{"input":{"a":1}}`, 400, bad("'input.prompt_string' is required")},
		{"no query", rank, "/v1/rerank", `{"documents":["b"]}`, 400, bad(`"query" must be provided`)},
		{"query not a string", rank, "/v1/rerank", `{"query":5,"documents":["b"]}`, 400, bad(`"query" must be a string`)},
		{"no documents", rank, "/v1/reranking", `{"query":"a"}`, 400, bad(`"documents" must be a non-empty string array`)},
		{"documents not strings", rank, "/reranking", `{"query":"a","documents":[1,2]}`, 400, bad(`"documents" must be a non-empty string array`)},
		{"negative top_n", rank, "/v1/rerank", `{"query":"a","documents":["b"],"top_n":-1}`, 400, bad(`"top_n" must not be negative`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := c.h.do(t, "POST", c.path, c.body)
			if rec.Code != c.status || rec.Body.String() != c.want {
				t.Errorf("%d %s\nwant %d %s", rec.Code, rec.Body, c.status, c.want)
			}
		})
	}
}

// TestEmbeddingEngineErrors checks how the engine's refusals reach the client: llama-server's
// batch-size message as a 500, its context message as exceed_context_size_error with the
// counts, and generation on an encoder as not supported.
func TestEmbeddingEngineErrors(t *testing.T) {
	for _, c := range []struct {
		name, path, body string
		err              error
		status           int
		want             string
	}{
		{"too large", "/v1/embeddings", `{"input":"a"}`, &engine.InputTooLargeError{Tokens: 600, BatchSize: 512}, 500,
			`{"error":{"code":500,"message":"input (600 tokens) is too large to process. increase the physical batch size (current batch size: 512)","type":"server_error"}}`},
		{"too long", "/embedding", `{"content":"a"}`, &engine.ContextExceededError{Tokens: 300, NCtx: 256}, 400,
			`{"error":{"code":400,"message":"input (300 tokens) is larger than the max context size (256 tokens). skipping","type":"exceed_context_size_error","n_prompt_tokens":300,"n_ctx":256}}`},
		{"generation on an encoder", "/completion", `{"prompt":"a"}`, engine.ErrNoGeneration, 501,
			`{"error":{"code":501,"message":"The loaded model is an embedding model (an encoder): it does not generate text. Use /v1/embeddings or /v1/rerank","type":"not_supported_error"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newEmbedHarness(t, model.PoolMean)
			h.fake.submitErr = c.err
			rec := h.do(t, "POST", c.path, c.body)
			if rec.Code != c.status || rec.Body.String() != c.want {
				t.Errorf("%d %s\nwant %d %s", rec.Code, rec.Body, c.status, c.want)
			}
		})
	}
}

// TestEmbeddingInputs checks how inputs become tasks, as llama-server's
// tokenize_input_prompts: a string, several strings, an array with a token id (one input of
// ids and strings), arrays of ids; and the answers: one result per input, in order.
func TestEmbeddingInputs(t *testing.T) {
	h := newEmbedHarness(t, model.PoolMean)
	tok := h.fake.tok
	a, b := tok.Encode("Once", true, true), tok.Encode("a time", true, true)
	for _, c := range []struct {
		input string
		want  [][]int32
	}{
		{`"Once"`, [][]int32{a}},
		{`["Once","a time"]`, [][]int32{a, b}},
		{`[1,"Once",5]`, [][]int32{append(append([]int32{1}, tok.Encode("Once", false, true)...), 5)}},
		{`[[7,8],["a time"],"Once"]`, [][]int32{{7, 8}, b, a}},
	} {
		h.fake.tasks = nil
		rec := h.do(t, "POST", "/v1/embeddings", `{"input":`+c.input+`}`)
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", c.input, rec.Code, rec.Body)
		}
		var got [][]int32
		for _, task := range h.fake.tasks {
			if task.Kind != engine.TaskEmbed {
				t.Errorf("%s: task kind %d", c.input, task.Kind)
			}
			got = append(got, task.Prompt)
		}
		if !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("%s: tasks %v, want %v", c.input, got, c.want)
		}
		var resp struct {
			Data []struct {
				Index     int       `json:"index"`
				Embedding []float64 `json:"embedding"`
			} `json:"data"`
			Usage struct{ PromptTokens, TotalTokens int } `json:"usage"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, p := range c.want {
			n += len(p)
			sum := int32(0)
			for _, id := range p {
				sum += id
			}
			if resp.Data[i].Index != i || !slices.Equal(resp.Data[i].Embedding, unit(sum)) {
				t.Errorf("%s: data[%d] = index %d, %v...", c.input, i, resp.Data[i].Index, resp.Data[i].Embedding[:2])
			}
		}
		if len(resp.Data) != len(c.want) {
			t.Errorf("%s: %d results, want %d", c.input, len(resp.Data), len(c.want))
		}
	}
}

// TestEmbeddingAnswers checks the answers' exact JSON: OpenAI's (model echoed, usage, float or
// base64), the native array (also for "content" on /v1/embeddings), embd_normalize, and pooling
// none's per-token, unnormalised vectors.
func TestEmbeddingAnswers(t *testing.T) {
	h := newEmbedHarness(t, model.PoolMean)
	tok := h.fake.tok
	ids := tok.Encode("Lily", true, true)
	sum := int32(0)
	for _, id := range ids {
		sum += id
	}
	vec, _ := json.Marshal(unit(sum))
	n := len(ids)
	num := func(v int) string { b, _ := json.Marshal(v); return string(b) }

	rec := h.do(t, "POST", "/v1/embeddings", `{"input":"Lily","model":"my-model"}`)
	wantBody(t, rec, 200, `{"model":"my-model","object":"list","usage":{"prompt_tokens":`+num(n)+`,"total_tokens":`+num(n)+`},"data":[{"embedding":`+string(vec)+`,"index":0,"object":"embedding"}]}`)

	f32 := model.Normalize(fakeVector(sum, 64), model.NormEuclidean)
	raw := make([]byte, 4*len(f32))
	for i, x := range f32 {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	rec = h.do(t, "POST", "/v1/embeddings", `{"input":"Lily","encoding_format":"base64"}`)
	wantBody(t, rec, 200, `{"model":"stories260K","object":"list","usage":{"prompt_tokens":`+num(n)+`,"total_tokens":`+num(n)+`},"data":[{"embedding":"`+base64.StdEncoding.EncodeToString(raw)+`","index":0,"object":"embedding","encoding_format":"base64"}]}`)

	for _, path := range []string{"/embedding", "/embeddings", "/v1/embeddings"} {
		rec = h.do(t, "POST", path, `{"content":"Lily"}`)
		wantBody(t, rec, 200, `[{"index":0,"embedding":[`+string(vec)+`]}]`)
	}

	raw64, _ := json.Marshal(widen(fakeVector(sum, 64)))
	rec = h.do(t, "POST", "/embedding", `{"content":"Lily","embd_normalize":-1}`)
	wantBody(t, rec, 200, `[{"index":0,"embedding":[`+string(raw64)+`]}]`)

	none := newEmbedHarness(t, model.PoolNone)
	rec = none.do(t, "POST", "/embedding", `{"input":"Lily"}`)
	var rows []string
	for _, id := range ids {
		b, _ := json.Marshal(widen(fakeVector(id, 64)))
		rows = append(rows, string(b))
	}
	wantBody(t, rec, 200, `[{"index":0,"embedding":[`+strings.Join(rows, ",")+`]}]`)
}

// TestRerankAnswers checks the rerank answers: Jina's sorted by relevance and cut to top_n
// with the model echoed, TEI's for "texts" (with return_text), the prompts in the classic
// format, and all four routes.
func TestRerankAnswers(t *testing.T) {
	h := newEmbedHarness(t, model.PoolRank)
	tok := h.fake.tok
	docs := []string{"a cat", "Lily and Tom went", "the dog ran far away", "x"}
	var prompts [][]int32
	scores := map[int]float64{}
	for i, d := range docs {
		p := rerankPrompt(tok, "", "pets", d)
		prompts = append(prompts, p)
		scores[i] = float64(fakeScore(p))
	}
	order := []int{2, 1, 0, 3} // by prompt length
	num := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	tokens := 0
	for _, p := range prompts {
		tokens += len(p)
	}
	for _, path := range []string{"/v1/rerank", "/v1/reranking", "/rerank", "/reranking"} {
		h.fake.tasks = nil
		rec := h.do(t, "POST", path, `{"model":"bge","query":"pets","documents":`+num(docs)+`,"top_n":3}`)
		want := `{"model":"bge","object":"list","usage":{"prompt_tokens":` + num(tokens) + `,"total_tokens":` + num(tokens) + `},"results":[`
		for i, idx := range order[:3] {
			if i > 0 {
				want += ","
			}
			want += `{"index":` + num(idx) + `,"relevance_score":` + num(scores[idx]) + `}`
		}
		wantBody(t, rec, 200, want+`]}`)
		var got [][]int32
		for _, task := range h.fake.tasks {
			if task.Kind != engine.TaskRerank {
				t.Errorf("task kind %d", task.Kind)
			}
			got = append(got, task.Prompt)
		}
		if !slices.EqualFunc(got, prompts, slices.Equal) {
			t.Errorf("%s: prompts %v, want %v", path, got, prompts)
		}
	}
	rec := h.do(t, "POST", "/v1/rerank", `{"query":"pets","texts":`+num(docs)+`,"return_text":true}`)
	want := `[`
	for i, idx := range order {
		if i > 0 {
			want += ","
		}
		want += `{"index":` + num(idx) + `,"score":` + num(scores[idx]) + `,"text":` + num(docs[idx]) + `}`
	}
	wantBody(t, rec, 200, want+`]`)
	rec = h.do(t, "POST", "/v1/rerank", `{"query":"pets","texts":["x"],"top_n":0}`)
	wantBody(t, rec, 200, `[]`)
}

// TestRerankPrompt checks llama-server's rerank prompts: the classic format with each
// special token as the vocabulary asks (none, EOS, SEP), and the model's template.
func TestRerankPrompt(t *testing.T) {
	tok := newFakeBackend(t).tok // BOS 1, EOS 2, add_bos only
	q, d := tok.Encode("pets", false, false), tok.Encode("a cat", false, false)
	want := append(append([]int32{1}, q...), d...)
	if got := rerankPrompt(tok, "", "pets", "a cat"); !slices.Equal(got, want) {
		t.Errorf("BOS only: %v, want %v", got, want)
	}
	v := fakeVocab()
	v.AddEOS, v.AddSEP, v.SEP = true, true, 2
	xlmr := mustTokenizer(t, v)
	want = slices.Concat([]int32{1}, q, []int32{2, 2}, d, []int32{2})
	if got := rerankPrompt(xlmr, "", "pets", "a cat"); !slices.Equal(got, want) {
		t.Errorf("BOS, EOS and SEP: %v, want %v", got, want)
	}
	tmpl := "<s>Query: {query}</s>Document: {document}"
	want = tok.Encode("<s>Query: pets</s>Document: a cat", false, true)
	if got := rerankPrompt(tok, tmpl, "pets", "a cat"); !slices.Equal(got, want) || got[0] != 1 {
		t.Errorf("template: %v, want %v", got, want)
	}
}
