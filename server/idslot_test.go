package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// TestIDSlotEngine: on a real 2-slot engine a request with id_slot 1 runs in slot 1 (the
// native answer reports it; /slots shows slot 0 never ran anything), on every generation
// endpoint; an id the engine lacks is llama-server's 400 "Invalid slot ID".
func TestIDSlotEngine(t *testing.T) {
	for _, c := range []struct{ path, body string }{
		{"/completion", `{"prompt":"Once upon a time","n_predict":4,"id_slot":1}`},
		{"/completions", `{"prompt":"Once upon a time","n_predict":4,"id_slot":1}`},
		{"/v1/completions", `{"prompt":"Once upon a time","max_tokens":4,"id_slot":1}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"id_slot":1}`},
	} {
		t.Run(c.path, func(t *testing.T) {
			b := enginetest.LoadSlots(t, 2, "models", "stories260K.gguf")
			srv := New(Config{Alias: "stories260K"}, testLogger())
			srv.SetBackend(b)
			h := &harness{srv: srv, h: srv.Handler()}
			rec := h.do(t, http.MethodPost, c.path, c.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if c.path == "/completion" || c.path == "/completions" {
				if got := decodeJSON(t, rec.Body.Bytes())["id_slot"]; got != 1.0 {
					t.Errorf("id_slot %v, want 1", got)
				}
			}
			slots, err := b.Slots(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if slots[0].Task != nil || slots[1].Task == nil {
				t.Errorf("slot 0 ran %v, slot 1 ran %v; want only slot 1", slots[0].Task, slots[1].Task)
			}

			bad := c.body[:len(c.body)-len(`1}`)] + `7}`
			rec = h.do(t, http.MethodPost, c.path, bad)
			if want := `{"error":{"code":400,"message":"Invalid slot ID","type":"invalid_request_error"}}`; rec.Code != http.StatusBadRequest || rec.Body.String() != want {
				t.Errorf("id_slot 7: %d %s, want 400 %s", rec.Code, rec.Body, want)
			}
		})
	}
}
