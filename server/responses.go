package server

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"time"

	"github.com/go-faster/jx"
	"github.com/ogen-go/ogen/validate"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
)

// The responses operations name the type a misfitting field expects, as the others do
// (requestTypes, decode.go).
func init() {
	requestTypes[string(gen.CreateResponseOperation)] = reflect.TypeFor[gen.ResponsesRequest]()
	requestTypes[string(gen.CreateResponseAliasOperation)] = reflect.TypeFor[gen.ResponsesRequest]()
}

// CreateResponse implements POST /v1/responses, OpenAI's Responses API, as llama-server does
// it: the request becomes a chat completion request (responses_convert.go), which is checked,
// planned and run as one; the answer is a response object, or its event stream
// (responsesStream).
func (s *Server) CreateResponse(ctx context.Context, req *gen.ResponsesRequest, w http.ResponseWriter) error {
	m := s.model()
	if m == nil {
		return errLoading
	}
	body, err := responsesToChat(req)
	if err != nil {
		return err
	}
	var creq gen.ChatCompletionRequest
	if err := creq.Decode(jx.DecodeBytes(body)); err != nil {
		return invalidRequest("%s", describeDecode(err, reflect.TypeFor[gen.ChatCompletionRequest]()))
	}
	if err := creq.Validate(); err != nil {
		var verr *validate.Error
		if errors.As(err, &verr) {
			return invalidRequest("%s", describeValidation(verr, ""))
		}
		return invalidRequest("%v", err)
	}
	stream := creq.Stream.Or(false)
	// Read as the chat endpoint reads it, as llama-server hands the converted request on.
	pl, err := s.chatPlan(ctx, m, &creq, stream)
	if err != nil {
		return err
	}
	model := creq.Model.Or("")
	if model == "" {
		model = m.name
	}
	task := generationTasks(pl.prompt, pl.params, stream, slotOf(creq.IDSlot), 1)[0]
	ch, err := m.backend.Submit(ctx, task)
	if err != nil {
		return submitError(err, len(pl.prompt), m.info.NCtx)
	}
	defer drain(ch)
	fail := func(err error) *apiError { return submitError(err, len(pl.prompt), m.info.NCtx) }
	parsed := toolcall.NewStream(pl.syntax, newToolCallID)
	ids := responseIDs{response: "resp_" + randomString(32), message: "msg_" + randomString(32), reasoning: "rs_" + randomString(32)}

	if !stream {
		msg, final, gone, err := collectMessage(ctx, ch, parsed, fail)
		if gone || err != nil {
			return err
		}
		now := time.Now().Unix()
		out := completedResponse(ids, model, msg, final, now, true)
		out.CompletedAt = gen.NewOptInt(int(now))
		return writeJSON(w, &out)
	}

	sse := newSSE(w, s.pingInterval(req.SsePingInterval))
	rs := responsesStream{sse: sse, ids: ids, model: model, timingsPerToken: req.TimingsPerToken.Or(false)}
	for {
		res, over, err := s.nextStreamed(ctx, ch, sse, fail, func(ae *apiError) { _ = sse.fail(ae) })
		if over {
			return err
		}
		if res.Progress != nil {
			if rs.progress(res.Progress) != nil {
				return nil
			}
			continue
		}
		deltas, msg := parseStep(parsed, res)
		if rs.step(deltas, res) != nil {
			return nil
		}
		if res.Stop {
			noteTokens(ctx, res.TokensEvaluated, res.TokensPredicted)
			_ = rs.finish(msg, res)
			return nil
		}
	}
}

// CreateResponseAlias implements POST /responses, an alias of POST /v1/responses.
func (s *Server) CreateResponseAlias(ctx context.Context, req *gen.ResponsesRequest, w http.ResponseWriter) error {
	return s.CreateResponse(ctx, req, w)
}

// responseIDs are the ids of one response and of its output items.
type responseIDs struct{ response, message, reasoning string }

// responseItems are a finished message's output items as llama-server lists them: reasoning,
// then the message, then one function_call per tool call. whole marks a non-streamed
// response, whose reasoning item has a status and whose items get ids of their own.
func responseItems(ids responseIDs, msg toolcall.Message, whole bool) []gen.ResponseOutputItem {
	out := []gen.ResponseOutputItem{}
	if msg.Reasoning != "" {
		item := gen.ResponseOutputItem{
			ID:               gen.NewOptString(ids.reasoning),
			Type:             "reasoning",
			Summary:          []jx.Raw{},
			Content:          []gen.ResponseContentPart{{Type: "reasoning_text", Text: gen.NewOptString(msg.Reasoning)}},
			EncryptedContent: gen.NewOptString(""),
		}
		if whole {
			item.ID = gen.NewOptString("rs_" + randomString(32))
			item.Status = gen.NewOptString("completed")
		}
		out = append(out, item)
	}
	if msg.Content != "" {
		id := ids.message
		if whole {
			id = "msg_" + randomString(32)
		}
		out = append(out, gen.ResponseOutputItem{
			Type:    "message",
			Status:  gen.NewOptString("completed"),
			ID:      gen.NewOptString(id),
			Content: []gen.ResponseContentPart{outputText(msg.Content)},
			Role:    gen.NewOptString("assistant"),
		})
	}
	for _, c := range msg.Calls {
		out = append(out, functionCallItem(c.ID, c.Name, c.Arguments, "completed"))
	}
	return out
}

// outputText is a message's output_text content part.
func outputText(text string) gen.ResponseContentPart {
	return gen.ResponseContentPart{Type: "output_text", Text: gen.NewOptString(text), Annotations: []jx.Raw{}, Logprobs: []jx.Raw{}}
}

// functionCallItem is a tool call's output item: id "fc_" and call_id "call_" before the
// call's id, as llama-server names them.
func functionCallItem(id, name, args, status string) gen.ResponseOutputItem {
	return gen.ResponseOutputItem{
		ID:        gen.NewOptString("fc_" + id),
		Type:      "function_call",
		Status:    gen.NewOptString(status),
		Arguments: gen.NewOptString(args),
		CallID:    gen.NewOptString("call_" + id),
		Name:      gen.NewOptString(name),
	}
}

// completedResponse is the response object of a finished generation.
func completedResponse(ids responseIDs, model string, msg toolcall.Message, final engine.Result, now int64, whole bool) gen.Response {
	return gen.Response{
		CreatedAt: gen.NewOptInt(int(now)),
		ID:        ids.response,
		Model:     gen.NewOptString(model),
		Object:    "response",
		Output:    responseItems(ids, msg, whole),
		Status:    "completed",
		Usage: gen.NewOptResponsesUsage(gen.ResponsesUsage{
			InputTokens:        final.TokensEvaluated,
			OutputTokens:       final.TokensPredicted,
			TotalTokens:        final.TokensEvaluated + final.TokensPredicted,
			InputTokensDetails: gen.ResponsesUsageInputTokensDetails{CachedTokens: final.Timings.CacheN},
		}),
	}
}
