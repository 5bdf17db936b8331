package server

import (
	"context"
	"net/http"

	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// Infill layout settings: llama-server sizes the parts of an infill prompt with its default
// logical batch (-b 2048) and default n_predict (-1), not the request's.
const (
	infillBatch    = 2048
	infillNPredict = -1
)

// snippetSeparator separates extra chunks in models without a file-separator token
// (llama-server writes it in binary "to avoid confusing the AI").
const snippetSeparator = "\n\n--- snippet ---\n\n"

// CreateInfill implements POST /infill: the prompt is laid out from the model's
// fill-in-the-middle tokens (infillPrompt), then completed as POST /completion.
func (s *Server) CreateInfill(ctx context.Context, req *gen.InfillRequest, w http.ResponseWriter) error {
	m := s.model()
	if m == nil {
		return errLoading
	}
	missing := ""
	for _, t := range []struct {
		kind tokenizer.FIMKind
		what string
	}{{tokenizer.FIMPre, "prefix"}, {tokenizer.FIMSuf, "suffix"}, {tokenizer.FIMMid, "middle"}} {
		if m.tok.FIM(t.kind) < 0 {
			missing += t.what + " token is missing. "
		}
	}
	if missing != "" {
		return &apiError{typ: errNotSupported, message: "Infill is not supported by this model: " + missing}
	}
	params, err := m.samplingFields(req, firstSet(req.NPredict, req.MaxTokens)).params()
	if err != nil {
		return err
	}
	params.NProbs = req.NProbs.Or(req.Logprobs.Or(0))
	prefix, err := infillText(m.tok, "input_prefix", req.InputPrefix)
	if err != nil {
		return err
	}
	suffix, err := infillText(m.tok, "input_suffix", req.InputSuffix)
	if err != nil {
		return err
	}
	extra, _ := req.InputExtra.Get()
	prompt := infillPrompt(m.tok, infillParts{
		prefix: prefix,
		suffix: suffix,
		extra:  extra,
		prompt: m.tok.Encode(req.Prompt.Or(""), false, true),
		nCtx:   m.info.NCtx,
		spm:    s.cfg.SPMInfill,
	})
	opts, err := m.nativeOptionsOf(req)
	if err != nil {
		return err
	}
	return s.completePrompts(ctx, m, [][]int32{prompt}, params, opts, w)
}

// infillText tokenizes input_prefix or input_suffix as llama-server does: no special tokens
// added and none parsed in text; token ids are taken as they are.
func infillText(tok *tokenizer.Tokenizer, field string, t gen.InfillText) ([]int32, error) {
	if s, ok := t.GetString(); ok {
		return tok.Encode(s, false, false), nil
	}
	return mixedTokens(tok, field, t.PromptPieceArray, false, false)
}

// infillParts are the pieces of an infill prompt.
type infillParts struct {
	prefix, suffix []int32
	extra          []gen.InfillChunk
	prompt         []int32 // the request's prompt: where generation continues, after the prefix
	nCtx           int
	spm            bool // suffix before prefix (--spm-infill)
}

// infillPrompt lays out an infill prompt as llama-server's format_prompt_infill, the
// repository-level FIM pattern:
//
//	[FIM_REP]myproject\n [FIM_SEP]filename0\n extra0 ... [FIM_SEP]filename\n
//	[BOS] [FIM_PRE]prefix prompt [FIM_SUF]suffix [FIM_MID]
//
// Without a file-separator token each extra chunk follows snippetSeparator instead. The
// prefix keeps its last 3/4 of a batch, the suffix its first quarter less the prompt; the
// extra context keeps its end, as much as the context leaves after a batch and twice the
// default n_predict.
func infillPrompt(tok *tokenizer.Tokenizer, p infillParts) []int32 {
	enc := func(s string) []int32 { return tok.Encode(s, false, false) }
	var extra []int32
	if rep := tok.FIM(tokenizer.FIMRep); rep >= 0 {
		extra = append(append(extra, rep), enc("myproject\n")...)
	}
	sep := tok.FIM(tokenizer.FIMSep)
	for _, c := range p.extra {
		if sep >= 0 {
			extra = append(append(extra, sep), enc(c.Filename.Or("tmp")+"\n")...)
		} else {
			extra = append(extra, enc(snippetSeparator)...)
		}
		extra = append(extra, enc(c.Text)...)
	}
	if sep >= 0 {
		extra = append(append(extra, sep), enc("filename\n")...)
	}

	nPrefix := min(len(p.prefix), 3*(infillBatch/4))
	nSuffix := min(len(p.suffix), max(0, infillBatch/4-(2+len(p.prompt))))
	nExtra := min(max(0, p.nCtx-infillBatch-2*infillNPredict), len(extra))

	pre := append([]int32{tok.FIM(tokenizer.FIMPre)}, p.prefix[len(p.prefix)-nPrefix:]...)
	pre = append(pre, p.prompt...)
	suf := append([]int32{tok.FIM(tokenizer.FIMSuf)}, p.suffix[:nSuffix]...)
	first, second := pre, suf
	if p.spm {
		first, second = suf, pre
	}
	out := append([]int32(nil), extra[len(extra)-nExtra:]...)
	if tok.AddBOS() && tok.BOS() >= 0 {
		out = append(out, tok.BOS())
	}
	out = append(out, first...)
	out = append(out, second...)
	return append(out, tok.FIM(tokenizer.FIMMid))
}
