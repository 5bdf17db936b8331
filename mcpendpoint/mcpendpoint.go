// Package mcpendpoint is the server's own MCP server (--mcp-endpoint, at /mcp, Streamable
// HTTP through the official Go SDK): MCP clients get the loaded model as tools — complete,
// chat and embed — and the built-in tools the server was started with (--tools).
//
// The model's tools send their requests to the server's own API handler, in process, so they
// are checked, queued and answered exactly as HTTP clients' are.
package mcpendpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wgpu-llama/wgpu-llama/tools"
)

// New returns the /mcp handler: api answers the model's requests (POST /completion,
// /v1/chat/completions, /v1/embeddings); set's built-in tools are offered too (nil: none).
func New(api http.Handler, set *tools.Set, version string) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "wgpu-llama", Version: version}, nil)
	e := &endpoint{api: api}
	srv.AddTool(&mcp.Tool{
		Name:        "complete",
		Description: "Continue a text with the server's language model (a raw completion, no chat template).",
		InputSchema: tools.Schema(map[string]any{
			"prompt":      tools.Prop("string", "The text to continue"),
			"max_tokens":  tools.Prop("integer", "Tokens to generate at most (default: the server's)"),
			"temperature": tools.Prop("number", "Sampling temperature (0: greedy)"),
		}, "prompt"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)},
	}, e.complete)
	srv.AddTool(&mcp.Tool{
		Name:        "chat",
		Description: "Ask the server's language model, through its chat template: one message, or a conversation of {role, content} messages.",
		InputSchema: tools.Schema(map[string]any{
			"message": tools.Prop("string", "A user message (or give messages)"),
			"messages": map[string]any{
				"type": "array", "description": "The conversation: {role: system|user|assistant, content} messages",
				"items": tools.Schema(map[string]any{"role": tools.Prop("string", "system, user or assistant"), "content": tools.Prop("string", "The text")}, "role", "content"),
			},
			"max_tokens":  tools.Prop("integer", "Tokens to generate at most (default: the server's)"),
			"temperature": tools.Prop("number", "Sampling temperature (0: greedy)"),
		}),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)},
	}, e.chat)
	srv.AddTool(&mcp.Tool{
		Name:        "embed",
		Description: "Embed texts with the server's model: one vector per input.",
		InputSchema: tools.Schema(map[string]any{
			"input": map[string]any{"description": "A text or a list of texts", "anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}},
		}, "input"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)},
	}, e.embed)
	for _, t := range set.All() {
		if t.Kind != "builtin" {
			continue // an MCP server's tools stay with that server
		}
		readOnly := !t.Write
		srv.AddTool(&mcp.Tool{
			Name: t.Name, Title: t.DisplayName, Description: t.Description, InputSchema: t.Definition()["function"].(map[string]any)["parameters"],
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: readOnly, DestructiveHint: &t.Write, OpenWorldHint: new(bool)},
		}, builtin(set, t.Name))
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

// endpoint answers the model's tools through the server's API.
type endpoint struct{ api http.Handler }

// post sends body to the API and decodes its JSON answer; a failure is a tool error with the
// API's message.
func (e *endpoint) post(ctx context.Context, path string, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	e.api.ServeHTTP(rec, req)
	if rec.status != http.StatusOK {
		var apiErr struct {
			Error struct{ Message string } `json:"error"`
		}
		if json.Unmarshal(rec.body.Bytes(), &apiErr) == nil && apiErr.Error.Message != "" {
			return fmt.Errorf("%s (%d)", apiErr.Error.Message, rec.status)
		}
		return fmt.Errorf("%s answered %d: %s", path, rec.status, rec.body.String())
	}
	return json.Unmarshal(rec.body.Bytes(), out)
}

// args decodes a call's arguments.
func args(req *mcp.CallToolRequest, v any) error {
	if len(req.Params.Arguments) == 0 {
		return nil
	}
	if err := json.Unmarshal(req.Params.Arguments, v); err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	return nil
}

// sampling are the fields complete and chat share.
type sampling struct {
	MaxTokens   *int     `json:"max_tokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
}

func (e *endpoint) complete(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Prompt *string `json:"prompt"`
		sampling
	}
	if err := args(req, &in); err != nil {
		return failed(err), nil
	}
	if in.Prompt == nil {
		return failed(fmt.Errorf("missing prompt")), nil
	}
	body := map[string]any{"prompt": *in.Prompt}
	if in.MaxTokens != nil {
		body["n_predict"] = *in.MaxTokens
	}
	if in.Temperature != nil {
		body["temperature"] = *in.Temperature
	}
	var out struct {
		Content string `json:"content"`
	}
	if err := e.post(ctx, "/completion", body, &out); err != nil {
		return failed(err), nil
	}
	return text(out.Content), nil
}

func (e *endpoint) chat(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var in struct {
		Message  *string   `json:"message"`
		Messages []message `json:"messages"`
		sampling
	}
	if err := args(req, &in); err != nil {
		return failed(err), nil
	}
	msgs := in.Messages
	if in.Message != nil {
		msgs = append(msgs, message{Role: "user", Content: *in.Message})
	}
	if len(msgs) == 0 {
		return failed(fmt.Errorf("give a message or messages")), nil
	}
	body := map[string]any{"messages": msgs}
	if in.MaxTokens != nil {
		body["max_tokens"] = *in.MaxTokens
	}
	if in.Temperature != nil {
		body["temperature"] = *in.Temperature
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := e.post(ctx, "/v1/chat/completions", body, &out); err != nil {
		return failed(err), nil
	}
	if len(out.Choices) == 0 || out.Choices[0].Message.Content == nil {
		return text(""), nil
	}
	return text(*out.Choices[0].Message.Content), nil
}

func (e *endpoint) embed(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Input json.RawMessage `json:"input"`
	}
	if err := args(req, &in); err != nil {
		return failed(err), nil
	}
	if len(in.Input) == 0 {
		return failed(fmt.Errorf("missing input")), nil
	}
	var out struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := e.post(ctx, "/v1/embeddings", map[string]any{"input": in.Input}, &out); err != nil {
		return failed(err), nil
	}
	vectors := make([][]float64, len(out.Data))
	for i, d := range out.Data {
		vectors[i] = d.Embedding
	}
	structured := map[string]any{"embeddings": vectors}
	b, _ := json.Marshal(structured)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: structured}, nil
}

// builtin runs a built-in tool for an MCP client, on the host in the server's directory.
func builtin(set *tools.Set, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var params map[string]any
		if err := args(req, &params); err != nil {
			return failed(err), nil
		}
		res, err := set.Run(ctx, name, tools.Call{Params: params})
		if err != nil {
			return failed(err), nil
		}
		if msg, ok := res["error"].(string); ok {
			return failed(fmt.Errorf("%s", msg)), nil
		}
		return text(res.Text()), nil
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// failed is a tool error: the client's model reads it, the protocol goes on.
func failed(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
}

// recorder is the in-process response of an API call.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(status int)      { r.status = status }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
