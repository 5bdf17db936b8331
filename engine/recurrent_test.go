package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// prefixRun is one of models/hybrid's prefix-reuse captures of llama-server.
type prefixRun struct {
	Prompt  string  `json:"prompt"`
	Tokens  []int32 `json:"tokens"`
	Timings struct {
		CacheN int `json:"cache_n"`
	} `json:"timings"`
}

func readPrefixRun(t *testing.T, name string) prefixRun {
	t.Helper()
	raw, err := os.ReadFile(shareddata.Path(t, "models", "hybrid", name))
	if err != nil {
		t.Fatal(err)
	}
	var r prefixRun
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	r.Prompt = strings.TrimPrefix(r.Prompt, "<s> ") // the server's rendering of the BOS
	return r
}

// tokensOf runs prompt greedily for n tokens and returns the generated ids and the final
// result.
func tokensOf(t *testing.T, e *engine.Engine, prompt []int32, n int, skipCache bool) ([]int32, engine.Result) {
	t.Helper()
	p := greedy(n)
	p.SkipPromptCache = skipCache
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	var last engine.Result
	for r := range ch {
		ids = append(ids, r.Tokens...)
		last = r
	}
	if last.Err != nil {
		t.Fatal(last.Err)
	}
	return ids, last
}

// atOnce runs the prompts greedily for n tokens each, submitted together (without the prompt
// cache), and returns their tokens.
func atOnce(t *testing.T, e *engine.Engine, prompts [][]int32, n int) [][]int32 {
	t.Helper()
	got := make([][]int32, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = tokensOf(t, e, p, n, true)
		}()
	}
	wg.Wait()
	return got
}

// TestRecurrentPrefixFromCheckpoint replays models/hybrid's prefix-reuse run: llama-server
// (-c 512 -np 1) answered prompt a, then reused 40 of the 52 tokens of prompt b (a extended)
// from a context checkpoint, giving a fresh server's tokens. The same prompt b again reuses
// its own checkpoint, 4 tokens before its end.
func TestRecurrentPrefixFromCheckpoint(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "hybrid", "qwen35-F32.gguf"), CtxSize: 512, Slots: 1})
	a, b := readPrefixRun(t, "qwen35-F32.prefix-a.json"), readPrefixRun(t, "qwen35-F32.prefix-b.json")
	tok := e.Tokenizer()
	for i, c := range []struct {
		run    prefixRun
		cacheN int
	}{{a, 0}, {b, 40}, {b, 48}} {
		got, final := tokensOf(t, e, tok.Encode(c.run.Prompt, true, true), len(c.run.Tokens), false)
		if !slices.Equal(got, c.run.Tokens) {
			t.Errorf("request %d: tokens %v, llama.cpp's %v", i, got, c.run.Tokens)
		}
		if final.Timings.CacheN != c.cacheN {
			t.Errorf("request %d: cache_n %d, want %d", i, final.Timings.CacheN, c.cacheN)
		}
	}
}

// TestRecurrentPromptCache checks that a prompt saved to the prompt cache (--cache-ram) keeps
// its state: after another prompt took the only slot, prompt b still reuses prompt a's
// checkpoint, from the cache's entry. The other prompt shares only the BOS with a, which no
// checkpoint holds: it reuses nothing, as llama-server does.
func TestRecurrentPromptCache(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "hybrid", "qwen35-F32.gguf"), CtxSize: 512, Slots: 1})
	a, b := readPrefixRun(t, "qwen35-F32.prefix-a.json"), readPrefixRun(t, "qwen35-F32.prefix-b.json")
	tok := e.Tokenizer()
	tokensOf(t, e, tok.Encode(a.Prompt, true, true), 24, false)
	if _, final := tokensOf(t, e, tok.Encode("The cat sat on the mat and looked at the bird", true, true), 8, false); final.Timings.CacheN != 0 {
		t.Errorf("an unrelated prompt reused %d tokens", final.Timings.CacheN)
	}
	got, final := tokensOf(t, e, tok.Encode(b.Prompt, true, true), len(b.Tokens), false)
	if !slices.Equal(got, b.Tokens) || final.Timings.CacheN != 40 {
		t.Errorf("prompt b after the cache: cache_n %d, tokens %v; want 40 and %v", final.Timings.CacheN, got, b.Tokens)
	}
}

