package server

import (
	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
)

// anthropicStream writes a message as Anthropic's event stream, the way llama-server's
// to_json_anthropic(_stream) does: message_start; content_block_start when the thinking block,
// the text block or a tool_use block first has something, then its content_block_delta events
// (thinking_delta, text_delta, input_json_delta); at the end content_block_stop for every block
// in order (the thinking block first gets an empty signature_delta), message_delta with the
// stop reason and output tokens, and message_stop.
//
// Blocks are numbered in the order they start. Unlike llama-server, a block started by a
// partial result is not started again by the final one.
type anthropicStream struct {
	sse   *sseWriter
	begun bool // message_start went out

	thinking, text int         // block index, -1 until started
	tools          map[int]int // tool call index -> block index
	order          []int       // started blocks in order; thinking's index first when present
	next           int
	inited         bool
}

func (a *anthropicStream) init() {
	if !a.inited {
		a.thinking, a.text, a.tools, a.inited = -1, -1, map[int]int{}, true
	}
}

func (a *anthropicStream) send(ev gen.AnthropicStreamEvent) error { return a.sse.event(ev.Type, &ev) }

// start opens a block with the given start content.
func (a *anthropicStream) start(block gen.AnthropicOutputBlock) (int, error) {
	i := a.next
	a.next++
	a.order = append(a.order, i)
	return i, a.send(gen.AnthropicStreamEvent{Type: "content_block_start", Index: gen.NewOptInt(i), ContentBlock: gen.NewOptAnthropicOutputBlock(block)})
}

func (a *anthropicStream) delta(i int, d gen.AnthropicStreamDelta) error {
	return a.send(gen.AnthropicStreamEvent{Type: "content_block_delta", Index: gen.NewOptInt(i), Delta: gen.NewOptAnthropicStreamDelta(d)})
}

// deltas sends the events for one step's deltas; msg is the message parsed so far.
func (a *anthropicStream) deltas(ds []toolcall.Delta, msg toolcall.Message) error {
	a.init()
	var err error
	for _, d := range ds {
		switch {
		case d.Reasoning != "":
			if a.thinking < 0 {
				if a.thinking, err = a.start(gen.AnthropicOutputBlock{Type: "thinking", Thinking: gen.NewOptString("")}); err != nil {
					return err
				}
			}
			err = a.delta(a.thinking, gen.AnthropicStreamDelta{Type: gen.NewOptString("thinking_delta"), Thinking: gen.NewOptString(d.Reasoning)})
		case d.Content != "":
			if a.text < 0 {
				if a.text, err = a.start(gen.AnthropicOutputBlock{Type: "text", Text: gen.NewOptString("")}); err != nil {
					return err
				}
			}
			err = a.delta(a.text, gen.AnthropicStreamDelta{Type: gen.NewOptString("text_delta"), Text: gen.NewOptString(d.Content)})
		case d.IsTool():
			i, ok := a.tools[d.ToolIndex]
			if !ok {
				c := msg.Calls[d.ToolIndex]
				if i, err = a.start(gen.AnthropicOutputBlock{Type: "tool_use", ID: gen.NewOptString(c.ID), Name: gen.NewOptString(c.Name)}); err != nil {
					return err
				}
				a.tools[d.ToolIndex] = i
			}
			if d.ToolArgs != "" {
				err = a.delta(i, gen.AnthropicStreamDelta{Type: gen.NewOptString("input_json_delta"), PartialJSON: gen.NewOptString(d.ToolArgs)})
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// finish closes the blocks and the message.
func (a *anthropicStream) finish(msg toolcall.Message, res engine.Result) error {
	a.init()
	for _, i := range a.order {
		if i == a.thinking {
			if err := a.delta(i, gen.AnthropicStreamDelta{Type: gen.NewOptString("signature_delta"), Signature: gen.NewOptString("")}); err != nil {
				return err
			}
		}
		if err := a.send(gen.AnthropicStreamEvent{Type: "content_block_stop", Index: gen.NewOptInt(i)}); err != nil {
			return err
		}
	}
	stopSeq := stopSequence(res)
	err := a.send(gen.AnthropicStreamEvent{
		Type: "message_delta",
		Delta: gen.NewOptAnthropicStreamDelta(gen.AnthropicStreamDelta{
			StopReason:   gen.NewOptNilString(stopReason(res.StopType, msg)),
			StopSequence: gen.OptNilString{Set: true, Null: stopSeq.Null, Value: stopSeq.Value},
		}),
		Usage: gen.NewOptAnthropicUsage(gen.AnthropicUsage{OutputTokens: res.TokensPredicted}),
	})
	if err != nil {
		return err
	}
	return a.send(gen.AnthropicStreamEvent{Type: "message_stop"})
}
