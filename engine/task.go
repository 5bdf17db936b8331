package engine

import (
	"errors"
	"time"
)

// SeedRandom asks for a seed drawn from the clock, as llama-server's default seed (-1) does.
const SeedRandom = 0xFFFFFFFF

// Params are the per-request generation settings, already validated by the HTTP layer.
type Params struct {
	// NPredict caps generated tokens; -1 means until EOS or the context is full.
	NPredict int
	// Temperature 0 (or below) selects greedy decoding.
	Temperature float32
	// TopK keeps the K most likely tokens; 0 keeps all.
	TopK int
	// TopP keeps the smallest set whose probability mass reaches P; 1 keeps all.
	TopP float32
	// MinP drops tokens below MinP times the top probability; 0 keeps all.
	MinP float32
	// Seed makes sampling reproducible; SeedRandom draws one.
	Seed uint32
	// Stop ends generation when any of these strings appears in the output; the string is not returned.
	Stop []string
	// IgnoreEOS keeps generating past end-of-generation tokens.
	IgnoreEOS bool
}

// DefaultParams returns llama-server's defaults (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05).
func DefaultParams() Params {
	return Params{NPredict: -1, Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: SeedRandom}
}

// Task is one generation request: a tokenized prompt and its settings.
type Task struct {
	Prompt []int32
	Params Params
}

// StopType says why a generation ended, spelled as llama-server's stop_type.
type StopType string

// Stop types as llama-server reports them.
const (
	StopNone  StopType = "none"
	StopEOS   StopType = "eos"
	StopLimit StopType = "limit"
	StopWord  StopType = "word"
)

// Timings are a response's prompt and generation statistics, as llama-server reports them.
type Timings struct {
	CacheN     int
	PromptN    int
	Prompt     time.Duration
	PredictedN int
	Predicted  time.Duration
}

// Result is one message from the engine to a request: a piece of generated text, or the end.
//
// Partial results carry the text of the tokens sampled since the previous result; text is only
// released once it is complete UTF-8 and cannot be the start of a stop string. The final result
// (Stop true) carries any remaining text, why generation stopped, and the timings.
type Result struct {
	Text   string
	Tokens []int32
	Stop   bool

	StopType     StopType
	StoppingWord string
	Truncated    bool

	TokensEvaluated int // prompt tokens
	TokensPredicted int // generated tokens so far
	TokensCached    int // tokens in the slot's cache after this result
	Timings         Timings

	// Err, when set on a final result, is why the request failed.
	Err error
}

// Errors a Submit can return.
var (
	ErrClosed       = errors.New("engine: closed")
	ErrEmptyPrompt  = errors.New("engine: empty prompt")
	ErrPromptTooBig = errors.New("engine: prompt exceeds the context size")
)

// ModelInfo describes the loaded model for /v1/models, /props and logs.
type ModelInfo struct {
	// Name is the alias clients use (--alias), else the file name.
	Name      string
	Path      string
	NCtx      int // context size the engine serves
	NCtxTrain int // context length the model was trained with
	NVocab    int
	NEmbd     int
	NParams   uint64
	Size      uint64 // bytes of tensor data
	FileType  string // e.g. "all F32", "mostly F16"
	// ChatTemplate is tokenizer.chat_template from the GGUF, or "" when absent.
	ChatTemplate string
	// NSlots is the number of parallel sequences.
	NSlots int
}
