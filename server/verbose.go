package server

import (
	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// verboseOf says whether an OpenAI-style answer carries "__verbose": the request's verbose
// field, else the server's --verbose (llama-server's verbosity > 9).
func (s *Server) verboseOf(v gen.OptNilBool) bool { return v.Or(s.cfg.Verbose) }

// verboseAnswer is the "__verbose" of an OpenAI-style answer, as llama-server's
// to_json_non_oaicompat: the native /completion answer of the generation of prompt with params
// that wrote text and ended with final.
func (s *Server) verboseAnswer(m *loaded, prompt []int32, params engine.Params, stream bool, text string, final engine.Result) gen.CompletionResponse {
	settings := generationSettings(params, stream, m.info.SpecType)
	settings.ReasoningFormat = s.cfg.ReasoningFormat.String()
	c := &completion{tok: m.tok, model: m.name, promptText: promptEcho(m.tok, prompt), settings: settings}
	c.content.WriteString(text)
	return c.final(final, text)
}
