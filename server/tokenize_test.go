package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// vocabBackend serves a real model's vocabulary without generating: enough for /tokenize,
// /detokenize and /apply-template, with no GPU.
type vocabBackend struct {
	tok  *tokenizer.Tokenizer
	info engine.ModelInfo
}

func loadVocabBackend(t *testing.T, parts ...string) *vocabBackend {
	t.Helper()
	f, err := gguf.Open(shareddata.Path(t, parts...))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return &vocabBackend{tok: tok, info: engine.ModelInfo{Name: parts[len(parts)-1], NVocab: tok.NVocab(), NCtx: 512, NSlots: 1}}
}

func (v *vocabBackend) Tokenizer() *tokenizer.Tokenizer { return v.tok }
func (v *vocabBackend) Info() engine.ModelInfo          { return v.info }
func (v *vocabBackend) Submit(context.Context, engine.Task) (<-chan engine.Result, error) {
	return nil, errors.New("vocabulary-only backend: no generation")
}

// TestTokenizeWire replays llama-server's tokenize, detokenize and apply-template captures on
// stories260K and requires its exact bodies, with the vocabulary alone and with the engine.
func TestTokenizeWire(t *testing.T) {
	backends := []wireBackend{
		{name: "vocab", load: func(t *testing.T) Backend { return loadVocabBackend(t, "models", "stories260K.gguf") }},
		{name: "engine", load: func(t *testing.T) Backend { return enginetest.Load(t, "models", "stories260K.gguf") }},
	}
	for _, wb := range backends {
		t.Run(wb.name, func(t *testing.T) {
			srv := New(Config{Alias: "stories260K"}, testLogger())
			srv.SetBackend(wb.load(t))
			ts := httptest.NewServer(srv.Handler())
			t.Cleanup(ts.Close)
			for _, name := range []string{"tokenize", "tokenize_pieces", "tokenize_special", "detokenize", "apply_template"} {
				t.Run(name, func(t *testing.T) {
					c := loadCapture(t, name)
					req, err := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body))
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Content-Type", "application/json")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					body, err := io.ReadAll(resp.Body)
					if err != nil {
						t.Fatal(err)
					}
					if resp.StatusCode != c.status {
						t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
					}
					if got, want := resp.Header.Get("Content-Type"), c.header.Get("Content-Type"); got != want {
						t.Errorf("Content-Type = %q, llama-server sends %q", got, want)
					}
					// Byte for byte: these bodies have no timings or ids, and the key order is the same.
					if !bytes.Equal(body, c.respBody) {
						t.Errorf("body %s\nllama-server sends %s", body, c.respBody)
					}
				})
			}
		})
	}
}

