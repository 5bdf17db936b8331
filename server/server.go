// Package server is wgpu-llama's HTTP layer: llama-server's API (health, models, native and
// OpenAI-style completions, template rendering, tokenization) on top of a Backend that
// generates tokens, plus resumable chat streams (streams.go), our extension.
//
// Routing, request decoding and validation come from package gen, which ogen generates from
// openapi/openapi.yaml. Server implements gen.Handler for the plain JSON operations and
// gen.RawHandler for the completion operations, whose responses it writes itself because they
// may be server-sent event streams (see sse.go). Requests are turned into finished engine tasks
// here, on the request goroutine: parameters are checked, chat templates rendered and prompts
// tokenized before the engine sees them.
package server

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/model/chat/autoparse"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
	"github.com/wgpu-llama/wgpu-llama/server/resumable"
	"github.com/wgpu-llama/wgpu-llama/server/sessions"
	"github.com/wgpu-llama/wgpu-llama/server/static"
	"github.com/wgpu-llama/wgpu-llama/tools"
)

// Backend generates text for the server; the engine satisfies it.
type Backend interface {
	// Submit queues t and returns the channel its results arrive on, closed after the final
	// (Stop true) result. Cancelling ctx abandons the task.
	Submit(ctx context.Context, t engine.Task) (<-chan engine.Result, error)
	// Tokenizer is the loaded model's tokenizer.
	Tokenizer() *tokenizer.Tokenizer
	// Info describes the loaded model.
	Info() engine.ModelInfo
}

// SlotBackend is a Backend whose slots can be inspected, saved, restored and erased (GET and
// POST /slots); the engine satisfies it. A backend without it answers those with 501.
type SlotBackend interface {
	Slots(ctx context.Context) ([]engine.SlotInfo, error)
	SaveSlot(ctx context.Context, id int, path string) (engine.SlotFile, error)
	RestoreSlot(ctx context.Context, id int, path string) (engine.SlotFile, error)
	EraseSlot(ctx context.Context, id int) (int, error)
}

// StatsBackend is a Backend that counts its work for GET /metrics; the engine satisfies it.
type StatsBackend interface {
	Stats() engine.Stats
}

// HealthBackend is a backend that can be unable to serve while loaded: after a GPU device
// loss, until its model is loaded again (engine.Engine.Health). /health answers 503 with the
// reason meanwhile.
type HealthBackend interface {
	Health() error
}

// Defaults for Config's zero values.
const (
	// DefaultMaxBodyBytes bounds request bodies when Config.MaxBodyBytes is 0.
	DefaultMaxBodyBytes = 32 << 20
	// DefaultSystemFingerprint is reported in OpenAI-style responses (and /props build_info) when
	// Config.SystemFingerprint is empty. It is llama-server's "b<build>-<commit>" form naming the
	// llama.cpp build whose wire behaviour this server follows: clients check it (the OpenAI
	// library tests of llama.cpp's suite require a leading "b").
	DefaultSystemFingerprint = "b10587-3f545becc"
)

