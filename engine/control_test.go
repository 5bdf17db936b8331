package engine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// run submits prompt with greedy settings and returns the text and final result.
// TestSlotSaveEraseRestore saves a slot after a request, erases it, restores it and checks
// that the same prompt then reuses the restored cache and produces the same greedy text.
func TestSlotSaveEraseRestore(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "slot0.bin")
	const prompt = "Once upon a time, there was a little dog"
	want, first := run(t, e, e.Tokenizer().Encode(prompt, true, true), greedy(24))

	saved, err := e.SaveSlot(ctx, 0, path)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Tokens != first.TokensCached || saved.Tokens == 0 {
		t.Errorf("saved %d tokens, the slot held %d", saved.Tokens, first.TokensCached)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != saved.Bytes {
		t.Errorf("file: %v, size %v, reported %d bytes", err, st, saved.Bytes)
	}

	erased, err := e.EraseSlot(ctx, 0)
	if err != nil || erased != saved.Tokens {
		t.Fatalf("erased %d tokens (%v), want %d", erased, err, saved.Tokens)
	}
	slots, err := e.Slots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := slots[0].Task.NPromptTokens; got != 0 {
		t.Errorf("after erase the slot holds %d tokens", got)
	}

	restored, err := e.RestoreSlot(ctx, 0, path)
	if err != nil {
		t.Fatal(err)
	}
	if restored.Tokens != saved.Tokens || restored.Bytes != saved.Bytes {
		t.Errorf("restored %d tokens from %d bytes, saved %d in %d", restored.Tokens, restored.Bytes, saved.Tokens, saved.Bytes)
	}
	got, again := run(t, e, e.Tokenizer().Encode(prompt, true, true), greedy(24))
	if again.Timings.CacheN == 0 || again.Timings.CacheN != first.TokensEvaluated-1 {
		t.Errorf("cache_n %d after restore, want %d (the whole prompt but its last token)", again.Timings.CacheN, first.TokensEvaluated-1)
	}
	if got != want {
		t.Errorf("text after restore %q, before %q", got, want)
	}
}

func TestSlotRestoreRefusals(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "good.bin")
	run(t, e, e.Tokenizer().Encode("The cat sat on the mat", true, true), greedy(8))
	saved, err := e.SaveSlot(ctx, 0, path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	n := saved.Tokens
	// The key type of layer 0 follows the header (3 words), the packed tokens (n+4 words),
	// the stream and cell counts (2), the cells (3 words each), v_trans and n_layer (2).
	typeAt := 4 * (3 + n + 4 + 2 + 3*n + 2)
	otherType := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(otherType[typeAt:], 0)
	badPos := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(badPos[4*(3+n+4+2+3):], 7) // cell 1 claims position 7
	badVersion := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(badVersion[4:], 9)
	for name, c := range map[string]struct{ path, want string }{
		"missing":     {filepath.Join(dir, "missing.bin"), "no such file"},
		"truncated":   {write("truncated.bin", data[:len(data)-3]), "file ends early"},
		"garbage":     {write("garbage.bin", []byte("not a slot file at all")), "not a llama.cpp sequence state file"},
		"version":     {write("version.bin", badVersion), "state file version 9"},
		"other types": {write("other.bin", otherType), "key rows of layer 0: type 0"},
		"positions":   {write("positions.bin", badPos), "KV cell 1 holds position 7"},
		"trailing":    {write("trailing.bin", append(append([]byte(nil), data...), 0)), "1 unexpected bytes after the rows"},
	} {
		_, err := e.RestoreSlot(ctx, 0, c.path)
		if !errors.Is(err, engine.ErrSlotFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: restore error %v, want ErrSlotFile saying %q", name, err, c.want)
		}
	}
	slots, err := e.Slots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := slots[0].Task.NPromptTokens; got != saved.Tokens {
		t.Errorf("failed restores changed the slot: %d tokens, had %d", got, saved.Tokens)
	}
	if _, err := e.SaveSlot(ctx, 1, path); !errors.Is(err, engine.ErrInvalidSlot) {
		t.Errorf("save to slot 1 of 1: %v, want ErrInvalidSlot", err)
	}
	if _, err := e.EraseSlot(ctx, -1); !errors.Is(err, engine.ErrInvalidSlot) {
		t.Errorf("erase slot -1: %v, want ErrInvalidSlot", err)
	}
}

// TestSlotSaveWaitsForRequest saves a slot while a request runs in it: the save waits for the
// request to end, as llama-server defers it, and saves everything the request left cached.
func TestSlotSaveWaitsForRequest(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	ctx := context.Background()
	ch, err := e.Submit(ctx, engine.Task{Prompt: e.Tokenizer().Encode("Once upon a time", true, true), Params: greedy(120)})
	if err != nil {
		t.Fatal(err)
	}
	<-ch // the request is running in slot 0
	slots, err := e.Slots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slots[0].Processing || slots[0].Task == nil || !slots[0].Task.HasNextToken || slots[0].Task.NDecoded == 0 {
		t.Errorf("slot during a request: %+v %+v", slots[0], slots[0].Task)
	}
	finals := make(chan engine.Result, 1)
	go func() { // the request must be read for it to run to its end
		var last engine.Result
		for r := range ch {
			last = r
		}
		finals <- last
	}()
	saved, err := e.SaveSlot(ctx, 0, filepath.Join(t.TempDir(), "busy.bin"))
	if err != nil {
		t.Fatal(err)
	}
	final := <-finals
	if saved.Tokens != final.TokensCached {
		t.Errorf("saved %d tokens, the request left %d cached", saved.Tokens, final.TokensCached)
	}
}