// TestTokenize checks /tokenize and /detokenize on the fake vocabulary (specials <unk> <s>
// </s>, byte fallback, single characters and the story's words).
func TestTokenize(t *testing.T) {
	h := newHarness(t)
	id := func(text string) int32 {
		i, ok := h.fake.tok.TokenID(text)
		if !ok {
			t.Fatalf("no token %q", text)
		}
		return i
	}
	sa, b, there := id("▁a"), id("b"), id("▁there")
	c3, a9 := id("<0xC3>"), id("<0xA9>")
	tests := []struct {
		name, path, body, want string
	}{
		{"ids without specials", "/tokenize", `{"content":"a"}`, jsonOf(t, map[string]any{"tokens": []int32{sa}})},
		{"add_special adds BOS", "/tokenize", `{"content":"a","add_special":true}`, jsonOf(t, map[string]any{"tokens": []int32{1, sa}})},
		{"nulls mean defaults", "/tokenize", `{"content":"a","add_special":null,"parse_special":null,"with_pieces":null}`, jsonOf(t, map[string]any{"tokens": []int32{sa}})},
		{"special text parsed by default", "/tokenize", `{"content":"<s>a"}`, jsonOf(t, map[string]any{"tokens": []int32{1, sa}})},
		{"special text as characters", "/tokenize", `{"content":"<s>","parse_special":false}`, jsonOf(t, map[string]any{"tokens": []int32{id("▁"), id("<"), id("s"), id(">")}})},
		{"pieces", "/tokenize", `{"content":"a","with_pieces":true,"add_special":true}`,
			`{"tokens":[{"id":1,"piece":"<s>"},{"id":` + itoa(sa) + `,"piece":" a"}]}`},
		{"pieces of a split character are bytes", "/tokenize", `{"content":"é","with_pieces":true}`,
			`{"tokens":[{"id":` + itoa(id("▁")) + `,"piece":" "},{"id":` + itoa(c3) + `,"piece":[195]},{"id":` + itoa(a9) + `,"piece":[169]}]}`},
		{"mixed ids and strings", "/tokenize", `{"content":[2,"ab",7],"add_special":true}`,
			jsonOf(t, map[string]any{"tokens": []int32{2, sa, b, 7}})},
		{"a leading string gets BOS", "/tokenize", `{"content":["ab",7],"add_special":true}`,
			jsonOf(t, map[string]any{"tokens": []int32{1, sa, b, 7}})},
		{"no content", "/tokenize", `{}`, `{"tokens":[]}`},
		{"empty content", "/tokenize", `{"content":""}`, `{"tokens":[]}`},
		{"detokenize renders specials and keeps the leading space", "/detokenize", `{"tokens":[1,` + itoa(there) + `,2]}`, `{"content":"<s> there</s>"}`},
		{"detokenize without BOS", "/detokenize", `{"tokens":[` + itoa(there) + `]}`, `{"content":" there"}`},
		{"detokenize joins bytes", "/detokenize", `{"tokens":[` + itoa(c3) + `,` + itoa(a9) + `]}`, `{"content":"é"}`},
		{"detokenize half a character", "/detokenize", `{"tokens":[` + itoa(c3) + `]}`, "{\"content\":\"\uFFFD\"}"},
		{"detokenize nothing", "/detokenize", `{}`, `{"content":""}`},
		{"detokenize null", "/detokenize", `{"tokens":null}`, `{"content":""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := h.do(t, "POST", tt.path, tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("body %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTokenizeErrors(t *testing.T) {
	tests := []struct {
		name, path, body, msg string
	}{
		{"content of the wrong type", "/tokenize", `{"content":5}`, "'content' must be a string or an array of token ids and strings"},
		{"content object", "/tokenize", `{"content":{"text":"x"}}`, "'content' must be a string or an array of token ids and strings"},
		{"add_special not a boolean", "/tokenize", `{"content":"x","add_special":"yes"}`, "'add_special' must be a boolean"},
		{"with_pieces not a boolean", "/tokenize", `{"content":"x","with_pieces":1}`, "'with_pieces' must be a boolean"},
		{"token id out of range in content", "/tokenize", `{"content":["x",99999]}`, "'content' token 99999 is out of range at index 1 (the vocabulary has"},
		{"negative token id in content", "/tokenize", `{"content":[-1]}`, "'content' token -1 is out of range"},
		{"bad JSON", "/tokenize", `{"content":`, "invalid JSON"},
		{"tokens not an array", "/detokenize", `{"tokens":"abc"}`, "'tokens' must be an array of integers (or null)"},
		{"tokens of strings", "/detokenize", `{"tokens":["a"]}`, "'tokens' must be an array of integers"},
		{"token beyond int32", "/detokenize", `{"tokens":[4294967296]}`, "'tokens' must be an array of integers"},
		{"token id out of range", "/detokenize", `{"tokens":[1,99999]}`, "'tokens' token 99999 is out of range at index 1"},
		{"negative token id", "/detokenize", `{"tokens":[-1]}`, "'tokens' token -1 is out of range at index 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			wantError(t, h.do(t, "POST", tt.path, tt.body), http.StatusBadRequest, "invalid_request_error", tt.msg)
		})
	}
}

func itoa(id int32) string { return strconv.Itoa(int(id)) }

// jsonOf encodes v as encoding/json does, for expected bodies.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
