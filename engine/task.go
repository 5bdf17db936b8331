package engine

import (
	"errors"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// SeedRandom asks for a random seed, as llama-server's default seed (-1) does (LLAMA_DEFAULT_SEED:
// each sampler draws its own from std::random_device).
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
	// Grammar, when set, constrains the output to its "root" rule (GBNF, or a JSON schema the
	// HTTP layer converted); compiled once per request on the request's goroutine.
	Grammar *grammar.Grammar
	// GrammarTriggers, when any, make the grammar lazy (llama-server's grammar_lazy): the
	// output is free until a trigger appears in it, and from the trigger on it must match the
	// grammar (whose root starts with the trigger), as for tool calls the model may or may
	// not make.
	GrammarTriggers []GrammarTrigger
	// ReasoningBudget, when set, caps the tokens spent inside thinking blocks (llama-server's
	// reasoning budget); nil leaves thinking unbounded.
	ReasoningBudget *ReasoningBudget
	// ControlID names the generation for control requests (EndReasoning): llama-server's
	// completion id ("chatcmpl-..."); empty names none.
	ControlID string
	// ReasoningControl lets a control request end the thinking block (llama-server's
	// reasoning_control); the HTTP layer arms an unbounded ReasoningBudget for it.
	ReasoningControl bool

	// RepeatPenalty divides positive (multiplies negative) logits of tokens seen in the last
	// RepeatLastN tokens; 1 is off (llama-server's repeat_penalty).
	RepeatPenalty float32
	// RepeatLastN is how many recent tokens the penalties look at: 0 off, -1 the whole history
	// (the context, as llama-server's -1 = context size).
	RepeatLastN int
	// PresencePenalty is subtracted once from the logit of every token seen; 0 is off.
	PresencePenalty float32
	// FrequencyPenalty is subtracted from a token's logit once per occurrence; 0 is off.
	FrequencyPenalty float32

	// DRYMultiplier scales the DRY ("don't repeat yourself") penalty; 0 is off.
	DRYMultiplier float32
	// DRYBase is the base of DRY's exponential penalty (1.75).
	DRYBase float32
	// DRYAllowedLength is the repeat length DRY leaves alone (2).
	DRYAllowedLength int
	// DRYPenaltyLastN is how many recent tokens DRY scans: 0 off, -1 the whole history.
	DRYPenaltyLastN int
	// DRYSequenceBreakers are strings that end a repeated sequence for DRY.
	DRYSequenceBreakers []string

	// TopNSigma keeps tokens within TopNSigma standard deviations of the top logit; <= 0 is off
	// (llama-server's default -1).
	TopNSigma float32
	// TypicalP is locally typical sampling's mass; 1 is off.
	TypicalP float32
	// XTCProbability is the chance that XTC removes the top choices; 0 is off.
	XTCProbability float32
	// XTCThreshold is the probability above which XTC removes all but the least likely token.
	XTCThreshold float32
	// DynatempRange makes the temperature vary in [Temperature-R, Temperature+R] with the
	// entropy of the candidates; 0 is off.
	DynatempRange float32
	// DynatempExponent shapes the entropy-to-temperature curve (1).
	DynatempExponent float32

	// Mirostat selects Mirostat sampling (1 or 2) in place of the sampler chain; 0 is off.
	Mirostat int
	// MirostatTau is Mirostat's target surprise (5).
	MirostatTau float32
	// MirostatEta is Mirostat's learning rate (0.1).
	MirostatEta float32

	// AdaptiveTarget is the adaptive-p sampler's target probability (0..1; negative, the
	// default -1, draws from the distribution unchanged). The sampler runs, as the chain's
	// final draw, only where Samplers names "adaptive_p".
	AdaptiveTarget float32
	// AdaptiveDecay is adaptive-p's decay of its moving average of picked probabilities (0.9,
	// clamped to 0..0.99).
	AdaptiveDecay float32

	// LogitBias is added to the logits of the given tokens before any other sampler; a bias
	// of -Inf bans the token.
	LogitBias []LogitBias
	// NProbs asks for the probabilities of the NProbs most likely tokens at each step; 0 is off.
	NProbs int
	// PostSamplingProbs reports the probabilities after the sampler chain instead of the
	// model's softmax.
	PostSamplingProbs bool
	// MinKeep is the fewest tokens top_p, min_p, typical_p and xtc leave; 0 means 1.
	MinKeep int
	// SkipPromptCache starts from an empty cache instead of reusing a cached prompt prefix
	// (llama-server's cache_prompt false).
	SkipPromptCache bool
	// NCacheReuse is the shortest chunk of the slot's cache, past the common prefix, that is
	// moved into place rather than recomputed (llama-server's n_cache_reuse); 0 uses the
	// engine's Config.CacheReuse.
	NCacheReuse int
	// NKeep is how many prompt tokens a context shift keeps (-1: all; BOS is always kept).
	NKeep int
	// NDiscard is how many tokens a context shift drops; 0 drops half of those not kept.
	NDiscard int
	// TMaxPredictMs stops generation once this many milliseconds have passed since the first
	// generated token and a newline has been generated; 0 is off.
	TMaxPredictMs int
	// NIndent, when positive, ends generation (stop type limit) at the first line that starts
	// with fewer than NIndent spaces or tabs, cutting that line after its indentation
	// (llama-server's n_indent, for code completion).
	NIndent int
	// ReturnProgress asks for prompt progress results while the prompt is evaluated (one when
	// the request starts, then one per prompt chunk): llama-server's return_progress.
	ReturnProgress bool
	// TimingsPerToken is llama-server's timings_per_token, for generation_settings: the
	// endpoints then send the timings every result carries (see Result) on every event.
	TimingsPerToken bool

	// Samplers is the chain's order, in llama-server's names (see DefaultSamplers); nil means
	// the default order. Logit bias always runs first and the seeded draw last.
	Samplers []string

	// SpecNMax, SpecNMin and SpecPMin override the engine's speculative decoding settings for
	// this request (llama-server's speculative.n_max, speculative.n_min and
	// speculative.p_min; see SpecConfig); -1 keeps the engine's. They do nothing when the
	// engine runs without speculative decoding.
	SpecNMax int
	SpecNMin int
	SpecPMin float32
	// Lora are the scales of the engine's LoRA adapters (by id) for this request; nil: the
	// global scales (SetAdapterScales). Adapters past its end get 0.
	Lora []float32
	// LoraListed is the request's lora field as it came, for reporting
	// (generation_settings.lora).
	LoraListed []AdapterScale
}

