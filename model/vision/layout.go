package vision

import "fmt"

// Piece is one element of an image's place in a prompt: text (tokenized with special tokens
// parsed), a token looked up by its exact piece, or one of the image's encoder inputs.
type Piece struct {
	// Text is the piece's text when Input < 0.
	Text string
	// Lookup, for text, asks for the vocabulary's token whose piece is exactly Text (mtmd's
	// lookup_token), the text tokenized when there is none.
	Lookup bool
	// Input is the index of the encoder input (Prepared.Inputs) whose embeddings stand here,
	// or -1.
	Input int
}

// Layout is what llama.cpp's mtmd_tokenize puts in a prompt for an image of the projector,
// prepared with the given tile grid: gemma3's <start_of_image> and <end_of_image> around the
// embeddings (Qwen's <|vision_start|> and <|vision_end|>); mlp's embeddings alone; idefics3's tiles, each after
// <fake_token_around_image><row_R_col_C>, rows ended by a newline, then "\n\n", the overview
// between <fake_token_around_image><global-img> and <fake_token_around_image>.
func (h Hparams) Layout(cols, rows int) []Piece {
	text := func(s string) Piece { return Piece{Text: s, Input: -1} }
	lookup := func(s string) Piece { return Piece{Text: s, Lookup: true, Input: -1} }
	switch h.Projector {
	case ProjectorGemma3:
		return []Piece{text("<start_of_image>"), {Input: 0}, text("<end_of_image>")}
	case ProjectorQwen2VL, ProjectorQwen25VL:
		return []Piece{text("<|vision_start|>"), {Input: 0}, text("<|vision_end|>")}
	case ProjectorIdefics3:
		var out []Piece
		for y := range rows {
			for x := range cols {
				out = append(out, text(fmt.Sprintf("<fake_token_around_image><row_%d_col_%d>", y+1, x+1)), Piece{Input: 1 + y*cols + x})
			}
			if y != rows-1 {
				out = append(out, lookup("\n"))
			}
		}
		return append(out, lookup("\n\n"), lookup("<fake_token_around_image>"), lookup("<global-img>"), Piece{Input: 0}, lookup("<fake_token_around_image>"))
	}
	return []Piece{{Input: 0}}
}
