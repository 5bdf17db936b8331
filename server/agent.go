package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
	"github.com/wgpu-llama/wgpu-llama/server/sessions"
	"github.com/wgpu-llama/wgpu-llama/tools"
)

// Defaults of the agent loop's settings (Config's zero values).
const (
	DefaultAgentMaxRounds  = 8
	DefaultAgentSessions   = 128
	DefaultAgentSessionTTL = 30 * time.Minute
)

// agentRun is one chat request that names server_tools: the loop of generating, running the
// server tools the model calls and generating again, within the request (llama-server leaves
// the loop to clients).
type agentRun struct {
	chat    *chatRun
	m       *loaded
	req     gen.ChatCompletionRequest // the request, its messages the history the rounds grow
	tools   []*tools.Tool             // the server tools offered
	added   []gen.ChatMessage         // what the rounds added: calls and results
	session sessions.Session[gen.ChatMessage]
	stream  bool
	// callBase numbers this round's tool calls after the earlier rounds' in a stream, so that a
	// client accumulating tool_calls by index keeps each round's apart.
	callBase int
}

// agentTools reads server_tools: nil without it, else the tools it names (400 for a server
// started without tools, a name not enabled, or a value neither "all" nor a list of names).
func (s *Server) agentTools(raw jx.Raw) ([]*tools.Tool, error) {
	if isNull(raw) {
		return nil, nil
	}
	if s.cfg.Tools == nil {
		return nil, invalidRequest("'server_tools' needs tools enabled at startup: start the server with --tools (or MCP servers: --mcp-servers-config, --mcp-servers-json)")
	}
	var names []string
	var all string
	if json.Unmarshal(raw, &all) == nil {
		if all != "all" {
			return nil, invalidRequest(`'server_tools' must be "all" or a list of tool names, not %q`, all)
		}
		return s.cfg.Tools.All(), nil
	}
	if err := json.Unmarshal(raw, &names); err != nil {
		return nil, invalidRequest(`'server_tools' must be "all" or a list of tool names`)
	}
	var out []*tools.Tool
	for _, n := range names {
		t := s.cfg.Tools.Lookup(n)
		if t == nil {
			return nil, invalidRequest("'server_tools': %q is not a tool of this server (enabled: %s)", n, strings.Join(toolNames(s.cfg.Tools.All()), ", "))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// offers reports whether ts holds the tool named name (a Set's names are unique).
func offers(ts []*tools.Tool, name string) bool {
	return slices.ContainsFunc(ts, func(t *tools.Tool) bool { return t.Name == name })
}

func toolNames(ts []*tools.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// runAgent answers a chat request with server_tools: every round's output streams as it comes
// (tool calls numbered on across rounds, each round's results as a tool_results event), and the
// answer carries the session and, as JSON, the messages the rounds added.
func (s *Server) runAgent(ctx context.Context, m *loaded, req *gen.ChatCompletionRequest, serverTools []*tools.Tool, n, nProbs int, w http.ResponseWriter) error {
	if n > 1 {
		return invalidRequest("'server_tools' takes one choice ('n' 1)")
	}
	if nProbs > 0 {
		return invalidRequest("logprobs is not supported with server_tools")
	}
	model := req.Model.Or("")
	if model == "" {
		model = m.name
	}
	run := &chatRun{
		server: s,
		head:   chatHead{id: newChatID(), created: time.Now().Unix(), model: model, fingerprint: s.cfg.SystemFingerprint},
		tok:    m.tok,
		n:      1,
		ping:   s.pingInterval(req.SsePingInterval),
		nCtx:   m.info.NCtx,
	}
	if so, ok := req.StreamOptions.Get(); ok {
		run.includeUsage = so.IncludeUsage.Or(false)
	}
	client, _ := req.Tools.Get()
	for _, t := range client {
		if offers(serverTools, t.Function.Name) {
			return invalidRequest("'tools' and 'server_tools' both name %q", t.Function.Name)
		}
	}
	a := &agentRun{chat: run, m: m, req: *req, tools: serverTools, stream: req.Stream.Or(false)}
	a.startSession(s, req)
	offered := append(slices.Clone(client), agentToolDefs(serverTools)...)
	a.req.Tools = gen.NewOptNilChatTools(offered)

	var sse *sseWriter
	if a.stream {
		sse = newSSE(w, run.ping)
	}
	var finals []engine.Result
	for round := 1; ; round++ {
		msg, final, err := a.round(ctx, s, sse)
		if err != nil || ctx.Err() != nil {
			if sse != nil && sse.started {
				return nil // the failure went out as an error event, or nobody listens
			}
			return err
		}
		finals = append(finals, final)
		calls := msg.Calls
		ours := final.StopType != engine.StopLimit && len(calls) > 0
		for _, c := range calls {
			ours = ours && offers(serverTools, c.Name)
		}
		if !ours || round > s.agentMaxRounds() {
			// The answer: text, a call of the client's tools, or calls the round cap left unrun.
			return a.finish(ctx, s, msg, final.StopType, finals, sse, w)
		}
		results := a.runCalls(ctx, s, msg)
		if sse != nil {
			ev := run.head.chunk(0, gen.ChatDelta{})
			ev.Choices = []gen.ChatChunkChoice{}
			ev.ToolResults = results
			ev.SessionID = gen.NewOptString(a.session.ID)
			if sse.data(&ev) != nil {
				return nil
			}
		}
		a.callBase += len(calls)
	}
}

// agentToolDefs are the server tools as the model sees them, in OpenAI's shape.
func agentToolDefs(ts []*tools.Tool) []gen.ChatTool {
	out := make([]gen.ChatTool, len(ts))
	for i, t := range ts {
		fn := t.Definition()["function"].(map[string]any)
		params, _ := json.Marshal(fn["parameters"])
		out[i] = gen.ChatTool{Type: "function", Function: gen.ChatToolFunction{
			Name: t.Name, Description: gen.NewOptNilString(t.Description), Parameters: jx.Raw(params),
		}}
	}
	return out
}

// startSession finds the request's session (by session_id, or by the conversation it resends)
// or starts one, and sets the history the first round generates from.
func (a *agentRun) startSession(s *Server, req *gen.ChatCompletionRequest) {
	if id, ok := req.SessionID.Get(); ok && id != "" {
		if sess, ok := s.sessions.Get(id); ok {
			a.session = sess
			a.req.Messages = append(sess.History, req.Messages...)
			return
		}
		a.session.ID = id
	} else if sess, ok := s.sessions.Match(visibleMessages(req.Messages)); ok {
		// The request resends the session's conversation without the tool rounds: those come
		// from the session, then what the request adds.
		a.session = sess
		a.req.Messages = append(sess.History, req.Messages[visibleIndex(req.Messages, len(sess.Visible)):]...)
		return
	} else {
		a.session.ID = "sess-" + randomString(24)
	}
	a.req.Messages = slices.Clone(req.Messages)
}

// visibleMessages are the texts of the messages a user sees (system, user and assistant text),
// each with its role, by which a resent conversation finds its session.
func visibleMessages(msgs []gen.ChatMessage) []string {
	var out []string
	for _, m := range msgs {
		if v, ok := visibleText(m); ok {
			out = append(out, v)
		}
	}
	return out
}

func visibleText(m gen.ChatMessage) (string, bool) {
	if m.Role != "system" && m.Role != "user" && m.Role != "assistant" {
		return "", false
	}
	c, _ := m.Content.Get()
	text, ok := c.GetString()
	if !ok {
		var parts []string
		for _, p := range c.ChatContentPartArray {
			parts = append(parts, p.Text.Or(""))
		}
		text = strings.Join(parts, "")
	}
	if text == "" {
		return "", false // an assistant message that only called tools
	}
	return m.Role + "\x00" + text, true
}

// visibleIndex is the index just after the n-th visible message of msgs.
func visibleIndex(msgs []gen.ChatMessage, n int) int {
	seen := 0
	for i, m := range msgs {
		if _, ok := visibleText(m); ok {
			seen++
			if seen == n {
				return i + 1
			}
		}
	}
	return len(msgs)
}

// round generates once from the history, streaming what it writes.
func (a *agentRun) round(ctx context.Context, s *Server, sse *sseWriter) (toolcall.Message, engine.Result, error) {
	run := a.chat
	pl, err := s.chatPlan(ctx, a.m, &a.req, a.stream)
	if err != nil {
		return toolcall.Message{}, engine.Result{}, a.fail(err, sse)
	}
	pl.params.ControlID = run.head.id
	run.syntax, run.nPrompt = pl.syntax, len(pl.prompt)
	set, _, err := submitAll(ctx, a.m.backend, generationTasks(pl.prompt, pl.params, a.stream, slotOf(a.req.IDSlot), 1))
	if err != nil {
		return toolcall.Message{}, engine.Result{}, a.fail(run.fail(err), sse)
	}
	defer set.close()
	parsed := toolcall.NewStream(pl.syntax, newToolCallID)
	for {
		tr, err := set.next(ctx, sse)
		if err == nil && tr.res.Err != nil {
			err = tr.res.Err
		}
		if err != nil {
			return toolcall.Message{}, engine.Result{}, a.fail(run.fail(err), sse)
		}
		res := tr.res
		if res.Progress != nil {
			continue
		}
		deltas, msg := parseStep(parsed, res)
		if sse != nil {
			if err := a.sendDeltas(sse, deltas); err != nil {
				return toolcall.Message{}, engine.Result{}, err
			}
		}
		if res.Stop {
			return msg, res, nil
		}
	}
}

// fail sends a failure as the stream's error event once the stream started; before that, and
// for JSON answers, it is the request's error.
func (a *agentRun) fail(err error, sse *sseWriter) error {
	if sse != nil && sse.started {
		ae, ok := err.(*apiError)
		if !ok {
			ae = a.chat.fail(err)
		}
		_ = sse.fail(ae)
	}
	return err
}

// sendDeltas streams a round's deltas, the first with the role, tool calls numbered on from
// the earlier rounds'.
func (a *agentRun) sendDeltas(sse *sseWriter, deltas []toolcall.Delta) error {
	run := a.chat
	for _, d := range deltas {
		if !sse.started {
			role := run.head.chunk(0, gen.ChatDelta{Role: gen.NewOptString("assistant"), Content: gen.OptNilString{Set: true, Null: true}})
			role.SessionID = gen.NewOptString(a.session.ID)
			if err := sse.data(&role); err != nil {
				return err
			}
		}
		if d.IsTool() {
			d.ToolIndex += a.callBase
		}
		piece := run.head.chunk(0, chatDelta(d))
		if err := sse.data(&piece); err != nil {
			return err
		}
	}
	return nil
}

// runCalls runs a round's calls in order, appending the assistant's message and each result
// to the history; it returns the results.
func (a *agentRun) runCalls(ctx context.Context, s *Server, msg toolcall.Message) []gen.ToolResult {
	call := assistantMessage(msg)
	a.req.Messages = append(a.req.Messages, call)
	a.added = append(a.added, call)
	var results []gen.ToolResult
	for _, c := range msg.Calls {
		text := a.runCall(ctx, s, c)
		results = append(results, gen.ToolResult{ToolCallID: c.ID, Name: c.Name, Content: text})
		tm := gen.ChatMessage{
			Role:       "tool",
			Content:    gen.NewOptNilChatMessageContent(gen.NewStringChatMessageContent(text)),
			ToolCallID: gen.NewOptNilString(c.ID),
			Name:       gen.NewOptNilString(c.Name),
		}
		a.req.Messages = append(a.req.Messages, tm)
		a.added = append(a.added, tm)
	}
	return results
}

// runCall runs one call of a server tool and returns what the model reads of its result.
// Write tools need --agent-allow-write; without it the model reads the refusal.
func (a *agentRun) runCall(ctx context.Context, s *Server, c toolcall.Call) string {
	t := s.cfg.Tools.Lookup(c.Name)
	if t.Write && !s.cfg.AgentAllowWrite {
		return fmt.Sprintf("error: %s was not run: it may change files or run commands, which this server's agent may not do (start the server with --agent-allow-write to allow it)", c.Name)
	}
	var params map[string]any
	if strings.TrimSpace(c.Arguments) != "" {
		if err := json.Unmarshal([]byte(c.Arguments), &params); err != nil {
			return fmt.Sprintf("error: the arguments of %s are not a JSON object: %v", c.Name, err)
		}
	}
	res, err := s.cfg.Tools.Run(ctx, c.Name, tools.Call{Params: params})
	if err != nil {
		return "error: " + err.Error()
	}
	return res.Text()
}

// assistantMessage is a generated message as the history keeps it.
func assistantMessage(msg toolcall.Message) gen.ChatMessage {
	out := gen.ChatMessage{Role: "assistant", Content: gen.NewOptNilChatMessageContent(gen.NewStringChatMessageContent(msg.Content))}
	if msg.Content == "" && len(msg.Calls) > 0 {
		out.Content = gen.OptNilChatMessageContent{Set: true, Null: true} // as OpenAI's: null beside calls
	}
	if msg.Reasoning != "" {
		out.ReasoningContent = gen.NewOptNilString(msg.Reasoning)
	}
	if len(msg.Calls) > 0 {
		calls := make([]gen.ChatToolCall, len(msg.Calls))
		for i, c := range msg.Calls {
			args, _ := json.Marshal(c.Arguments) // OpenAI's form: the JSON text as a string
			calls[i] = gen.ChatToolCall{ID: gen.NewOptNilString(c.ID), Type: "function", Function: gen.ChatToolCallFunction{Name: c.Name, Arguments: jx.Raw(args)}}
		}
		out.ToolCalls = gen.NewOptNilChatToolCallArray(calls)
	}
	return out
}

// finish keeps the session and sends the answer: the last round's message, with the usage of
// every round.
func (a *agentRun) finish(ctx context.Context, s *Server, msg toolcall.Message, stop engine.StopType, finals []engine.Result, sse *sseWriter, w http.ResponseWriter) error {
	run := a.chat
	final := assistantMessage(msg)
	a.session.History = append(a.req.Messages, final)
	a.session.Visible = visibleMessages(a.session.History)
	s.sessions.Put(a.session)
	total := sumResults(finals)
	noteTokens(ctx, total.TokensEvaluated, total.TokensPredicted)
	reason := chatFinishReason(stop, msg)
	if sse == nil {
		resp := &gen.ChatCompletionResponse{
			Created:           run.head.created,
			Model:             run.head.model,
			SystemFingerprint: run.head.fingerprint,
			Object:            "chat.completion",
			Usage:             usage(total),
			ID:                run.head.id,
			Timings:           timings(total.Timings),
			Choices:           []gen.ChatChoice{{FinishReason: reason, Index: 0, Message: responseMessage(msg)}},
			SessionID:         gen.NewOptString(a.session.ID),
			AgentMessages:     a.added,
		}
		return writeJSON(w, resp)
	}
	fin := run.head.chunk(0, gen.ChatDelta{})
	fin.Choices[0].FinishReason = gen.NewNilString(reason)
	fin.SessionID = gen.NewOptString(a.session.ID)
	if !run.includeUsage {
		fin.Timings = gen.NewOptTimings(timings(total.Timings))
	}
	if sse.data(&fin) == nil {
		run.end(sse, total)
	}
	return nil
}

// agentMaxRounds is how many rounds of tool calls a request may run.
func (s *Server) agentMaxRounds() int {
	if s.cfg.AgentMaxRounds > 0 {
		return s.cfg.AgentMaxRounds
	}
	return DefaultAgentMaxRounds
}
