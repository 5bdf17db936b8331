package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/mcpservers"
	"github.com/wgpu-llama/wgpu-llama/server/sessions"
	"github.com/wgpu-llama/wgpu-llama/tools"
)

// recordingTool is a server tool that answers "noted: ARGS" and counts its calls.
type recordingTool struct {
	mu    sync.Mutex
	calls []map[string]any
}

func (r *recordingTool) tool(name string, write bool) *tools.Tool {
	return &tools.Tool{
		Name: name, DisplayName: name, Kind: "builtin", Write: write,
		Description: "Take a note",
		Parameters:  map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []any{"text"}},
		Run: func(_ context.Context, c tools.Call) (tools.Result, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.calls = append(r.calls, c.Params)
			return tools.Result{"plain_text_response": fmt.Sprintf("noted: %v", c.Params["text"])}, nil
		},
	}
}

func (r *recordingTool) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// agentServer serves stories260K under wrappedTemplate, whose calls tool_choice "required"
// forces, with the given server tools.
func agentServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	cfg.Alias = "stories260K"
	cfg.ChatTemplate = mustTemplate(t, wrappedTemplate)
	srv := New(cfg, testLogger())
	// 2048 tokens of context: a session's history and two rounds of forced calls fit
	srv.SetBackend(enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 2048, Slots: 1}))
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	return srv, ts
}

// agentAnswer is the JSON answer of a request with server_tools.
type agentAnswer struct {
	Choices []struct {
		FinishReason string          `json:"finish_reason"`
		Message      json.RawMessage `json:"message"`
	}
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	}
	SessionID     string            `json:"session_id"`
	AgentMessages []gen.ChatMessage `json:"agent_messages"`
	Error         *struct{ Message string }
}

func postAgent(t *testing.T, url, body string) (int, agentAnswer) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a agentAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return resp.StatusCode, a
}

func toolContents(msgs []gen.ChatMessage) []string {
	var out []string
	for _, m := range msgs {
		if m.Role == "tool" {
			c, _ := m.Content.Get()
			s, _ := c.GetString()
			out = append(out, m.Name.Or("")+"="+s)
		}
	}
	return out
}

const requiredAgent = `"tool_choice":"required","temperature":0,"seed":42`

// The loop runs the forced call, appends the call and its result, and generates again; the
// round cap (1) ends it with the next round's calls unrun. Usage sums both generations, and the
// session keeps the whole history.
func TestAgentLoopRoundCap(t *testing.T) {
	notes := &recordingTool{}
	set, _ := tools.NewSet(nil)
	set.Add(notes.tool("note", false))
	srv, ts := agentServer(t, Config{Tools: set, AgentMaxRounds: 1})
	code, a := postAgent(t, ts.URL, `{"messages":[{"role":"user","content":"Write it down"}],"server_tools":["note"],`+requiredAgent+`}`)
	if code != 200 {
		t.Fatalf("%d %+v", code, a.Error)
	}
	if notes.count() != 1 || len(a.AgentMessages) != 2 || a.AgentMessages[0].Role != "assistant" || !a.AgentMessages[0].ToolCalls.Set {
		t.Fatalf("%d calls ran; added %+v", notes.count(), a.AgentMessages)
	}
	if got := toolContents(a.AgentMessages); len(got) != 1 || !strings.HasPrefix(got[0], "note=noted: ") {
		t.Errorf("results %q", got)
	}
	if a.Choices[0].FinishReason != "tool_calls" || !strings.Contains(string(a.Choices[0].Message), `"name":"note"`) {
		t.Errorf("the capped answer %s %s", a.Choices[0].FinishReason, a.Choices[0].Message)
	}
	if a.Usage.PromptTokens < 150 || a.Usage.CompletionTokens < 100 {
		t.Errorf("usage %+v does not sum two rounds", a.Usage)
	}
	sess, ok := srv.sessions.Get(a.SessionID)
	if !ok || !strings.HasPrefix(a.SessionID, "sess-") || len(sess.History) != 4 {
		t.Fatalf("session %q: %v, %d messages", a.SessionID, ok, len(sess.History))
	}
	if roles := fmt.Sprint(sess.History[0].Role, sess.History[1].Role, sess.History[2].Role, sess.History[3].Role); roles != "userassistanttoolassistant" {
		t.Errorf("history roles %s", roles)
	}
}

// A call of a tool the request itself offers ends the turn, as without server_tools.
func TestAgentClientToolEndsTurn(t *testing.T) {
	notes := &recordingTool{}
	set, _ := tools.NewSet(nil)
	set.Add(notes.tool("note", false))
	_, ts := agentServer(t, Config{Tools: set})
	code, a := postAgent(t, ts.URL, `{"messages":[{"role":"user","content":"Weather?"}],"server_tools":"all",
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
		"tool_choice":{"type":"function","function":{"name":"get_weather"}},"temperature":0}`)
	if code != 200 || notes.count() != 0 || len(a.AgentMessages) != 0 || a.Choices[0].FinishReason != "tool_calls" || !strings.Contains(string(a.Choices[0].Message), `"name":"get_weather"`) {
		t.Errorf("%d: %d server calls, added %v, answer %s", code, notes.count(), a.AgentMessages, a.Choices[0].Message)
	}
}

