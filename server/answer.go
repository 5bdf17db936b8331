package server

// A generation's text parsed as a chat answer (reasoning, content, tool calls), the same way for
// the chat completions, Anthropic messages and Responses endpoints.

import (
	"context"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
)

// collectMessage waits for the end of a generation, notes its tokens for the metrics and
// parses its text with parsed. gone reports that the client left, when there is nothing to
// answer; err is fail's answer to a generation that failed.
func collectMessage(ctx context.Context, ch <-chan engine.Result, parsed *toolcall.Stream, fail func(error) *apiError) (msg toolcall.Message, final engine.Result, gone bool, err error) {
	var c completion
	final, err = c.collect(ctx, ch)
	if err != nil {
		if ctx.Err() != nil {
			return msg, final, true, nil
		}
		return msg, final, false, fail(err)
	}
	noteTokens(ctx, final.TokensEvaluated, final.TokensPredicted)
	parsed.Add(c.content.String())
	msg, _ = parsed.Finish()
	return msg, final, false, nil
}

// parseStep adds a streamed result's text to parsed: the deltas to send and, with the last
// result, the whole message.
func parseStep(parsed *toolcall.Stream, res engine.Result) ([]toolcall.Delta, toolcall.Message) {
	deltas := parsed.Add(res.Text)
	var msg toolcall.Message
	if res.Stop {
		var last []toolcall.Delta
		msg, last = parsed.Finish()
		deltas = append(deltas, last...)
	}
	return deltas, msg
}