func TestSlotsAndStats(t *testing.T) {
	e := enginetest.LoadSlots(t, 2, "models", "stories260K.gguf")
	ctx := context.Background()
	slots, err := e.Slots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 2 || slots[1].ID != 1 || slots[0].NCtx != 512 || slots[0].Processing || slots[0].Task != nil {
		t.Fatalf("slots before any request: %+v", slots)
	}
	_, first := run(t, e, e.Tokenizer().Encode("Once upon a time", true, true), greedy(10))
	_, second := run(t, e, e.Tokenizer().Encode("Once upon a time", true, true), greedy(6))

	slots, err = e.Slots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	task := slots[first.Slot].Task
	if task == nil || task.ID != 1 || task.NPromptTokens != second.TokensCached || task.NRemain != -1 || task.NDecoded != 0 || task.HasNextToken {
		t.Errorf("idle slot after two requests: %+v", task)
	}
	if task.Params.NPredict != 6 || task.Params.Temperature != 0 {
		t.Errorf("slot params %+v, want the last request's", task.Params)
	}

	st := e.Stats()
	if st.PromptTokens != uint64(first.Timings.PromptN+second.Timings.PromptN) || st.PromptCached != uint64(second.Timings.CacheN) {
		t.Errorf("prompt tokens %d cached %d, want %d and %d", st.PromptTokens, st.PromptCached, first.Timings.PromptN+second.Timings.PromptN, second.Timings.CacheN)
	}
	if st.PredictedTokens != 16 || st.PredictedSteps != 14 || st.Generations != 2 {
		t.Errorf("predicted %d tokens in %d steps over %d generations, want 16, 14, 2", st.PredictedTokens, st.PredictedSteps, st.Generations)
	}
	// The second request would discard most of the first's cache, so that went to the prompt
	// cache (llama-server's rule) and keeps its page; the slot copied the shared part of it.
	if st.Processing != 0 || st.Deferred != 0 || st.KVCapacity != 1024 || st.KVTokens != (first.TokensCached+15)/16*16+(second.TokensCached+15)/16*16 {
		t.Errorf("gauges: processing %d deferred %d kv rows %d/%d (whole 16-row pages of the slot and the prompt cache)", st.Processing, st.Deferred, st.KVTokens, st.KVCapacity)
	}
	if st.Decodes == 0 || st.BusySlots != st.Decodes || st.TokensMax != uint64(first.TokensCached) {
		t.Errorf("decodes %d busy %d tokens max %d (want %d)", st.Decodes, st.BusySlots, st.TokensMax, first.TokensCached)
	}
}

// TestSlotFileFormat: a slot file is llama.cpp's sequence state file with llama-server's packed
// token payload (-1, version 1, n_tokens, tokens, no media); the plain token list that older
// servers wrote in its place restores too, and its cache is reused.
func TestSlotFileFormat(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	ctx := context.Background()
	dir := t.TempDir()
	prompt := e.Tokenizer().Encode("Once upon a time, there was a little dog", true, true)
	run(t, e, prompt, greedy(8))
	path := filepath.Join(dir, "packed.bin")
	saved, err := e.SaveSlot(ctx, 0, path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	word := func(i int) int32 { return int32(binary.LittleEndian.Uint32(data[4*i:])) }
	n := saved.Tokens
	if word(0) != 0x67677371 || word(1) != 2 || int(word(2)) != n+4 || word(3) != -1 || word(4) != 1 || int(word(5)) != n || word(6+n) != 0 {
		t.Fatalf("header %v, want magic ggsq, version 2, %d payload words: -1, 1, %d, tokens, 0", []int32{word(0), word(1), word(2), word(3), word(4), word(5), word(6 + n)}, n+4, n)
	}
	for i, id := range prompt {
		if word(6+i) != id {
			t.Fatalf("token %d is %d, want %d", i, word(6+i), id)
		}
	}
	if streams, cells := word(7+n), word(8+n); streams != 1 || int(cells) != n {
		t.Errorf("%d streams, %d cells; want 1 and %d", streams, cells, n)
	}

	// The plain token list in place of the packed payload, as the suite's legacy test writes it.
	legacy := append([]byte(nil), data[:12]...)
	binary.LittleEndian.PutUint32(legacy[8:], uint32(n))
	legacy = append(legacy, data[4*6:4*(6+n)]...)
	legacy = append(legacy, data[4*(7+n):]...)
	legacyPath := filepath.Join(dir, "legacy.bin")
	if err := os.WriteFile(legacyPath, legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.EraseSlot(ctx, 0); err != nil {
		t.Fatal(err)
	}
	restored, err := e.RestoreSlot(ctx, 0, legacyPath)
	if err != nil || restored.Tokens != n {
		t.Fatalf("legacy restore: %d tokens, %v; want %d", restored.Tokens, err, n)
	}
	if _, final := run(t, e, prompt, greedy(2)); final.Timings.CacheN != len(prompt)-1 {
		t.Errorf("after the legacy restore cache_n %d, want %d", final.Timings.CacheN, len(prompt)-1)
	}
}