// Config holds the server's settings.
type Config struct {
	// Alias is the model name reported to clients (llama-server's --alias); empty uses the
	// backend's ModelInfo.Name.
	Alias string
	// Aliases are every name of the model (llama-server's --alias list, sorted) and Tags its
	// --tags, both listed in /v1/models. Empty Aliases lists Alias alone, or none without it.
	Aliases, Tags []string
	// Verbose is --verbose: OpenAI-style answers carry "__verbose", the native answer, unless
	// a request sets "verbose": false (requests may also ask for it).
	Verbose bool
	// MaxBodyBytes limits request bodies; larger ones get 413. 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// SystemFingerprint is the system_fingerprint of OpenAI-style responses (llama-server reports
	// its build, e.g. "b10587-3f545becc"). Empty means DefaultSystemFingerprint.
	SystemFingerprint string
	// ChatTemplate, when set, replaces the model's chat template (llama-server's --chat-template
	// and --chat-template-file; see chat.Resolve). Nil uses the GGUF's tokenizer.chat_template,
	// or ChatML when it has none. Either way bos_token and eos_token come from the model.
	ChatTemplate *chat.Template
	// Streams bounds resumable streams (X-Conversation-Id): bytes kept per stream, how long a
	// finished one stays, how often expired ones are collected, and the clock for all three.
	Streams resumable.Config
	// ReasoningFormat is llama-server's --reasoning-format: what chat answers do with <think>
	// blocks (requests may override it with reasoning_format). The zero value is auto, which
	// extracts them into reasoning_content as deepseek does.
	ReasoningFormat toolcall.ReasoningFormat
	// Reasoning is llama-server's --reasoning: auto renders enable_thinking true for templates
	// that support thinking; on and off also make it a default chat_template_kwargs entry.
	Reasoning chat.Reasoning
	// NoJinja is --no-jinja: chat templates render with llama.cpp's built-in formats (picked by
	// name, or by the markers a template source contains) rather than as Jinja, and requests may
	// not use tools.
	NoJinja bool
	// ChatTemplateKwargs is --chat-template-kwargs: a JSON object of template variables every
	// request gets, under its own chat_template_kwargs. Nil for none.
	ChatTemplateKwargs json.RawMessage
	// ReasoningBudget is --reasoning-budget: the tokens an answer may spend thinking before
	// the end of its thinking block is forced (0 closes the block at once); nil or negative is
	// unbounded. A request's reasoning_budget_tokens overrides it.
	ReasoningBudget *int
	// ReasoningBudgetMessage is --reasoning-budget-message: text forced before the end of a
	// thinking block the budget cuts.
	ReasoningBudgetMessage string
	// NoPrefillAssistant is --no-prefill-assistant: a conversation that ends with an assistant
	// message gets a new assistant turn instead of continuing that message (a request's
	// continue_final_message still continues it).
	NoPrefillAssistant bool
	// SPMInfill is --spm-infill: infill prompts put the suffix before the prefix.
	SPMInfill bool

	// APIKeys, when any, must accompany every request but those to the public paths, as
	// "Authorization: Bearer KEY" or "X-Api-Key: KEY" (llama-server's --api-key).
	APIKeys []string
	// Metrics enables GET /metrics (--metrics).
	Metrics bool
	// MetricsCompat names another engine whose series /metrics writes too (--metrics-compat):
	// MetricsVLLM or "" for none.
	MetricsCompat string
	// NoSlots disables GET /slots (--no-slots); llama-server enables it by default.
	NoSlots bool
	// Props enables POST /props (--props).
	Props bool
	// WriteTimeout bounds each write of a response (llama-server's --timeout, a socket send
	// timeout): a long generation or stream is never cut while it keeps writing. 0 is none.
	WriteTimeout time.Duration
	// SSEPingInterval is --sse-ping-interval: the silence after which a stream sends a
	// keep-alive comment, unless a request's sse_ping_interval says otherwise. 0 means
	// DefaultSSEPingInterval; negative sends none.
	SSEPingInterval time.Duration
	// CORS is the cross-origin policy (--cors-origins and friends); the zero value is
	// llama-server's default.
	CORS CORS
	// SlotSavePath is the directory POST /slots/{id}?action=save|restore uses
	// (--slot-save-path); empty disables slot actions.
	SlotSavePath string
	// UI is the web app served at "/" (index.html at its root; the other files at their paths,
	// needing no API key); nil serves none, and "/" answers 404 as llama-server's --no-ui.
	UI fs.FS
	// Tools are the tools GET and POST /tools offer (--tools and MCP servers); nil answers 403.
	Tools *tools.Set
	// CORSProxy enables /cors-proxy (--ui-mcp-proxy); off, it answers 403.
	CORSProxy bool
	// MCPEndpoint serves the server's own MCP server at /mcp (--mcp-endpoint): the model's
	// complete, chat and embed, and the built-in tools of Tools; off, it answers 403.
	MCPEndpoint bool
	// MediaPath is the directory file:// image URLs may name (--media-path); empty refuses them.
	MediaPath string
	// MediaFetch lets requests name http(s) image URLs, which the server downloads (at most
	// 10 MB, 10 seconds each, as llama-server; --media-fetch). Off, they are refused: reaching
	// other hosts is off by default.
	MediaFetch bool
	// MediaMarker is the text that stands for an image in prompts (llama-server's
	// LLAMA_MEDIA_MARKER); empty draws a random one per server, as llama-server does.
	MediaMarker string
	// AgentMaxRounds bounds the rounds of server tool calls one chat request runs
	// (--agent-max-rounds); 0 means DefaultAgentMaxRounds.
	AgentMaxRounds int
	// AgentAllowWrite lets the agent loop run tools that write (--agent-allow-write).
	AgentAllowWrite bool
	// AgentSessions and AgentSessionTTL bound the agent loop's sessions: how many are kept and
	// how long an unused one stays (--agent-sessions, --agent-session-ttl); 0 means the
	// defaults.
	AgentSessions   int
	AgentSessionTTL time.Duration
	// Defaults are the generation settings a request's unset fields take (llama-server's -n,
	// --temp, --top-k, --top-p, --min-p, --seed); nil means engine.DefaultParams().
	Defaults *engine.Params
}

