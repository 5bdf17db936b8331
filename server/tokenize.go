package server

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// Tokenize implements POST /tokenize as llama-server does: content (a string, or token ids and
// strings mixed) is tokenized with add_special (default false) and parse_special (default true);
// with_pieces answers {"id", "piece"} pairs, the piece as a string when it is valid UTF-8 and as
// its bytes otherwise. A request without content gets no tokens.
func (s *Server) Tokenize(_ context.Context, req *gen.TokenizeRequest) (*gen.TokenizeResponse, error) {
	m := s.model()
	if m == nil {
		return nil, errLoading
	}
	resp := &gen.TokenizeResponse{Tokens: []gen.TokenizeToken{}}
	content, ok := req.Content.Get()
	if !ok {
		return resp, nil
	}
	addSpecial := req.AddSpecial.Or(false)
	parseSpecial := req.ParseSpecial.Or(true)
	var ids []int32
	if text, isString := content.GetString(); isString {
		ids = m.tok.Encode(text, addSpecial, parseSpecial)
	} else {
		var err error
		if ids, err = mixedTokens(m.tok, "content", content.PromptPieceArray, addSpecial, parseSpecial); err != nil {
			return nil, err
		}
	}
	withPieces := req.WithPieces.Or(false)
	for _, id := range ids {
		if !withPieces {
			resp.Tokens = append(resp.Tokens, gen.NewInt32TokenizeToken(id))
			continue
		}
		resp.Tokens = append(resp.Tokens, gen.NewTokenPieceTokenizeToken(gen.TokenPiece{ID: id, Piece: pieceText(m.tok.Piece(id, true))}))
	}
	return resp, nil
}

// pieceText is a piece as /tokenize reports it: a string when the bytes are valid UTF-8, else
// the array of byte values (a byte-fallback token holding part of a character).
func pieceText(piece []byte) gen.PieceText {
	if utf8.Valid(piece) {
		return gen.NewStringPieceText(string(piece))
	}
	vals := make([]int, len(piece))
	for i, b := range piece {
		vals[i] = int(b)
	}
	return gen.NewIntArrayPieceText(vals)
}

// Detokenize implements POST /detokenize as llama-server does: the pieces of the tokens
// concatenated, special tokens rendered as their text and nothing stripped, so [1, 403] gives
// "<s> Once" on a SentencePiece vocabulary. Each run of bytes that is not valid UTF-8 (part of
// a character whose other bytes are in tokens not sent) becomes U+FFFD, since JSON text must be
// UTF-8 (llama-server fails with a 500 there).
func (s *Server) Detokenize(_ context.Context, req *gen.DetokenizeRequest) (*gen.DetokenizeResponse, error) {
	m := s.model()
	if m == nil {
		return nil, errLoading
	}
	ids, _ := req.Tokens.Get()
	if err := checkTokens(m.tok, "tokens", ids); err != nil {
		return nil, err
	}
	var text []byte
	for _, id := range ids {
		text = append(text, m.tok.Piece(id, true)...)
	}
	return &gen.DetokenizeResponse{Content: strings.ToValidUTF8(string(text), "\uFFFD")}, nil
}

// checkTokens rejects token ids outside the vocabulary, naming field and the first bad id.
func checkTokens(tok *tokenizer.Tokenizer, field string, ids []int32) error {
	for i, id := range ids {
		if err := checkToken(tok, field, i, id); err != nil {
			return err
		}
	}
	return nil
}

// checkToken rejects id, element i of field, when it is outside the vocabulary.
func checkToken(tok *tokenizer.Tokenizer, field string, i int, id int32) error {
	if n := int32(tok.NVocab()); id < 0 || id >= n {
		return invalidRequest("'%s' token %d is out of range at index %d (the vocabulary has %d tokens, ids 0 to %d)",
			field, id, i, n, n-1)
	}
	return nil
}

// mixedTokens is llama-server's tokenize_mixed: strings are tokenized in place (only a leading
// string gets special tokens) and token ids are taken as they are, after a range check.
func mixedTokens(tok *tokenizer.Tokenizer, field string, pieces []gen.PromptPiece, addSpecial, parseSpecial bool) ([]int32, error) {
	var out []int32
	for i, piece := range pieces {
		if s, ok := piece.GetString(); ok {
			out = append(out, tok.Encode(s, addSpecial && i == 0, parseSpecial)...)
			continue
		}
		if err := checkToken(tok, field, i, piece.Int32); err != nil {
			return nil, err
		}
		out = append(out, piece.Int32)
	}
	return out, nil
}