// A tool that writes runs only with AgentAllowWrite; without it the model reads the refusal.
func TestAgentWriteToolRefused(t *testing.T) {
	for _, allow := range []bool{false, true} {
		notes := &recordingTool{}
		set, _ := tools.NewSet(nil)
		set.Add(notes.tool("scribble", true))
		_, ts := agentServer(t, Config{Tools: set, AgentMaxRounds: 1, AgentAllowWrite: allow})
		_, a := postAgent(t, ts.URL, `{"messages":[{"role":"user","content":"Scribble"}],"server_tools":["scribble"],`+requiredAgent+`}`)
		got := toolContents(a.AgentMessages)
		if allow && (notes.count() != 1 || !strings.HasPrefix(got[0], "scribble=noted: ")) {
			t.Errorf("allowed: %d calls, results %q", notes.count(), got)
		}
		if !allow && (notes.count() != 0 || len(got) != 1 || got[0] != "scribble=error: scribble was not run: it may change files or run commands, which this server's agent may not do (start the server with --agent-allow-write to allow it)") {
			t.Errorf("refused: %d calls, results %q", notes.count(), got)
		}
	}
}

// A built-in tool (get_info) and an MCP server's (the llama.cpp suite's echo fixture) run in
// the loop, streamed: each round's calls numbered on, each round's results as an event.
func TestAgentStreamBuiltinAndMCP(t *testing.T) {
	fixture := shareddata.Path(t, "llama-server-tests", "upstream", "tools", "server", "tests", "fixtures", "mcp_echo_server.py")
	mgr := mcpservers.Start(context.Background(), []mcpservers.Config{{Name: "echo", Command: "python3", Args: []string{fixture}, Timeout: 10 * time.Second}}, log.New(io.Discard))
	t.Cleanup(mgr.Close)
	set, _ := tools.NewSet([]string{"get_info"})
	set.Add(mgr.Tools()...)
	_, ts := agentServer(t, Config{Tools: set, AgentMaxRounds: 1})
	for _, name := range []string{"get_info", "echo_echo"} {
		resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(
			`{"messages":[{"role":"user","content":"Go"}],"server_tools":["`+name+`"],"stream":true,"stream_options":{"include_usage":true},`+requiredAgent+`}`))
		if err != nil {
			t.Fatal(err)
		}
		var results []gen.ToolResult
		var indexes []int
		var finish []string
		sessions := map[string]bool{}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		last := ""
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			last = line
			if line == "[DONE]" {
				break
			}
			var c struct {
				Choices []struct {
					FinishReason *string `json:"finish_reason"`
					Delta        struct {
						ToolCalls []struct {
							Index int
							ID    string
						} `json:"tool_calls"`
					}
				}
				SessionID   string           `json:"session_id"`
				ToolResults []gen.ToolResult `json:"tool_results"`
			}
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				t.Fatalf("chunk %s: %v", line, err)
			}
			results = append(results, c.ToolResults...)
			if c.SessionID != "" {
				sessions[c.SessionID] = true
			}
			for _, ch := range c.Choices {
				for _, tc := range ch.Delta.ToolCalls {
					if tc.ID != "" {
						indexes = append(indexes, tc.Index)
					}
				}
				if ch.FinishReason != nil {
					finish = append(finish, *ch.FinishReason)
				}
			}
		}
		resp.Body.Close()
		if last != "[DONE]" || fmt.Sprint(indexes) != "[0 1]" || fmt.Sprint(finish) != "[tool_calls]" || len(sessions) != 1 {
			t.Errorf("%s: last %s, call indexes %v, finish reasons %v, sessions %v", name, last, indexes, finish, sessions)
		}
		if len(results) != 1 || results[0].Name != name {
			t.Fatalf("%s: results %+v", name, results)
		}
		switch name {
		case "get_info":
			if !strings.Contains(results[0].Content, `"os":"`) {
				t.Errorf("get_info result %q", results[0].Content)
			}
		case "echo_echo":
			if !strings.HasPrefix(results[0].Content, "echo: ") {
				t.Errorf("echo result %q", results[0].Content)
			}
		}
	}
}

