package engine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
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
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)/2] ^= 0xff
	otherModel := append([]byte(nil), data...)
	copy(otherModel[16:], "arch=qwen2") // the identity text starts after magic, version and length
	binary.LittleEndian.PutUint32(otherModel[len(otherModel)-4:], crc32.ChecksumIEEE(otherModel[:len(otherModel)-4]))
	for name, p := range map[string]string{
		"missing":   filepath.Join(dir, "missing.bin"),
		"truncated": write("truncated.bin", data[:16]),
		"damaged":   write("damaged.bin", flipped),
		"garbage":   write("garbage.bin", []byte("not a slot file at all")),
		"other":     write("other.bin", otherModel),
	} {
		_, err := e.RestoreSlot(ctx, 0, p)
		if !errors.Is(err, engine.ErrSlotFile) {
			t.Errorf("%s: restore error %v, want ErrSlotFile", name, err)
		}
		if name == "other" && (err == nil || !strings.Contains(err.Error(), "saved from another model (arch=qwen2")) {
			t.Errorf("restore from another model: %v", err)
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
	if st.Processing != 0 || st.Deferred != 0 || st.KVCapacity != 1024 || st.KVTokens != (second.TokensCached+15)/16*16 {
		t.Errorf("gauges: processing %d deferred %d kv rows %d/%d (whole 16-row pages)", st.Processing, st.Deferred, st.KVTokens, st.KVCapacity)
	}
	if st.Decodes == 0 || st.BusySlots != st.Decodes || st.TokensMax != uint64(first.TokensCached) {
		t.Errorf("decodes %d busy %d tokens max %d (want %d)", st.Decodes, st.BusySlots, st.TokensMax, first.TokensCached)
	}
}
