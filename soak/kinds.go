package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"
)

// The request kinds, as the report names them.
const (
	KindChat          = "chat-stream"
	KindCompletion    = "completion"
	KindOAICompletion = "v1-completions"
	KindEmbeddings    = "embeddings"
	KindCancel        = "cancel"
	KindDrop          = "drop"
	KindReattach      = "reattach"
	KindTools         = "tools"
	// KindOverload is a burst request, sent periodically rather than picked by the workers.
	KindOverload = "overload"
)

// weights is how often the workers pick each kind, in this order (the first round goes
// through the list in order, so that every kind runs once however short the soak).
var weights = []struct {
	kind   string
	weight int
}{
	{KindChat, 30}, {KindCompletion, 12}, {KindOAICompletion, 12}, {KindEmbeddings, 8},
	{KindCancel, 8}, {KindDrop, 8}, {KindReattach, 8}, {KindTools, 8},
}

// allKinds is every kind in the report's order.
func allKinds() []string {
	out := make([]string, 0, len(weights)+1)
	for _, w := range weights {
		out = append(out, w.kind)
	}
	return append(out, KindOverload)
}

// prompts are what the requests ask; a story model continues any of them.
var prompts = []string{
	"Once upon a time", "The little dog", "Lily wanted to", "One day, Tom found a", "The sun was",
	"In the park there was", "Mom said", "The big red ball",
}

const chatRoute = "/v1/chat/completions"

// tokens picks a max_tokens between half of max and max.
func tokens(rng *rand.Rand, max int) int { return max/2 + rng.IntN(max/2+1) }