// GrammarTrigger is a text that starts a lazy grammar: anywhere in the output, or with AtStart
// only at its beginning (after whitespace).
type GrammarTrigger struct {
	Word    string
	AtStart bool
}

// LogitBias is one token's logit adjustment.
type LogitBias struct {
	Token int32
	Bias  float32
}

// DefaultParams returns llama-server's defaults (temperature 0.8, top_k 40, top_p 0.95,
// min_p 0.05, every other sampler off).
func DefaultParams() Params {
	return Params{
		NPredict: -1, Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: SeedRandom,
		RepeatPenalty: 1, RepeatLastN: 64,
		DRYBase: 1.75, DRYAllowedLength: 2, DRYPenaltyLastN: 64,
		DRYSequenceBreakers: []string{"\n", ":", "\"", "*"},
		TopNSigma:           -1, TypicalP: 1, XTCThreshold: 0.1, DynatempExponent: 1,
		MirostatTau: 5, MirostatEta: 0.1, AdaptiveTarget: -1, AdaptiveDecay: 0.9,
		Samplers: DefaultSamplers(),
		SpecNMax: -1, SpecNMin: -1, SpecPMin: -1,
	}
}

// TaskKind says what a task asks of the model.
type TaskKind int

// Task kinds.
const (
	// TaskGenerate generates text after the prompt (the zero value).
	TaskGenerate TaskKind = iota
	// TaskEmbed computes the prompt's embedding, pooled as the engine pools (Config.Pooling).
	TaskEmbed
	// TaskRerank scores the prompt, a query and a document already formatted for the
	// reranker, with its classification head (rank pooling).
	TaskRerank
)