// Server serves the API. Until SetBackend is called every route answers 503 "Loading model".
type Server struct {
	cfg     Config
	logger  *log.Logger
	api     *gen.Server
	ready   atomic.Pointer[loaded]
	streams *resumable.Store

	mediaMarker string       // /props' media_marker, random per server as in llama-server
	metrics     metricsState // see metrics.go

	ui *static.Handler // Config.UI's files, or nil

	sessions *sessions.Store[gen.ChatMessage] // the agent loop's conversations (agent.go)

	vertex        *Vertex                  // Google Cloud Vertex AI routes, when served (gcp.go)
	vertexFormats map[string]predictTarget // the routes a predict instance may name
}

// loaded is what SetBackend prepares once per model.
type loaded struct {
	backend  Backend
	tok      *tokenizer.Tokenizer
	info     engine.ModelInfo
	name     string
	template chat.Template
	caps     chat.Caps // the template's capabilities, for /props
	// format reads the output of a Jinja template: one of llama.cpp's dedicated formats, or what
	// its autoparser found in the template (nil for built-in formats, or when the analysis
	// failed): the syntax of reasoning, content and tool calls.
	format   autoparse.Builder
	defaults *engine.Params // Config.Defaults
	// imageMarker is the server's media marker when the model takes images, else "".
	imageMarker string
	// lookups caches lookupToken's answers (text to ids).
	lookups sync.Map
	created int64 // Unix time the model became ready, the "created" of /v1/models
}

var (
	_ gen.Handler    = (*Server)(nil)
	_ gen.RawHandler = (*Server)(nil)
)

// New returns a server with no backend; logger receives request logs and warnings.
func New(cfg Config, logger *log.Logger) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.SystemFingerprint == "" {
		cfg.SystemFingerprint = DefaultSystemFingerprint
	}
	if logger == nil {
		logger = log.Default()
	}
	if cfg.Streams.EndEvent == nil {
		cfg.Streams.EndEvent = stoppedStreamEvent
	}
	if cfg.AgentSessions <= 0 {
		cfg.AgentSessions = DefaultAgentSessions
	}
	if cfg.AgentSessionTTL <= 0 {
		cfg.AgentSessionTTL = DefaultAgentSessionTTL
	}
	if cfg.MediaMarker == "" {
		cfg.MediaMarker = "<__media_" + randomString(32) + "__>"
	}
	s := &Server{cfg: cfg, logger: logger, streams: resumable.NewStore(cfg.Streams), mediaMarker: cfg.MediaMarker,
		sessions: sessions.New[gen.ChatMessage](cfg.AgentSessions, cfg.AgentSessionTTL, nil)}
	api, err := gen.NewServer(s, s,
		gen.WithNotFound(notFound),
		gen.WithMethodNotAllowed(methodNotAllowed),
		gen.WithErrorHandler(s.decodeError),
	)
	if err != nil {
		// Only invalid static options make NewServer fail.
		panic("server: building the generated router: " + err.Error())
	}
	s.api = api
	if cfg.UI != nil {
		s.ui = static.New(cfg.UI)
	}
	return s
}