// A session continues by id (the request sends only its new message) and by content (the
// request resends the conversation without the tool rounds): either way the stored rounds come
// first in the history.
func TestAgentSessions(t *testing.T) {
	notes := &recordingTool{}
	set, _ := tools.NewSet(nil)
	set.Add(notes.tool("note", false))
	srv, ts := agentServer(t, Config{Tools: set, AgentMaxRounds: 1})
	text := func(role, s string) gen.ChatMessage {
		return gen.ChatMessage{Role: role, Content: gen.NewOptNilChatMessageContent(gen.NewStringChatMessageContent(s))}
	}
	call := gen.ChatMessage{Role: "assistant", Content: gen.OptNilChatMessageContent{Set: true, Null: true},
		ToolCalls: gen.NewOptNilChatToolCallArray([]gen.ChatToolCall{{ID: gen.NewOptNilString("c1"), Type: "function", Function: gen.ChatToolCallFunction{Name: "note", Arguments: []byte(`"{}"`)}}})}
	result := gen.ChatMessage{Role: "tool", Content: gen.NewOptNilChatMessageContent(gen.NewStringChatMessageContent("noted")), ToolCallID: gen.NewOptNilString("c1"), Name: gen.NewOptNilString("note")}
	history := []gen.ChatMessage{text("user", "Hi"), call, result, text("assistant", "Done.")}
	srv.sessions.Put(sessions.Session[gen.ChatMessage]{ID: "kept", History: history, Visible: visibleMessages(history)})

	_, a := postAgent(t, ts.URL, `{"session_id":"kept","messages":[{"role":"user","content":"Again"}],"server_tools":["note"],`+requiredAgent+`}`)
	sess, _ := srv.sessions.Get("kept")
	if a.SessionID != "kept" || len(sess.History) != 8 || sess.History[1].ToolCallID.Or("") != "" || sess.History[2].ToolCallID.Or("") != "c1" {
		t.Fatalf("by id: session %q with %d messages", a.SessionID, len(sess.History))
	}
	// The same conversation resent as a client that shows only text keeps it: Hi, Done., Again
	// and the new answer are visible; the tool rounds are the session's.
	visible := visibleMessages(sess.History)
	var msgs []string
	for _, v := range visible {
		role, content, _ := strings.Cut(v, "\x00")
		b, _ := json.Marshal(map[string]string{"role": role, "content": content})
		msgs = append(msgs, string(b))
	}
	msgs = append(msgs, `{"role":"user","content":"Once more"}`)
	_, a = postAgent(t, ts.URL, `{"messages":[`+strings.Join(msgs, ",")+`],"server_tools":["note"],`+requiredAgent+`}`)
	again, _ := srv.sessions.Get("kept")
	if a.SessionID != "kept" || len(again.History) != len(sess.History)+4 {
		t.Errorf("by content: session %q, %d messages (had %d)", a.SessionID, len(again.History), len(sess.History))
	}
	// A conversation that does not extend a kept one starts its own.
	_, a = postAgent(t, ts.URL, `{"messages":[{"role":"user","content":"Other"}],"server_tools":["note"],`+requiredAgent+`}`)
	if a.SessionID == "kept" || a.SessionID == "" || srv.sessions.Len() != 2 {
		t.Errorf("a new conversation got %q (%d sessions)", a.SessionID, srv.sessions.Len())
	}
}

// A server without tools refuses server_tools (naming the flag), and the fields that need it.
func TestAgentRefused(t *testing.T) {
	_, plain := agentServer(t, Config{})
	set, _ := tools.NewSet([]string{"get_info"})
	_, withTools := agentServer(t, Config{Tools: set})
	for _, c := range []struct {
		url, body, want string
	}{
		{plain.URL, `{"messages":[{"role":"user","content":"x"}],"server_tools":"all"}`, "'server_tools' needs tools enabled at startup: start the server with --tools (or MCP servers: --mcp-servers-config, --mcp-servers-json)"},
		{plain.URL, `{"messages":[{"role":"user","content":"x"}],"session_id":"s"}`, "'session_id' keeps the conversations of 'server_tools', which this request does not name"},
		{withTools.URL, `{"messages":[{"role":"user","content":"x"}],"server_tools":["read_file"]}`, `'server_tools': "read_file" is not a tool of this server (enabled: get_info)`},
		{withTools.URL, `{"messages":[{"role":"user","content":"x"}],"server_tools":"some"}`, `'server_tools' must be "all" or a list of tool names, not "some"`},
		{withTools.URL, `{"messages":[{"role":"user","content":"x"}],"server_tools":"all","logprobs":true}`, "logprobs is not supported with server_tools"},
		{withTools.URL, `{"messages":[{"role":"user","content":"x"}],"server_tools":"all","tools":[{"type":"function","function":{"name":"get_info"}}]}`, `'tools' and 'server_tools' both name "get_info"`},
	} {
		code, a := postAgent(t, c.url, c.body)
		if code != 400 || a.Error == nil || a.Error.Message != c.want {
			t.Errorf("%s: %d %+v, want 400 %q", c.body, code, a.Error, c.want)
		}
	}
}