// Task is one request: a tokenized prompt, what to do with it, and for generation its settings.
type Task struct {
	Kind   TaskKind
	Prompt []int32
	Params Params
	// Stream records that the client streams the result; the engine only reports it (in
	// SlotInfo, as llama-server's slot params do).
	Stream bool
	// Slot, when set, is the slot a generation must run in (llama-server's id_slot): it waits
	// for that slot while it is busy, letting later requests pass. nil lets the engine choose.
	Slot *int
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
	// DraftN is how many drafted tokens speculative decoding offered for verification, and
	// DraftNAccepted how many of them the target kept (llama-server's draft_n and
	// draft_n_accepted, reported only when DraftN > 0).
	DraftN         int
	DraftNAccepted int
}

// Result is one message from the engine to a request: a piece of generated text, or the end.
//
// Partial results carry the text of the tokens sampled since the previous result; text is only
// released once it is complete UTF-8 and cannot be the start of a stop string. The final result
// (Stop true) carries any remaining text, why generation stopped, and the timings (partial
// results carry the timings so far).
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

	// Slot is the slot the request ran in (llama-server's id_slot).
	Slot int

	// Progress, on a partial result that carries no text, reports how far the prompt's
	// evaluation has got (Params.ReturnProgress).
	Progress *PromptProgress

	// Probs, when Params.NProbs > 0, holds one entry per token in Tokens: the sampled token's
	// probability and the NProbs most likely candidates at that step.
	Probs []StepProbs

	// Embedding is a TaskEmbed's or TaskRerank's answer, on its final result. TaskEmbed: one
	// pooled vector of NEmbd, not normalised (the caller normalises as its request asks), or
	// with pooling none one vector per prompt token. TaskRerank: one row, the classification
	// head's outputs, whose first is the relevance score.
	Embedding [][]float32

	// Err, when set on a final result, is why the request failed.
	Err error
}

// PromptProgress is llama-server's prompt_progress: of Total prompt tokens, Cache were reused
// from the KV cache and Processed (cached ones included) are in the cache now, Elapsed after
// the prompt's evaluation started.
type PromptProgress struct {
	Total, Cache, Processed int
	Elapsed                 time.Duration
}

// StepProbs are one generation step's probabilities (llama-server's completion_probabilities).
type StepProbs struct {
	ID   int32
	Prob float32
	Top  []TokenProb
}

// Errors a Submit can return.
var (
	ErrClosed       = errors.New("engine: closed")
	ErrEmptyPrompt  = errors.New("engine: empty prompt")
	ErrPromptTooBig = errors.New("engine: prompt exceeds the context size")
	// ErrQueueFull: Config.MaxQueue requests already wait for a slot (load shedding).
	ErrQueueFull = errors.New("engine: too many requests are waiting for a slot")
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
	// Embeddings says whether embedding and rerank tasks are served (--embeddings).
	Embeddings bool
	// Pooling is how embeddings are pooled: --pooling, else the model file's pooling_type,
	// else none. PoolRank serves rerank tasks.
	Pooling model.Pooling
	// RerankTemplate is the model's tokenizer.chat_template.rerank, "" when it has none.
	RerankTemplate string
	// SpecType is the speculative decoding method in use, SpecNone when off.
	SpecType SpecType
	// ImageTokens is the most positions an image input takes, 0 without a projector (--mmproj).
	ImageTokens int
	// Split lists the devices holding the model's layers: one, or each of a split's.
	Split []DeviceLayers
}
