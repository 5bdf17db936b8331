package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/server/resumable"
)

// cancelledEvent and shutdownEvent are the last events of a resumable stream stopped by DELETE
// and by the server's shutdown.
const (
	cancelledEvent = `data: {"error":{"code":400,"message":"the stream \"e\" was cancelled","type":"invalid_request_error"}}` + "\n\n"
	shutdownEvent  = `data: {"error":{"code":503,"message":"the server is shutting down","type":"unavailable_error"}}` + "\n\n"
)

// TestResumableStoppedStreamsEnd: a resumable stream stopped by DELETE, in either route form, or
// by shutdown ends with an error event saying why, for the POST and for every replay, so a
// client can tell a stopped stream from a dropped connection.
func TestResumableStoppedStreamsEnd(t *testing.T) {
	for _, tc := range []struct {
		name, last string
		stop       func(s *streamServer)
	}{
		{"DELETE /v1/stream/{id}", cancelledEvent, func(s *streamServer) { s.body(t, "DELETE", "/v1/stream/e", "") }},
		{"DELETE /v1/stream?conv_id=", cancelledEvent, func(s *streamServer) { s.body(t, "DELETE", "/v1/stream?conv_id=e", "") }},
		{"shutdown", shutdownEvent, func(s *streamServer) { s.srv.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStreamServer(t, newFakeBackend(t), 2)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a stop that fails
			defer cancel()
			resp := s.send(t, ctx, "POST", "/v1/chat/completions", endlessChat, conversation("e"))
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			sent := readEvents(t, r, 2)
			tc.stop(s)
			rest, err := io.ReadAll(r)
			if err != nil {
				t.Fatalf("the POST's response: %v", err)
			}
			sent += string(rest)
			if !strings.HasSuffix(sent, tc.last) || strings.Count(sent, `"error"`) != 1 {
				t.Errorf("the POST's response ends %q, want %q", tail(sent, 160), tc.last)
			}
			if tc.name == "DELETE /v1/stream?conv_id=" {
				return // llama-server's DELETE removes the stream
			}
			if full := s.replay(t, "e", 0); full != sent {
				t.Errorf("the replay ends %q, want the POST's bytes, ending %q", tail(full, 160), tc.last)
			}
		})
	}
}

// TestResumableQueuedAtShutdown: a resumable POST still waiting for its first token when the
// server shuts down gets a 503, not an empty 200.
func TestResumableQueuedAtShutdown(t *testing.T) {
	s := newStreamServer(t, newFakeBackend(t), 0)
	done := make(chan *http.Response)
	go func() {
		done <- s.send(t, context.Background(), "POST", "/v1/chat/completions", endlessChat, conversation("q"))
	}()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if sess, ok := s.srv.streams.Get("q"); ok && s.gate.drawn.Load() > 0 && sess.Info().Bytes == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s.srv.Close()
	resp := <-done
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "the server is shutting down") {
		t.Errorf("the queued POST at shutdown: %d %q", resp.StatusCode, body)
	}
}

