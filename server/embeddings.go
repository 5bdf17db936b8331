package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// Errors of the embedding endpoints, with llama-server's messages (handle_embeddings_impl).
var (
	errNoEmbeddings = &apiError{typ: errNotSupported, message: "This server does not support embeddings. Start it with `--embeddings`"}
	errPoolingNone  = invalidRequest("Pooling type 'none' is not OAI compatible. Please use a different pooling type")
	errNoInput      = invalidRequest(`"input" or "content" must be provided`)
	errBadEncoding  = invalidRequest("The format to return the embeddings in. Can be either float or base64")
	errNoPrompts    = invalidRequest(`"prompt" must not be empty`)
	errEmptyInput   = invalidRequest("Input content cannot be empty")
	// Ours: llama-server computes garbage here (a rank model's scores read as a vector).
	errRankServer = &apiError{typ: errNotSupported, message: "This server is a reranker (--reranking): it scores documents and computes no embeddings; use /v1/rerank"}
)

// CreateEmbedding implements POST /v1/embeddings: OpenAI's embeddings, or llama-server's
// native answer for a request with "content" instead of "input".
func (s *Server) CreateEmbedding(ctx context.Context, req *gen.EmbeddingRequest) (gen.EmbeddingResult, error) {
	m := s.model()
	if m == nil {
		return gen.EmbeddingResult{}, errLoading
	}
	res, native, err := m.embed(ctx, req, true)
	if err != nil {
		return gen.EmbeddingResult{}, err
	}
	if native != nil {
		return gen.NewNativeEmbeddingResponseEmbeddingResult(native), nil
	}
	return gen.NewEmbeddingResponseEmbeddingResult(*res), nil
}

// CreateEmbeddingNative implements POST /embedding, llama-server's native embeddings.
func (s *Server) CreateEmbeddingNative(ctx context.Context, req *gen.EmbeddingRequest) (gen.NativeEmbeddingResponse, error) {
	m := s.model()
	if m == nil {
		return nil, errLoading
	}
	_, native, err := m.embed(ctx, req, false)
	return native, err
}

// CreateEmbeddingNativeAlias implements POST /embeddings, an alias of POST /embedding.
func (s *Server) CreateEmbeddingNativeAlias(ctx context.Context, req *gen.EmbeddingRequest) (gen.NativeEmbeddingResponse, error) {
	return s.CreateEmbeddingNative(ctx, req)
}

// embed runs an embedding request as llama-server's handle_embeddings_impl does: checks, one
// task per input, all in flight at once, then the OpenAI-style answer (oai, unless the request
// used "content") or the native one.
func (m *loaded) embed(ctx context.Context, req *gen.EmbeddingRequest, oai bool) (*gen.EmbeddingResponse, gen.NativeEmbeddingResponse, error) {
	pooling := m.info.Pooling
	switch {
	case !m.info.Embeddings:
		return nil, nil, errNoEmbeddings
	case oai && pooling == model.PoolNone:
		return nil, nil, errPoolingNone
	case pooling == model.PoolRank:
		return nil, nil, errRankServer
	}
	input, ok := req.Input.Get()
	if !ok {
		if input, ok = req.Content.Get(); !ok {
			return nil, nil, errNoInput
		}
		oai = false // "content" is not OpenAI's
	}
	useBase64 := false
	if f, ok := req.EncodingFormat.Get(); ok {
		switch f {
		case "base64":
			useBase64 = true
		case "float":
		default:
			return nil, nil, errBadEncoding
		}
	}
	prompts, err := embeddingPrompts(m.tok, input, m.mediaPrompts(ctx))
	if err != nil {
		return nil, nil, err
	}
	norm := req.EmbdNormalize.Or(model.NormEuclidean)
	tasks := make([]engine.Task, len(prompts))
	for i, p := range prompts {
		tasks[i] = engine.Task{Kind: engine.TaskEmbed, Prompt: p}
	}
	results, err := m.runAll(ctx, tasks)
	if err != nil {
		return nil, nil, err
	}
	nTokens := 0
	for i, r := range results {
		nTokens += r.TokensEvaluated
		if pooling != model.PoolNone { // llama-server normalises pooled vectors only
			results[i].Embedding[0] = model.Normalize(r.Embedding[0], norm)
		}
	}
	noteTokens(ctx, nTokens, 0)
	if !oai {
		native := make(gen.NativeEmbeddingResponse, len(results))
		for i, r := range results {
			vs := make([][]float64, len(r.Embedding))
			for j, v := range r.Embedding {
				vs[j] = widen(v)
			}
			native[i] = gen.NativeEmbedding{Index: i, Embedding: vs}
		}
		return nil, native, nil
	}
	res := &gen.EmbeddingResponse{
		Model:  req.Model.Or(m.name),
		Object: "list",
		Usage:  gen.EmbeddingUsage{PromptTokens: nTokens, TotalTokens: nTokens},
		Data:   make([]gen.EmbeddingData, len(results)),
	}
	for i, r := range results {
		d := gen.EmbeddingData{Index: i, Object: "embedding", Embedding: gen.NewFloat64ArrayEmbeddingVector(widen(r.Embedding[0]))}
		if useBase64 {
			d.Embedding = gen.NewStringEmbeddingVector(base64Floats(r.Embedding[0]))
			d.EncodingFormat = gen.NewOptString("base64")
		}
		res.Data[i] = d
	}
	return res, nil, nil
}