// TestRecurrentBatchedMatchesAlone runs four prompts of different lengths one at a time, then
// together in four slots (each with its own state slot, in shared passes): the same tokens.
func TestRecurrentBatchedMatchesAlone(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "hybrid", "qwen35-Q4_K_M.gguf"), CtxSize: 4 * 256, Slots: 4})
	tok := e.Tokenizer()
	prompts := make([][]int32, 4)
	for i, p := range batchPrompts[:4] {
		prompts[i] = tok.Encode(p, true, true)
	}
	alone := make([][]int32, len(prompts))
	for i, p := range prompts {
		alone[i], _ = tokensOf(t, e, p, 16, true)
	}
	together := atOnce(t, e, prompts, 16)
	for i := range prompts {
		if !slices.Equal(together[i], alone[i]) || len(alone[i]) != 16 {
			t.Errorf("prompt %d: batched %v, alone %v", i, together[i], alone[i])
		}
	}
}

// TestSlotSaveRestoreNewArchs saves a slot of the hybrid qwen35 (its attention layers' rows and
// its recurrent state, in llama.cpp's format) and of gemma4 (KV rows of two sizes, layers
// without a cache of their own), erases it, restores it, and continues the conversation: the
// restored cache is reused whole and the tokens equal a run without cache.
func TestSlotSaveRestoreNewArchs(t *testing.T) {
	for _, parts := range [][]string{{"models", "hybrid", "qwen35-F32.gguf"}, {"models", "gemma4", "gemma4-F32.gguf"}} {
		t.Run(parts[2], func(t *testing.T) {
			e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, parts...), CtxSize: 512, Slots: 1})
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "slot0.bin")
			prompt := e.Tokenizer().Encode("Once upon a time, there was a little dog", true, true)
			gen, first := tokensOf(t, e, prompt, 8, false)
			saved, err := e.SaveSlot(ctx, 0, path)
			if err != nil {
				t.Fatal(err)
			}
			if saved.Tokens != first.TokensCached {
				t.Errorf("saved %d tokens, the slot held %d", saved.Tokens, first.TokensCached)
			}
			if _, err := e.EraseSlot(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := e.RestoreSlot(ctx, 0, path); err != nil {
				t.Fatal(err)
			}
			next := slices.Concat(prompt, gen)
			got, final := tokensOf(t, e, next, 8, false)
			if final.Timings.CacheN != len(next)-1 {
				t.Errorf("cache_n %d after restore, want %d (the restored cache)", final.Timings.CacheN, len(next)-1)
			}
			want, _ := tokensOf(t, e, next, 8, true)
			if !slices.Equal(got, want) {
				t.Errorf("after restore %v, without cache %v", got, want)
			}
		})
	}
}

// TestRecurrentSpeculative drafts by prompt lookup on the hybrid model, whose state cannot be
// cut back: each verification pass keeps the slot's state as it was before its rows, and a
// partly rejected draft returns to it and evaluates the accepted tokens again. Greedy output
// equals plain decoding, one request and two at once, with drafts both accepted and
// rejected. Hybrid draft models (TestRecurrentDraftModel) keep their states the same way.
func TestRecurrentSpeculative(t *testing.T) {
	path := shareddata.Path(t, "models", "hybrid", "qwen35-F32.gguf")
	tok := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 512, Slots: 1}).Tokenizer()
	prompts := [][]int32{tok.Encode(strings.Repeat("Tom had a red ball. ", 4)+"Tom had", true, true),
		tok.Encode(strings.Repeat("The cat sat on the mat. ", 3)+"The cat", true, true)}
	plain := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 512, Slots: 1})
	want := make([][]int32, len(prompts))
	for i, p := range prompts {
		// The prompt again after its own continuation: the history then holds n-grams that
		// the model's next tokens may or may not repeat.
		first, _ := tokensOf(t, plain, p, 24, true)
		prompts[i] = slices.Concat(p, first, p[1:])
		want[i], _ = tokensOf(t, plain, prompts[i], 40, true)
	}
	spec := engine.DefaultSpecConfig()
	spec.Type, spec.NgramN, spec.NMax = engine.SpecNgram, 1, 6
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 1024, Slots: 2, Speculative: spec})
	for i, p := range prompts {
		got, final := tokensOf(t, e, p, 40, true)
		if !slices.Equal(got, want[i]) {
			t.Errorf("prompt %d drafted: %v, plain %v", i, got, want[i])
		}
		tm := final.Timings
		t.Logf("prompt %d: %d of %d drafted tokens accepted", i, tm.DraftNAccepted, tm.DraftN)
	}
	before := e.SpecStats()
	got := atOnce(t, e, prompts, 40)
	for i := range prompts {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("prompt %d drafted beside the other: %v, plain %v", i, got[i], want[i])
		}
	}
	st := e.SpecStats()
	if acc, n := st.Accepted-before.Accepted, st.DraftTokens-before.DraftTokens; acc == 0 || acc == n {
		t.Errorf("%d of %d drafted tokens accepted: want some accepted and some rejected", acc, n)
	}
}