func chatBody(rng *rand.Rand, n int, stream bool) map[string]any {
	b := map[string]any{
		"messages":   []map[string]string{{"role": "user", "content": prompts[rng.IntN(len(prompts))]}},
		"max_tokens": n,
		"stream":     stream,
	}
	if stream {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b
}

// do sends one request of kind.
func (r *runner) do(ctx context.Context, kind string, rng *rand.Rand) outcome {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	switch kind {
	case KindChat, KindCancel, KindDrop:
		return r.c.stream(ctx, kind, rng, r.cfg.MaxTokens)
	case KindCompletion:
		return r.c.completion(ctx, rng, r.cfg.MaxTokens)
	case KindOverload:
		// Short: a burst is to overflow the queue, and what it queued should drain quickly.
		return r.c.completion(ctx, rng, min(4, r.cfg.MaxTokens))
	case KindOAICompletion:
		return r.c.oaiCompletion(ctx, rng, r.cfg.MaxTokens)
	case KindEmbeddings:
		return r.c.embeddings(ctx, rng)
	case KindReattach:
		return r.c.reattach(ctx, rng, r.cfg.MaxTokens)
	case KindTools:
		return r.c.tools(ctx, rng, r.cfg.MaxTokens)
	}
	return outcome{fail: &failure{"client error", "unknown kind " + kind}}
}

// stream runs a streamed chat completion: read to the end (chat-stream), or cut after a few
// tokens by cancelling the request (cancel) or resetting the connection (drop). What fails
// after the client cut the stream is the client's doing and not counted.
func (c *client) stream(ctx context.Context, kind string, rng *rand.Rand, max int) outcome {
	n, stopAfter := tokens(rng, max), 0
	hc := c.hc
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var holder *connHolder
	if kind != KindChat {
		n, stopAfter = 4*max, 2+rng.IntN(4) // long enough to be cut while it runs
	}
	if kind == KindDrop {
		holder = &connHolder{}
		ctx = context.WithValue(ctx, connKey{}, holder)
		hc = c.dropHC
	}
	req, err := c.request(ctx, http.MethodPost, chatRoute, chatBody(rng, n, true))
	if err != nil {
		return outcome{fail: &failure{"client error", err.Error()}}
	}
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return outcome{fail: classify(chatRoute, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := readBody(resp)
		return statusOutcome(chatRoute, resp.StatusCode, body)
	}
	st, err := readChat(newSSEReader(resp.Body), t0, stopAfter)
	o := outcome{tokens: st.tokens, ttft: st.ttft, gaps: st.gaps}
	if err != nil {
		o.fail = classify(chatRoute, err)
		return o
	}
	if st.stopped {
		if kind == KindDrop && !holder.abort() {
			o.fail = &failure{"client error", "drop: the connection was not recorded"}
		}
		cancel() // for a cancel, the cut itself; for a drop, it only ends the request
	}
	return o
}

// completion runs llama.cpp's native POST /completion.
func (c *client) completion(ctx context.Context, rng *rand.Rand, max int) outcome {
	const route = "/completion"
	data, o := c.call(ctx, route, route, map[string]any{"prompt": prompts[rng.IntN(len(prompts))], "n_predict": tokens(rng, max)})
	if o != nil {
		return *o
	}
	var a struct {
		Content         *string `json:"content"`
		TokensPredicted int64   `json:"tokens_predicted"`
	}
	if err := json.Unmarshal(data, &a); err != nil || a.Content == nil {
		return outcome{fail: &failure{"bad answer " + route, fmt.Sprintf("no content in %s", truncate(string(data), 200))}}
	}
	return outcome{tokens: a.TokensPredicted}
}

// oaiCompletion runs OpenAI's POST /v1/completions.
func (c *client) oaiCompletion(ctx context.Context, rng *rand.Rand, max int) outcome {
	const route = "/v1/completions"
	data, o := c.call(ctx, route, route, map[string]any{"prompt": prompts[rng.IntN(len(prompts))], "max_tokens": tokens(rng, max)})
	if o != nil {
		return *o
	}
	var a struct {
		Choices []struct {
			Text *string `json:"text"`
		} `json:"choices"`
		Usage *usage `json:"usage"`
	}
	if err := json.Unmarshal(data, &a); err != nil || len(a.Choices) == 0 || a.Choices[0].Text == nil || a.Usage == nil {
		return outcome{fail: &failure{"bad answer " + route, fmt.Sprintf("no choices[0].text or usage in %s", truncate(string(data), 200))}}
	}
	return outcome{tokens: a.Usage.CompletionTokens}
}

// embeddings runs POST /v1/embeddings on one to three inputs.
func (c *client) embeddings(ctx context.Context, rng *rand.Rand) outcome {
	const route = "/v1/embeddings"
	inputs := make([]string, 1+rng.IntN(3))
	for i := range inputs {
		inputs[i] = prompts[rng.IntN(len(prompts))]
	}
	data, o := c.call(ctx, route, route, map[string]any{"input": inputs})
	if o != nil {
		return *o
	}
	var a struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &a); err != nil || len(a.Data) != len(inputs) {
		return outcome{fail: &failure{"bad answer " + route, fmt.Sprintf("want %d embeddings in %s", len(inputs), truncate(string(data), 200))}}
	}
	for _, d := range a.Data {
		if len(d.Embedding) == 0 {
			return outcome{fail: &failure{"bad answer " + route, "an empty embedding"}}
		}
	}
	return outcome{}
}

// toolDefs are the tools a tools request offers.
var toolDefs = []map[string]any{
	{"type": "function", "function": map[string]any{"name": "get_weather", "description": "Weather of a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}},
	{"type": "function", "function": map[string]any{"name": "get_time", "description": "The time in a timezone",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"timezone": map[string]any{"type": "string"}}, "required": []string{"timezone"}}}},
}

// tools runs a chat completion with tools on offer. A small model's answer makes no sense,
// so it only has to be well-formed: a message, and tool calls (if any) with names and
// string arguments.
func (c *client) tools(ctx context.Context, rng *rand.Rand, max int) outcome {
	body := chatBody(rng, tokens(rng, max), false)
	body["tools"] = toolDefs
	body["tool_choice"] = []string{"auto", "required"}[rng.IntN(2)]
	data, o := c.call(ctx, chatRoute, chatRoute+" (tools)", body)
	if o != nil {
		return *o
	}
	var a struct {
		Choices []struct {
			Message *struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					Type     string `json:"type"`
					Function struct {
						Name      string  `json:"name"`
						Arguments *string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *usage `json:"usage"`
	}
	bad := func(why string) outcome {
		return outcome{fail: &failure{"bad answer " + chatRoute + " (tools)", why + ": " + truncate(string(data), 200)}}
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return bad(err.Error())
	}
	if len(a.Choices) == 0 || a.Choices[0].Message == nil || a.Choices[0].Message.Role != "assistant" || a.Choices[0].FinishReason == "" {
		return bad("no assistant message with a finish_reason")
	}
	for _, tc := range a.Choices[0].Message.ToolCalls {
		if tc.Type != "function" || tc.Function.Name == "" || tc.Function.Arguments == nil {
			return bad("a malformed tool call")
		}
	}
	if a.Usage == nil {
		return bad("no usage")
	}
	return outcome{tokens: a.Usage.CompletionTokens}
}

// reattach runs a resumable stream (X-Conversation-Id): it reads a few events, drops the
// connection, reattaches with GET /v1/stream/{id}?from=OFFSET at the byte it stopped at and
// reads to the end, then checks that its two parts are, byte for byte, the whole stream as a
// replay from 0 sends it, ending with [DONE]. The stream is deleted afterwards.
func (c *client) reattach(ctx context.Context, rng *rand.Rand, max int) outcome {
	id := fmt.Sprintf("soak-%016x", rng.Uint64())
	req, err := c.request(ctx, http.MethodPost, chatRoute, chatBody(rng, 2*max, true))
	if err != nil {
		return outcome{fail: &failure{"client error", err.Error()}}
	}
	req.Header.Set("X-Conversation-Id", id)
	t0 := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return outcome{fail: classify(chatRoute, err)}
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := readBody(resp)
		resp.Body.Close()
		return statusOutcome(chatRoute, resp.StatusCode, body)
	}
	defer c.deleteStream(ctx, id)
	sr := newSSEReader(resp.Body)
	sr.keep = &bytes.Buffer{}
	st, err := readChat(sr, t0, 1+rng.IntN(4))
	resp.Body.Close() // the drop: the generation goes on without this client
	o := outcome{ttft: st.ttft, gaps: st.gaps}
	if err != nil {
		o.fail = classify(chatRoute, err)
		return o
	}
	first := sr.keep.Bytes()
	const route = "/v1/stream/{id}"
	rest, o2 := c.fetch(ctx, fmt.Sprintf("/v1/stream/%s?from=%d", url.PathEscape(id), sr.n), route)
	if o2 != nil {
		return *o2
	}
	passed := false
	o.reattach = &passed
	mismatch := func(why string) outcome {
		o.fail = &failure{"reattach mismatch", fmt.Sprintf("%s: %s", id, why)}
		return o
	}
	if _, err := parseEvents(rest); err != nil {
		return mismatch(fmt.Sprintf("the tail from byte %d is not whole events: %v", sr.n, err))
	}
	whole := append(append([]byte{}, first...), rest...)
	events, err := parseEvents(whole)
	if err != nil || len(events) == 0 || events[len(events)-1] != "[DONE]" {
		return mismatch(fmt.Sprintf("the stream does not end with [DONE] (%d events, %v)", len(events), err))
	}
	full, o2 := c.fetch(ctx, fmt.Sprintf("/v1/stream/%s?from=0", url.PathEscape(id)), route)
	if o2 != nil {
		return *o2
	}
	if !bytes.Equal(full, whole) {
		return mismatch(fmt.Sprintf("first %d bytes + reattached %d bytes differ from the replay's %d bytes at byte %d",
			len(first), len(rest), len(full), firstDiff(full, whole)))
	}
	for _, d := range events {
		if ch, err := parseChunk(d); err == nil && ch.completionTokens() > 0 {
			o.tokens = ch.completionTokens()
		}
	}
	passed = true
	return o
}

// deleteStream removes a resumable stream (llama-server's DELETE /v1/stream?conv_id=), so
// that finished soak streams do not crowd the server's store until they expire.
func (c *client) deleteStream(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := c.request(ctx, http.MethodDelete, "/v1/stream?conv_id="+url.QueryEscape(id), nil)
	if err != nil {
		return
	}
	if resp, err := c.hc.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// firstDiff is the first index at which a and b differ.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