// embeddingPrompts tokenizes an embedding request's input as llama-server's
// tokenize_input_prompts does (special tokens added and parsed): a string is one input; an
// array holding a token id is one input of ids and strings; any other array is several
// inputs, each a string or an array of ids and strings.
func embeddingPrompts(tok *tokenizer.Tokenizer, in gen.EmbeddingInput, mp *mediaPrompts) ([][]int32, error) {
	if s, ok := in.GetString(); ok {
		return checkedPrompts([][]int32{tokenize(tok, s)})
	}
	if o, ok := in.GetPromptObject(); ok {
		ids, err := objectPromptTokens(tok, "input", o, mp)
		if err != nil {
			return nil, err
		}
		return checkedPrompts([][]int32{ids})
	}
	items := in.EmbeddingInputItemArray
	hasID := false
	for _, it := range items {
		hasID = hasID || it.IsInt32()
	}
	if hasID {
		pieces := make([]gen.PromptPiece, 0, len(items))
		for _, it := range items {
			if s, ok := it.GetString(); ok {
				pieces = append(pieces, gen.NewStringPromptPiece(s))
			} else if id, ok := it.GetInt32(); ok {
				pieces = append(pieces, gen.NewInt32PromptPiece(id))
			} else {
				return nil, invalidRequest("'input': an array of token ids cannot hold an array or a prompt object")
			}
		}
		ids, err := mixedTokens(tok, "input", pieces, true, true)
		if err != nil {
			return nil, err
		}
		return checkedPrompts([][]int32{ids})
	}
	if len(items) == 0 {
		return nil, errNoPrompts
	}
	prompts := make([][]int32, len(items))
	for i, it := range items {
		if s, ok := it.GetString(); ok {
			prompts[i] = tokenize(tok, s)
			continue
		}
		if o, ok := it.GetPromptObject(); ok {
			var err error
			if prompts[i], err = objectPromptTokens(tok, fmt.Sprintf("input[%d]", i), o, mp); err != nil {
				return nil, err
			}
			continue
		}
		var err error
		if prompts[i], err = mixedTokens(tok, "input", it.PromptPieceArray, true, true); err != nil {
			return nil, err
		}
	}
	return checkedPrompts(prompts)
}

// checkedPrompts refuses an input that tokenizes to nothing (a model that adds no BOS).
func checkedPrompts(prompts [][]int32) ([][]int32, error) {
	for _, p := range prompts {
		if len(p) == 0 {
			return nil, errEmptyInput
		}
	}
	return prompts, nil
}

// runAll submits every task at once (each takes its own slot, as llama-server's tasks do) and
// waits for all their final results, in task order. The first failure cancels the rest.
func (m *loaded) runAll(ctx context.Context, tasks []engine.Task) ([]engine.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chans := make([]<-chan engine.Result, 0, len(tasks))
	defer func() {
		for _, ch := range chans {
			drain(ch)
		}
	}()
	for _, t := range tasks {
		ch, err := m.backend.Submit(ctx, t)
		if err != nil {
			return nil, submitError(err, len(t.Prompt), m.info.NCtx)
		}
		chans = append(chans, ch)
	}
	results := make([]engine.Result, len(tasks))
	for i, ch := range chans {
		for {
			res, err := nextResult(ctx, ch, nil)
			if err == nil {
				err = res.Err
			}
			if err != nil {
				return nil, submitError(err, len(tasks[i].Prompt), m.info.NCtx)
			}
			if res.Stop {
				results[i] = res
				break
			}
		}
	}
	return results, nil
}

// widen converts a vector to float64, in which JSON writes each float32 value as llama-server
// does (its JSON library stores floats as doubles).
func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// base64Floats is OpenAI's base64 encoding of a vector: its little-endian float32 bytes.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
