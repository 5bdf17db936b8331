package server

// Resumable streams, our extension to llama-server's API.
//
// A streaming chat completion posted with X-Conversation-Id runs detached from its connection:
// the generation writes its events into a session of s.streams (package resumable), under the
// session's context, which only DELETE, server shutdown (Close) or the session's end cancel.
// Every client, the POST's included, relays the session's bytes to its response from an
// offset: the POST from 0, GET /v1/stream/{id}?from=N from N. A client that leaves only stops
// its relay; the generation goes on, and the client can come back for the bytes it missed.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/server/resumable"
)

// relayChunk is the most a relay reads from a session at once.
const relayChunk = 32 << 10

// startResumable runs a chat stream in a new session named id and relays it to w from its first
// byte. A failure before the first event is answered as a JSON error, as without a session.
func (s *Server) startResumable(ctx context.Context, id string, b Backend, tasks []engine.Task, run *chatRun, w http.ResponseWriter) error {
	// The session keeps the request's values (its log fields) but not its cancellation.
	sess, err := s.streams.Start(context.WithoutCancel(ctx), id)
	switch {
	case errors.Is(err, resumable.ErrRunning):
		return &apiError{typ: errConflict, message: fmt.Sprintf("the stream %q is still running; DELETE /v1/stream/%s stops it", id, id)}
	case errors.Is(err, resumable.ErrFull):
		return &apiError{typ: errUnavailable, cause: err, message: "too many resumable streams are running; try again later"}
	case errors.Is(err, resumable.ErrClosed):
		return &apiError{typ: errUnavailable, cause: err, message: "the server is shutting down"}
	case err != nil:
		return err
	}
	// Attach before the first byte exists, so the POST's relay starts at 0 however fast the
	// generation writes; offset 0 of a new session is always valid.
	f, err := sess.Follow(ctx, 0)
	if err != nil {
		return err
	}
	set, _, err := submitAll(sess.Context(), b, tasks)
	if err != nil {
		ae := run.fail(err)
		sess.Fail(ae)
		return ae
	}
	go func() {
		defer set.close()
		if err := run.stream(sess.Context(), set, newSessionSSE(sess, run.ping)); err != nil {
			sess.Fail(err)
			return
		}
		sess.Finish()
	}()
	return relay(w, sess, f)
}

// GetStream implements GET /v1/stream/{id}: the stream's bytes from ?from= on, then live.
func (s *Server) GetStream(ctx context.Context, p gen.GetStreamParams, w http.ResponseWriter) error {
	return s.followStream(ctx, string(p.ID), p.From.Or(0), w)
}

// GetStreamByQuery implements llama-server's GET /v1/stream?conv_id=ID&from=N, the same as
// GET /v1/stream/{id}.
func (s *Server) GetStreamByQuery(ctx context.Context, p gen.GetStreamByQueryParams, w http.ResponseWriter) error {
	return s.followStream(ctx, string(p.ConvID), p.From.Or(0), w)
}

func (s *Server) followStream(ctx context.Context, id string, from int64, w http.ResponseWriter) error {
	sess, ok := s.streams.Get(id)
	if !ok {
		return unknownStream(id)
	}
	f, err := sess.Follow(ctx, from)
	if err != nil {
		return offsetError(err, from, sess.Info())
	}
	return relay(w, sess, f)
}

// DeleteStream implements DELETE /v1/stream/{id}: it cancels the generation, which ends the
// followers, and answers the stream's status.
func (s *Server) DeleteStream(_ context.Context, p gen.DeleteStreamParams) (*gen.StreamStatus, error) {
	sess, ok := s.streams.Get(string(p.ID))
	if !ok {
		return nil, unknownStream(string(p.ID))
	}
	sess.Cancel(resumable.ErrCancelled)
	st := streamStatus(sess.Info())
	return &st, nil
}

// DeleteStreamByQuery implements llama-server's DELETE /v1/stream?conv_id=ID: it cancels the
// generation and forgets the stream, answering 204 whether or not there was one.
func (s *Server) DeleteStreamByQuery(_ context.Context, p gen.DeleteStreamByQueryParams) error {
	s.streams.Remove(string(p.ConvID))
	return nil
}