// TestResumableLlamaRoutes: llama-server's routes for resumable streams (GET and DELETE
// /v1/stream?conv_id=ID, POST /v1/streams/lookup with conversation_ids) answer as
// llama-server's handlers do (tools/server/server-stream.cpp).
func TestResumableLlamaRoutes(t *testing.T) {
	clock := resumable.NewManualClock(time.Unix(1767225600, 0))
	h := newHarnessConfig(t, Config{Alias: "stories260K", Streams: resumable.Config{Clock: clock}})
	rec := h.doWith(t, "POST", "/v1/chat/completions", storyChat, conversation("conv-1"))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	full := rec.Body.String()
	for _, from := range []int{0, 5, len(full)} {
		got := h.do(t, "GET", fmt.Sprintf("/v1/stream?conv_id=conv-1&from=%d", from), "")
		if got.Code != http.StatusOK || got.Body.String() != full[from:] {
			t.Errorf("GET ?conv_id from=%d: %d %q, want %q", from, got.Code, got.Body, full[from:])
		}
		wantStreamHeaders(t, got.Header())
	}
	if got := h.do(t, "GET", "/v1/stream?conv_id=conv-1", ""); got.Body.String() != full {
		t.Errorf("GET without from: %q", got.Body)
	}

	lookup := h.do(t, "POST", "/v1/streams/lookup", `{"conversation_ids":["nope","conv-1"]}`)
	want := fmt.Sprintf(`[{"conversation_id":"conv-1","is_done":true,"total_bytes":%d,"started_at":1767225600,"completed_at":1767225600}]`, len(full))
	if lookup.Code != http.StatusOK || lookup.Body.String() != want {
		t.Errorf("lookup: %d %s, want %s", lookup.Code, lookup.Body, want)
	}
	if ours := h.do(t, "POST", "/v1/streams/lookup", `{"ids":["conv-1"]}`); !strings.HasPrefix(ours.Body.String(), `{"streams":[{"id":"conv-1","status":"done"`) {
		t.Errorf("our lookup: %s", ours.Body)
	}
	if none := h.do(t, "POST", "/v1/streams/lookup", `{"conversation_ids":[]}`); none.Code != 200 || none.Body.String() != "[]" {
		t.Errorf("lookup of nothing: %d %s", none.Code, none.Body)
	}
	both := h.do(t, "POST", "/v1/streams/lookup", `{"ids":["a"],"conversation_ids":["a"]}`)
	wantError(t, both, http.StatusBadRequest, "invalid_request_error", "give either 'ids' or 'conversation_ids', not both")

	// DELETE stops and forgets the stream, and answers 204 for a stream that does not exist.
	for range 2 {
		if del := h.do(t, "DELETE", "/v1/stream?conv_id=conv-1", ""); del.Code != http.StatusNoContent || del.Body.Len() != 0 {
			t.Errorf("DELETE ?conv_id: %d %q", del.Code, del.Body)
		}
	}
	wantError(t, h.do(t, "GET", "/v1/stream?conv_id=conv-1&from=0", ""), http.StatusNotFound, "not_found_error", `no stream with id "conv-1"`)
	if after := h.do(t, "POST", "/v1/streams/lookup", `{"conversation_ids":["conv-1"]}`); after.Body.String() != "[]" {
		t.Errorf("lookup after DELETE: %s", after.Body)
	}
	wantError(t, h.do(t, "GET", "/v1/stream", ""), http.StatusBadRequest, "invalid_request_error", "'conv_id' (query)")
}

// TestResumableLlamaIDs: llama-server's ids, CONV::MODEL with a model name holding '/' and ':',
// work through its query routes, and its lookup finds them by the conversation's id.
func TestResumableLlamaIDs(t *testing.T) {
	h := newHarness(t)
	const id = "conv-stream-test::ggml-org/tinygemma3-GGUF:Q8_0"
	qs := "conv_id=" + url.QueryEscape(id)
	rec := h.doWith(t, "POST", "/v1/chat/completions", storyChat, conversation(id))
	if rec.Code != http.StatusOK || !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n") {
		t.Fatalf("POST: %d %s", rec.Code, rec.Body)
	}
	if got := h.do(t, "GET", "/v1/stream?"+qs+"&from=0", ""); got.Code != http.StatusOK || got.Body.String() != rec.Body.String() {
		t.Errorf("GET ?%s: %d %.200s", qs, got.Code, got.Body)
	}
	lookup := h.do(t, "POST", "/v1/streams/lookup", `{"conversation_ids":["conv-stream-test","conv-stream"]}`)
	if !strings.HasPrefix(lookup.Body.String(), `[{"conversation_id":"`+id+`","is_done":true,`) || strings.Count(lookup.Body.String(), "conversation_id") != 1 {
		t.Errorf("lookup by the conversation's id: %s", lookup.Body)
	}
	// GET and DELETE match the whole id only, as llama-server's: the conversation's bare id
	// neither replays nor stops its ID::MODEL stream (DELETE still answers 204).
	wantError(t, h.do(t, "GET", "/v1/stream?conv_id=conv-stream-test", ""), http.StatusNotFound, "not_found_error", "no stream with id")
	if del := h.do(t, "DELETE", "/v1/stream?conv_id=conv-stream-test", ""); del.Code != http.StatusNoContent {
		t.Errorf("DELETE by the bare id: %d %s", del.Code, del.Body)
	}
	if got := h.do(t, "GET", "/v1/stream?"+qs, ""); got.Code != http.StatusOK || got.Body.String() != rec.Body.String() {
		t.Errorf("GET after DELETE by the bare id: %d %.200s", got.Code, got.Body)
	}
	exact := h.do(t, "POST", "/v1/streams/lookup", `{"conversation_ids":["`+id+`"]}`)
	if !strings.HasPrefix(exact.Body.String(), `[{"conversation_id":"`+id+`","is_done":true,`) || strings.Count(exact.Body.String(), "conversation_id") != 1 {
		t.Errorf("lookup by the whole id: %s", exact.Body)
	}
	if del := h.do(t, "DELETE", "/v1/stream?"+qs, ""); del.Code != http.StatusNoContent {
		t.Errorf("DELETE: %d %s", del.Code, del.Body)
	}
	wantError(t, h.do(t, "GET", "/v1/stream?"+qs, ""), http.StatusNotFound, "not_found_error", "no stream with id")
}