// Close cancels the resumable streams still generating, which ends their followers' responses,
// and stops collecting expired ones; new resumable streams are refused from then on. Call it
// before shutting the HTTP server down, which waits for open responses.
func (s *Server) Close() { s.streams.Close() }

// SetBackend makes the server ready, serving b from now on.
func (s *Server) SetBackend(b Backend) {
	info := b.Info()
	name := s.cfg.Alias
	if name == "" {
		name = info.Name
	}
	tok := b.Tokenizer()
	tmpl := s.chatTemplate(info, tok)
	l := &loaded{
		backend:  b,
		tok:      tok,
		info:     info,
		name:     name,
		template: tmpl,
		caps:     tmpl.Caps(),
		defaults: s.cfg.Defaults,
		created:  time.Now().Unix(),
	}
	l.format = s.outputFormat(l)
	if vb, _ := l.visionOf(); vb != nil {
		l.imageMarker = s.mediaMarker
	}
	s.ready.Store(l)
	s.logger.Info("model ready", "model", name, "n_ctx", info.NCtx, "slots", info.NSlots, "chat_template", l.template.Name)
}

// outputFormat picks how a Jinja template's output is read, as common_chat_templates_apply_jinja
// does: a dedicated format when the template's source matches one, else the differential
// autoparser's analysis. llama-server fails every chat request of a template it cannot
// analyse; here the failure is logged once and such a template answers in plain content.
func (s *Server) outputFormat(l *loaded) autoparse.Builder {
	if l.template.Builtin() || !l.template.IsJinja() {
		return nil
	}
	if f := autoparse.Specialized(l.template.Source); f != nil {
		return f
	}
	a, err := autoparse.Analyze(l.template.Source, l.caps.ForAnalysis(), l.template.RenderJSON)
	if err != nil {
		s.logger.Warn("the chat template's tool-call and reasoning syntax could not be analysed; chat answers are read as plain content", "err", err)
		return nil
	}
	return a
}

// chatTemplate is the template chat requests render with: the configured override, else the
// model's own (chat.ForModel), with bos_token and eos_token set to the texts of the model's BOS
// and EOS tokens as llama-server sets them ("" for a token the vocabulary lacks).
func (s *Server) chatTemplate(info engine.ModelInfo, tok *tokenizer.Tokenizer) chat.Template {
	var t chat.Template
	if s.cfg.ChatTemplate != nil {
		t = *s.cfg.ChatTemplate
	} else {
		t = chat.ForModel(info.ChatTemplate, s.logger)
	}
	if s.cfg.NoJinja && !t.Builtin() {
		// As llama-server without Jinja: the template's markers pick a built-in format, and a
		// template none matches falls back to ChatML.
		legacy, ok := chat.NoJinja(t.Source)
		if !ok {
			s.logger.Warn("the chat template is not one of the built-in formats --no-jinja supports; falling back to chatml")
			legacy, _ = chat.NoJinja("chatml")
		}
		t = legacy
	}
	return t.WithSpecialTokens(specialText(tok, tok.BOS()), specialText(tok, tok.EOS()))
}

// specialText is the text of a special token as templates see it, "" when id is absent (-1).
func specialText(tok *tokenizer.Tokenizer, id int32) string {
	if id < 0 {
		return ""
	}
	return string(tok.Piece(id, true))
}

// Handler returns the HTTP handler: the generated router behind logging, CORS, the loading
// gate, the web UI's files (which need no key), the API key check, /tools, /cors-proxy and
// /mcp, waking a sleeping model, the request body limit and the body's text checks, in
// llama-server's order.
func (s *Server) Handler() http.Handler {
	return chain(s.routes(),
		s.logRequests,
		s.cors,
		s.requireBackend,
		s.serveUI,
		s.requireKey,
		s.toolRoutes,
		s.wakeBackend,
		s.writeDeadlines,
		s.limitBody,
		s.checkJSONBody,
		jsonBody,
	)
}

// model returns the loaded backend, or nil while loading. requireBackend answers 503 before any
// handler runs, so handlers see nil only in tests that call them directly.
func (s *Server) model() *loaded { return s.ready.Load() }
