package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// newVocabHarness serves the fake backend with the vocabulary of a real model file (under the
// shared models directory), to check how prompts are laid out in its tokens.
func newVocabHarness(t *testing.T, cfg Config, path ...string) *harness {
	t.Helper()
	f, err := gguf.Open(shareddata.Path(t, append([]string{"models"}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	fake := newFakeBackend(t)
	fake.tok, fake.info.NVocab, fake.info.NCtx = tok, tok.NVocab(), 4096
	srv := New(cfg, testLogger())
	srv.SetBackend(fake)
	return &harness{srv: srv, fake: fake, h: srv.Handler()}
}

// cat concatenates token runs.
func cat(runs ...[]int32) []int32 {
	var out []int32
	for _, r := range runs {
		out = append(out, r...)
	}
	return out
}

func TestInfillUnsupported(t *testing.T) {
	const want = `{"error":{"code":501,"message":"Infill is not supported by this model: prefix token is missing. suffix token is missing. middle token is missing. ","type":"not_supported_error"}}`
	for name, h := range map[string]*harness{
		"fake":        newHarness(t),
		"stories260K": newVocabHarness(t, Config{}, "stories260K.gguf"),
	} {
		rec := h.do(t, "POST", "/infill", `{"input_prefix":"def f():\n","input_suffix":"\n"}`)
		if rec.Code != http.StatusNotImplemented || rec.Body.String() != want {
			t.Errorf("%s: %d %s", name, rec.Code, rec.Body)
		}
	}
}

// TestInfillLayout checks infill prompts token by token: llama-server's format_prompt_infill
// with its FIM tokens, BOS where the vocabulary adds it, extra chunks with the repository and
// snippet markers, and suffix-first order with --spm-infill.
func TestInfillLayout(t *testing.T) {
	const (
		prefix = "def add(a, b):\n    "
		suffix = "\n\nprint(add(1, 2))\n"
	)
	const body = `{"input_prefix":"def add(a, b):\n    ","input_suffix":"\n\nprint(add(1, 2))\n","prompt":"return",` +
		`"input_extra":[{"filename":"util.py","text":"x = 1\n"},{"text":"y = 2\n"}],"n_predict":2}`

	t.Run("deepseek-coder", func(t *testing.T) {
		// FIM begin/hole/end are 32016/32015/32017; BOS 32013 is added; no repository or file
		// separator tokens, so chunks follow the snippet marker.
		h := newVocabHarness(t, Config{}, "vocab", "ggml-vocab-deepseek-coder.gguf")
		tok := h.fake.tok
		rec := h.do(t, "POST", "/infill", body)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		enc := func(s string) []int32 { return tok.Encode(s, false, false) }
		want := cat(enc(snippetSeparator), enc("x = 1\n"), enc(snippetSeparator), enc("y = 2\n"),
			[]int32{32013, 32016}, enc(prefix), tok.Encode("return", false, true), []int32{32015}, enc(suffix), []int32{32017})
		if got := h.fake.lastTask(t).Prompt; !slices.Equal(got, want) {
			t.Errorf("prompt\n%v\nwant\n%v", got, want)
		}
		v := decodeJSON(t, rec.Body.Bytes())
		if v["stop"] != true || !strings.HasPrefix(v["prompt"].(string), "\n\n--- snippet ---\n\nx = 1\n") || v["tokens_predicted"] != 2.0 {
			t.Errorf("response %s", rec.Body)
		}
	})

	t.Run("refact", func(t *testing.T) {
		// <fim_prefix> 1, <fim_middle> 2, <fim_suffix> 3 and <reponame> 18; no BOS.
		h := newVocabHarness(t, Config{}, "vocab", "ggml-vocab-refact.gguf")
		tok := h.fake.tok
		rec := h.do(t, "POST", "/infill", body)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		enc := func(s string) []int32 { return tok.Encode(s, false, false) }
		want := cat([]int32{18}, enc("myproject\n"), enc(snippetSeparator), enc("x = 1\n"), enc(snippetSeparator), enc("y = 2\n"),
			[]int32{1}, enc(prefix), tok.Encode("return", false, true), []int32{3}, enc(suffix), []int32{2})
		if got := h.fake.lastTask(t).Prompt; !slices.Equal(got, want) {
			t.Errorf("prompt\n%v\nwant\n%v", got, want)
		}
	})

	t.Run("starcoder spm", func(t *testing.T) {
		// --spm-infill: suffix, then prefix and prompt, then middle.
		h := newVocabHarness(t, Config{SPMInfill: true}, "vocab", "ggml-vocab-starcoder.gguf")
		tok := h.fake.tok
		rec := h.do(t, "POST", "/infill", `{"input_prefix":[7, "def f():"],"input_suffix":"\n"}`)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		want := cat([]int32{3}, tok.Encode("\n", false, false), []int32{1, 7}, tok.Encode("def f():", false, false), []int32{2})
		if got := h.fake.lastTask(t).Prompt; !slices.Equal(got, want) {
			t.Errorf("prompt %v, want %v", got, want)
		}
	})
}

// TestInfillTruncation checks what is kept of long parts: the end of the prefix (3/4 of a
// 2048-token batch), the start of the suffix (a quarter less the prompt and 2) and the end of
// the extra context (what the context leaves after a batch).
func TestInfillTruncation(t *testing.T) {
	h := newVocabHarness(t, Config{}, "vocab", "ggml-vocab-refact.gguf")
	tok := h.fake.tok
	long := func(word string, n int) string { return strings.Repeat(word, n) }
	enc := func(s string) []int32 { return tok.Encode(s, false, false) }

	pre, suf := long(" alpha", 1800), long(" beta", 700)
	rec := h.do(t, "POST", "/infill", `{"input_prefix":"`+pre+`","input_suffix":"`+suf+`","prompt":" x"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	prompt := tok.Encode(" x", false, true)
	preT, sufT := enc(pre), enc(suf)
	if len(preT) <= 1536 || len(sufT) <= 512 {
		t.Fatalf("parts too short to be cut: %d, %d tokens", len(preT), len(sufT))
	}
	want := cat([]int32{18}, enc("myproject\n"), []int32{1}, preT[len(preT)-1536:], prompt, []int32{3}, sufT[:512-2-len(prompt)], []int32{2})
	if got := h.fake.lastTask(t).Prompt; !slices.Equal(got, want) {
		t.Errorf("prompt of %d tokens, want %d", len(got), len(want))
	}

	extra := long(" gamma", 2500)
	rec = h.do(t, "POST", "/infill", `{"input_prefix":"a","input_suffix":"b","input_extra":[{"filename":"f","text":"`+extra+`"}]}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	all := cat([]int32{18}, enc("myproject\n"), enc(snippetSeparator), enc(extra))
	keep := 4096 - 2048 + 2 // n_ctx - n_batch - 2*n_predict, with n_predict -1
	want = cat(all[len(all)-keep:], []int32{1}, enc("a"), []int32{3}, enc("b"), []int32{2})
	if got := h.fake.lastTask(t).Prompt; !slices.Equal(got, want) {
		t.Errorf("prompt of %d tokens, want %d (extra cut to its last %d)", len(got), len(want), keep)
	}
}

func TestInfillErrors(t *testing.T) {
	h := newVocabHarness(t, Config{}, "vocab", "ggml-vocab-starcoder.gguf")
	for _, tt := range []struct{ body, want string }{
		{`{"input_suffix":"b"}`, "'input_prefix' is required"},
		{`{"input_prefix":"a","input_suffix":"b","input_extra":[{"filename":"f"}]}`, "'input_extra.text' is required"},
		{`{"input_prefix":"a","input_suffix":"b","prompt":[1]}`, "'prompt' must be a string"},
		{`{"input_prefix":[99999999],"input_suffix":"b"}`, "'input_prefix' token 99999999 is out of range"},
		{`{"input_prefix":"a","input_suffix":"b","temperature":-1}`, "'temperature'"},
	} {
		rec := h.do(t, "POST", "/infill", tt.body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("%s: %d %s, want 400 mentioning %q", tt.body, rec.Code, rec.Body, tt.want)
		}
	}
	// Streams as /completion.
	rec := h.do(t, "POST", "/infill", `{"input_prefix":"a","input_suffix":"b","n_predict":2,"stream":true}`)
	events := jsonEvents(t, sseEvents(t, rec.Body.String()))
	if rec.Header().Get("Content-Type") != "text/event-stream" || len(events) != 3 || events[2]["stop"] != true {
		t.Errorf("stream: %s", rec.Body)
	}
}
