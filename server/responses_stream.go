package server

import (
	"time"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
)

// responsesStream writes a response as the Responses API's event stream, the way llama-server's
// to_json_oaicompat_resp(_stream) does: response.created and response.in_progress with the
// first result (prompt progress or text); response.in_progress again for each later prompt
// progress result, carrying prompt_progress; for each step's deltas response.output_item.added
// when the reasoning, the message or a function call first has something (the message also
// response.content_part.added), then response.reasoning_text.delta, response.output_text.delta
// or response.function_call_arguments.delta; at the end response.output_text.done,
// response.content_part.done and response.output_item.done for the items, and
// response.completed with the whole response. With timings_per_token the last event of each
// step carries the timings so far; response.completed always carries the final ones. The
// stream has no [DONE].
//
// Unlike llama-server, the text of the final result (text the engine held back until the end)
// is streamed as deltas too, so that the deltas always add up to the output.
type responsesStream struct {
	sse             *sseWriter
	ids             responseIDs
	model           string
	timingsPerToken bool

	created                   bool // response.created went out
	reasoningBegun, textBegun bool
	callID                    string                     // the function call being streamed
	events                    []gen.ResponsesStreamEvent // queued for the next flush
}

// state is the response object of response.created and response.in_progress.
func (r *responsesStream) state() gen.OptResponse {
	return gen.NewOptResponse(gen.Response{ID: r.ids.response, Object: "response", Status: "in_progress"})
}

// open queues response.created and response.in_progress before the first result's events.
func (r *responsesStream) open() {
	if r.created {
		return
	}
	r.created = true
	r.events = append(r.events,
		gen.ResponsesStreamEvent{Type: "response.created", Response: r.state()},
		gen.ResponsesStreamEvent{Type: "response.in_progress", Response: r.state()})
}

// flush sends the queued events, the last one carrying timings and prompt progress when set.
func (r *responsesStream) flush(t *engine.Timings, progress *engine.PromptProgress) error {
	defer func() { r.events = r.events[:0] }()
	if n := len(r.events); n > 0 {
		if t != nil {
			r.events[n-1].Timings = gen.NewOptTimings(timings(*t))
		}
		if progress != nil {
			r.events[n-1].PromptProgress = gen.NewOptPromptProgress(promptProgress(progress))
		}
	}
	for i := range r.events {
		if err := r.sse.event(r.events[i].Type, &r.events[i]); err != nil {
			return err
		}
	}
	return nil
}

// progress sends a prompt progress result: response.in_progress with prompt_progress (after
// response.created for the first result).
func (r *responsesStream) progress(p *engine.PromptProgress) error {
	if r.created {
		r.events = append(r.events, gen.ResponsesStreamEvent{Type: "response.in_progress", Response: r.state()})
	}
	r.open()
	return r.flush(nil, p)
}

// step sends the events of one result's deltas; a partial result's timings ride on the last
// one with timings_per_token.
func (r *responsesStream) step(ds []toolcall.Delta, res engine.Result) error {
	r.open()
	for _, d := range ds {
		switch {
		case d.Reasoning != "":
			if !r.reasoningBegun {
				r.reasoningBegun = true
				r.events = append(r.events, gen.ResponsesStreamEvent{Type: "response.output_item.added", Item: gen.NewOptResponseOutputItem(gen.ResponseOutputItem{
					ID: gen.NewOptString(r.ids.reasoning), Summary: []jx.Raw{}, Type: "reasoning",
					Content: []gen.ResponseContentPart{}, EncryptedContent: gen.NewOptString(""), Status: gen.NewOptString("in_progress"),
				})})
			}
			r.events = append(r.events, gen.ResponsesStreamEvent{Type: "response.reasoning_text.delta", Delta: gen.NewOptString(d.Reasoning), ItemID: gen.NewOptString(r.ids.reasoning)})
		case d.Content != "":
			if !r.textBegun {
				r.textBegun = true
				r.events = append(r.events,
					gen.ResponsesStreamEvent{Type: "response.output_item.added", Item: gen.NewOptResponseOutputItem(gen.ResponseOutputItem{
						Content: []gen.ResponseContentPart{}, ID: gen.NewOptString(r.ids.message), Role: gen.NewOptString("assistant"),
						Status: gen.NewOptString("in_progress"), Type: "message",
					})},
					gen.ResponsesStreamEvent{Type: "response.content_part.added", ItemID: gen.NewOptString(r.ids.message),
						Part: gen.NewOptResponseContentPart(gen.ResponseContentPart{Type: "output_text", Text: gen.NewOptString("")})})
			}
			r.events = append(r.events, gen.ResponsesStreamEvent{Type: "response.output_text.delta", ItemID: gen.NewOptString(r.ids.message), Delta: gen.NewOptString(d.Content)})
		case d.IsTool():
			if d.ToolName != "" {
				r.callID = d.ToolID
				r.events = append(r.events, gen.ResponsesStreamEvent{Type: "response.output_item.added",
					Item: gen.NewOptResponseOutputItem(functionCallItem(d.ToolID, d.ToolName, "", "in_progress"))})
			}
			if d.ToolArgs != "" {
				r.events = append(r.events, gen.ResponsesStreamEvent{Type: "response.function_call_arguments.delta",
					Delta: gen.NewOptString(d.ToolArgs), ItemID: gen.NewOptString("fc_" + r.callID)})
			}
		}
	}
	var t *engine.Timings
	if r.timingsPerToken && !res.Stop {
		t = &res.Timings
	}
	return r.flush(t, nil)
}

// finish sends the done events of the message's items and response.completed with the final
// timings.
func (r *responsesStream) finish(msg toolcall.Message, final engine.Result) error {
	items := responseItems(r.ids, msg, false)
	for _, item := range items {
		if item.Type == "message" {
			part := item.Content[0]
			r.events = append(r.events,
				gen.ResponsesStreamEvent{Type: "response.output_text.done", ItemID: item.ID, Text: part.Text},
				gen.ResponsesStreamEvent{Type: "response.content_part.done", ItemID: item.ID, Part: gen.NewOptResponseContentPart(part)})
		}
		r.events = append(r.events, gen.ResponsesStreamEvent{Type: "response.output_item.done", Item: gen.NewOptResponseOutputItem(item)})
	}
	done := completedResponse(r.ids, r.model, msg, final, time.Now().Unix(), false)
	r.events = append(r.events, gen.ResponsesStreamEvent{Type: "response.completed", Response: gen.NewOptResponse(done)})
	return r.flush(&final.Timings, nil)
}