// TestRecurrentDraftModel drafts with the hybrid model's Q8_0 file (an M-RoPE model: its
// drafting passes advance its text positions): for its F32 twin, both keeping their states
// before the draft and returning to them on a rejection, and for stories260K, whose rows are
// cut back as usual. Greedy output equals plain decoding, two requests at once, twice. The
// twin takes most drafts, and not all: the draft's states are the right ones (a wrong state
// drafts what the target rejects; the output would still be right).
func TestRecurrentDraftModel(t *testing.T) {
	draft := shareddata.Path(t, "models", "hybrid", "qwen35-Q8_0.gguf")
	for _, target := range []string{shareddata.Path(t, "models", "hybrid", "qwen35-F32.gguf"), shareddata.Path(t, "models", "stories260K.gguf")} {
		twin := strings.Contains(target, "qwen35")
		t.Run(filepath.Base(target), func(t *testing.T) {
			plain := enginetest.LoadConfig(t, engine.Config{ModelPath: target, CtxSize: 512, Slots: 1})
			tok := plain.Tokenizer()
			prompts := [][]int32{tok.Encode("Once upon a time", true, true), tok.Encode("The cat sat on the mat", true, true)}
			want := make([][]int32, len(prompts))
			for i, p := range prompts {
				want[i], _ = tokensOf(t, plain, p, 40, true)
			}
			spec := engine.DefaultSpecConfig()
			spec.DraftModel, spec.NMax = draft, 6
			e := enginetest.LoadConfig(t, engine.Config{ModelPath: target, CtxSize: 1024, Slots: 2, Speculative: spec})
			for round := range 2 { // the second round starts from the draft's earlier states
				got := atOnce(t, e, prompts, 40)
				for i := range prompts {
					if !slices.Equal(got[i], want[i]) {
						t.Errorf("round %d, prompt %d drafted: %v, plain %v", round, i, got[i], want[i])
					}
				}
			}
			st := e.SpecStats()
			t.Logf("%d of %d drafted tokens accepted", st.Accepted, st.DraftTokens)
			if twin && (2*st.Accepted < st.DraftTokens || st.Accepted == st.DraftTokens) || st.DraftTokens == 0 {
				t.Errorf("%d of %d drafted tokens accepted: want most from the twin, and some rejected", st.Accepted, st.DraftTokens)
			}
		})
	}
}

// TestRecurrentSlotFileFromLlamaServer restores a slot file that llama.cpp's own llama-server
// saved for the hybrid model (its M-RoPE cells, its two attention layers' rows and its
// recurrent state): the engine reuses it whole and continues as it does without a cache.
func TestRecurrentSlotFileFromLlamaServer(t *testing.T) {
	path := shareddata.Path(t, "models", "hybrid", "qwen35-F32.gguf")
	dir := t.TempDir()
	srv := shareddata.LlamaServer(t, path, "-c", "512", "-np", "1", "--slot-save-path", dir)
	const prompt = "Once upon a time, there was a little dog"
	var first struct {
		Tokens []int32 `json:"tokens"`
	}
	body := `{"prompt": "` + prompt + `", "n_predict": 8, "temperature": 0, "cache_prompt": true, "return_tokens": true}`
	if err := json.Unmarshal(shareddata.LlamaServerPost(t, srv, "/completion", body), &first); err != nil {
		t.Fatal(err)
	}
	shareddata.LlamaServerPost(t, srv, "/slots/0?action=save", `{"filename": "slot0.bin"}`)

	e := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 512, Slots: 1})
	restored, err := e.RestoreSlot(context.Background(), 0, filepath.Join(dir, "slot0.bin"))
	if err != nil {
		t.Fatal(err)
	}
	promptIDs := e.Tokenizer().Encode(prompt, true, true)
	if restored.Tokens != len(promptIDs)+len(first.Tokens)-1 {
		t.Errorf("restored %d tokens, llama-server held %d", restored.Tokens, len(promptIDs)+len(first.Tokens)-1)
	}
	next := slices.Concat(promptIDs, first.Tokens)
	got, final := tokensOf(t, e, next, 8, false)
	if final.Timings.CacheN != len(next)-1 {
		t.Errorf("cache_n %d after restoring llama-server's file, want %d", final.Timings.CacheN, len(next)-1)
	}
	want, _ := tokensOf(t, e, next, 8, true)
	if !slices.Equal(got, want) {
		t.Errorf("after llama-server's state %v, without cache %v", got, want)
	}
}
