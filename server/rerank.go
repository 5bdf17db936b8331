package server

import (
	"context"
	"sort"
	"strings"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// Errors of the rerank endpoints, with llama-server's messages (post_rerank).
var (
	errNoRerank     = &apiError{typ: errNotSupported, message: "This server does not support reranking. Start it with `--reranking`"}
	errNoQuery      = invalidRequest(`"query" must be provided`)
	errQueryString  = invalidRequest(`"query" must be a string`)
	errNoDocuments  = invalidRequest(`"documents" must be a non-empty string array`)
	errNegativeTopN = invalidRequest(`"top_n" must not be negative`) // ours: llama-server fails with a 500
)

// Rerank implements POST /v1/rerank.
func (s *Server) Rerank(ctx context.Context, req *gen.RerankRequest) (gen.RerankResult, error) {
	m := s.model()
	if m == nil {
		return gen.RerankResult{}, errLoading
	}
	return m.rerank(ctx, req)
}

// RerankV1Alias implements POST /v1/reranking, an alias of POST /v1/rerank.
func (s *Server) RerankV1Alias(ctx context.Context, req *gen.RerankRequest) (gen.RerankResult, error) {
	return s.Rerank(ctx, req)
}

// RerankAlias implements POST /rerank, an alias of POST /v1/rerank.
func (s *Server) RerankAlias(ctx context.Context, req *gen.RerankRequest) (gen.RerankResult, error) {
	return s.Rerank(ctx, req)
}

// RerankingAlias implements POST /reranking, an alias of POST /v1/rerank.
func (s *Server) RerankingAlias(ctx context.Context, req *gen.RerankRequest) (gen.RerankResult, error) {
	return s.Rerank(ctx, req)
}

// rerank scores every document against the query, one task each, all in flight at once, and
// answers as llama-server's format_response_rerank: sorted by score, most relevant first, cut
// to top_n; in Jina's shape, or TEI's when the documents came as "texts".
func (m *loaded) rerank(ctx context.Context, req *gen.RerankRequest) (gen.RerankResult, error) {
	if !m.info.Embeddings || m.info.Pooling != model.PoolRank {
		return gen.RerankResult{}, errNoRerank
	}
	tei := len(req.Texts) > 0
	if len(req.Query) == 0 {
		return gen.RerankResult{}, errNoQuery
	}
	if req.Query.Type() != jx.String {
		return gen.RerankResult{}, errQueryString
	}
	query, err := jx.DecodeBytes(req.Query).Str()
	if err != nil {
		return gen.RerankResult{}, errQueryString
	}
	// As llama-server's json_value: "documents", else "texts", when an array of strings.
	docs, ok := stringArray(req.Documents)
	if !ok {
		docs, _ = stringArray(req.Texts)
	}
	if len(docs) == 0 {
		return gen.RerankResult{}, errNoDocuments
	}
	topN := req.TopN.Or(len(docs))
	if topN < 0 {
		return gen.RerankResult{}, errNegativeTopN
	}
	tasks := make([]engine.Task, len(docs))
	for i, doc := range docs {
		tasks[i] = engine.Task{Kind: engine.TaskRerank, Prompt: rerankPrompt(m.tok, m.info.RerankTemplate, query, doc)}
	}
	results, err := m.runAll(ctx, tasks)
	if err != nil {
		return gen.RerankResult{}, err
	}
	type scored struct {
		index int
		score float64
	}
	ranked := make([]scored, len(results))
	nTokens := 0
	for i, r := range results {
		ranked[i] = scored{i, float64(r.Embedding[0][0])}
		nTokens += r.TokensEvaluated
	}
	noteTokens(ctx, nTokens, 0)
	sort.SliceStable(ranked, func(a, b int) bool { return ranked[a].score > ranked[b].score })
	ranked = ranked[:min(topN, len(ranked))]
	if tei {
		out := make(gen.TEIRerankResponse, len(ranked))
		for i, r := range ranked {
			out[i] = gen.TEIRerankScore{Index: r.index, Score: r.score}
			if req.ReturnText.Or(false) {
				out[i].Text = gen.NewOptString(docs[r.index])
			}
		}
		return gen.NewTEIRerankResponseRerankResult(out), nil
	}
	res := gen.RerankResponse{
		Model:   req.Model.Or(m.name),
		Object:  "list",
		Usage:   gen.EmbeddingUsage{PromptTokens: nTokens, TotalTokens: nTokens},
		Results: make([]gen.RerankScore, len(ranked)),
	}
	for i, r := range ranked {
		res.Results[i] = gen.RerankScore{Index: r.index, RelevanceScore: r.score}
	}
	return gen.NewRerankResponseRerankResult(res), nil
}

// stringArray reads raw JSON as an array of strings; ok is false for anything else.
func stringArray(raw jx.Raw) ([]string, bool) {
	if raw.Type() != jx.Array {
		return nil, false
	}
	var out []string
	err := jx.DecodeBytes(raw).Arr(func(d *jx.Decoder) error {
		s, err := d.Str()
		out = append(out, s)
		return err
	})
	return out, err == nil
}

// rerankPrompt is llama-server's format_prompt_rerank: the model's rerank template (its
// "{query}" then "{document}" replaced; special tokens parsed), or the classic cross-encoder
// input [BOS] query [EOS] [SEP] document [EOS], each special token as the vocabulary asks
// for it (EOS falling back to SEP), the texts tokenized without special tokens.
func rerankPrompt(tok *tokenizer.Tokenizer, tmpl, query, doc string) []int32 {
	if tmpl != "" {
		prompt := strings.ReplaceAll(tmpl, "{query}", query)
		prompt = strings.ReplaceAll(prompt, "{document}", doc)
		return tok.Encode(prompt, false, true)
	}
	eos := tok.EOS()
	if eos < 0 {
		eos = tok.SEP()
	}
	var out []int32
	if tok.AddBOS() && tok.BOS() >= 0 {
		out = append(out, tok.BOS())
	}
	out = append(out, tok.Encode(query, false, false)...)
	if tok.AddEOS() && eos >= 0 {
		out = append(out, eos)
	}
	if tok.AddSEP() && tok.SEP() >= 0 {
		out = append(out, tok.SEP())
	}
	out = append(out, tok.Encode(doc, false, false)...)
	if tok.AddEOS() && eos >= 0 {
		out = append(out, eos)
	}
	return out
}