// LookupStreams implements POST /v1/streams/lookup: the status of the named streams that exist,
// as {"streams":[...]} for our {"ids":[...]} and as llama-server's array of sessions for its
// {"conversation_ids":[...]}.
func (s *Server) LookupStreams(_ context.Context, req *gen.StreamLookupRequest) (gen.StreamLookupResult, error) {
	llama := req.ConversationIds != nil
	asked := req.Ids
	switch {
	case llama && req.Ids != nil:
		return gen.StreamLookupResult{}, invalidRequest("give either 'ids' or 'conversation_ids', not both")
	case llama:
		asked = req.ConversationIds
	case req.Ids == nil:
		return gen.StreamLookupResult{}, invalidRequest("'ids' is required (or llama-server's 'conversation_ids')")
	}
	ids := make([]string, len(asked))
	for i, id := range asked {
		ids[i] = string(id)
	}
	if llama {
		infos := s.streams.LookupConversations(ids)
		sessions := make([]gen.StreamSession, len(infos))
		for i, info := range infos {
			sessions[i] = streamSession(info)
		}
		return gen.NewStreamSessionArrayStreamLookupResult(sessions), nil
	}
	infos := s.streams.Lookup(ids)
	resp := gen.StreamLookupResponse{Streams: make([]gen.StreamStatus, len(infos))}
	for i, info := range infos {
		resp.Streams[i] = streamStatus(info)
	}
	return gen.NewStreamLookupResponseStreamLookupResult(resp), nil
}

// streamSession is a stream as llama-server's lookup reports it: completed_at is 0 while it runs.
func streamSession(info resumable.Info) gen.StreamSession {
	var completed int64
	if info.Status != resumable.Running {
		completed = info.Ended.Unix()
	}
	return gen.StreamSession{
		ConversationID: gen.StreamId(info.ID),
		IsDone:         info.Status != resumable.Running,
		TotalBytes:     info.Bytes,
		StartedAt:      info.Started.Unix(),
		CompletedAt:    completed,
	}
}

func streamStatus(info resumable.Info) gen.StreamStatus {
	return gen.StreamStatus{
		ID:           gen.StreamId(info.ID),
		Status:       gen.StreamStatusStatus(info.Status),
		Bytes:        info.Bytes,
		RetainedFrom: info.RetainedFrom,
	}
}

func unknownStream(id string) *apiError {
	return &apiError{typ: errNotFound, message: fmt.Sprintf("no stream with id %q", id)}
}

// relay writes what f reads of sess to w until the session ends or the client leaves. The
// status and headers go out with the first bytes, so a session that failed before its first
// event is answered with its error instead.
func relay(w http.ResponseWriter, sess *resumable.Session, f *resumable.Follower) error {
	flush := http.NewResponseController(w).Flush
	buf := make([]byte, relayChunk)
	started := false
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if !started {
				started = true
				startEventStream(w)
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil // the client is gone
			}
			if flush() != nil {
				return nil
			}
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF) && !started:
			if serr := sess.Err(); serr != nil && sess.Info().Bytes == 0 {
				return stoppedStreamError(sess.ID(), serr)
			}
			startEventStream(w) // an empty rest: the stream ended where the client was
			return nil
		case errors.Is(err, resumable.ErrDropped) && !started:
			return offsetError(err, f.Offset(), sess.Info())
		}
		// The end, the client gone, or a client so slow that the ring dropped bytes it had not
		// read yet: the response ends, and the client can ask again from where it stopped.
		return nil
	}
}

// stoppedStreamError is how a session that ended for reason (its failure, or why it was
// cancelled) is answered: as the error of a POST or GET that has sent nothing yet, or as the
// stream's last event (stoppedStreamEvent).
func stoppedStreamError(id string, reason error) *apiError {
	switch {
	case errors.Is(reason, resumable.ErrShutdown):
		return &apiError{typ: errUnavailable, cause: reason, message: "the server is shutting down"}
	case errors.Is(reason, resumable.ErrCancelled):
		return &apiError{typ: errInvalidRequest, cause: reason, message: fmt.Sprintf("the stream %q was cancelled", id)}
	}
	return toAPIError(reason)
}

// stoppedStreamEvent is the last event of a session cancelled after it started: the error
// event a failure mid-stream sends (sseWriter.fail), so that the POST's response and every
// replay end with a terminal event, as a finished stream ends with [DONE].
func stoppedStreamEvent(id string, reason error) []byte {
	body := stoppedStreamError(id, reason).body()
	var enc jx.Encoder
	body.Encode(&enc)
	return append(append([]byte("data: "), enc.Bytes()...), "\n\n"...)
}

// offsetError explains a from= that the session cannot serve.
func offsetError(err error, from int64, info resumable.Info) error {
	switch {
	case errors.Is(err, resumable.ErrDropped):
		return invalidRequest("from=%d is before the oldest byte the stream %q still holds (%d): its first %d bytes were dropped",
			from, info.ID, info.RetainedFrom, info.RetainedFrom)
	case errors.Is(err, resumable.ErrBeyondEnd):
		return invalidRequest("from=%d is beyond the end of the stream %q, which has %d bytes so far", from, info.ID, info.Bytes)
	}
	return err
}
