package server

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// The fake backend's slots and statistics: two slots (slot 0 has run a task), slot files
// holding just the token count, and statistics derived from the tasks submitted.

var (
	_ SlotBackend  = (*fakeBackend)(nil)
	_ StatsBackend = (*fakeBackend)(nil)
)

func (f *fakeBackend) slotCheck(id int) error {
	if id < 0 || id >= f.info.NSlots {
		return engine.ErrInvalidSlot
	}
	return nil
}

func (f *fakeBackend) Slots(context.Context) ([]engine.SlotInfo, error) {
	p := engine.DefaultParams()
	p.NPredict = 16
	task := &engine.SlotTask{ID: 7, Params: p, Stream: true, NPromptTokens: 20, NRemain: -1}
	if f.slotsBusy {
		task.NPromptProcessed, task.NPromptCached, task.HasNextToken, task.NRemain, task.NDecoded = 12, 4, true, 10, 6
	}
	return []engine.SlotInfo{
		{ID: 0, NCtx: f.info.NCtx, Processing: f.slotsBusy, Task: task},
		{ID: 1, NCtx: f.info.NCtx, Processing: f.slotsBusy},
	}, nil
}

func (f *fakeBackend) SaveSlot(_ context.Context, id int, path string) (engine.SlotFile, error) {
	if err := f.slotCheck(id); err != nil {
		return engine.SlotFile{}, err
	}
	data := []byte(strconv.Itoa(20))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return engine.SlotFile{}, err
	}
	return engine.SlotFile{Tokens: 20, Bytes: int64(len(data)), Took: 1500 * time.Microsecond}, nil
}

func (f *fakeBackend) RestoreSlot(_ context.Context, id int, path string) (engine.SlotFile, error) {
	if err := f.slotCheck(id); err != nil {
		return engine.SlotFile{}, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return engine.SlotFile{}, engine.ErrSlotFile
	}
	n, err := strconv.Atoi(string(data))
	if err != nil {
		return engine.SlotFile{}, engine.ErrSlotFile
	}
	return engine.SlotFile{Tokens: n, Bytes: int64(len(data)), Took: time.Millisecond}, nil
}

func (f *fakeBackend) EraseSlot(_ context.Context, id int) (int, error) {
	if err := f.slotCheck(id); err != nil {
		return 0, err
	}
	return 20, nil
}

func (f *fakeBackend) Stats() engine.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := engine.Stats{Start: time.Unix(1700000000, 0), KVCapacity: f.info.NCtx * f.info.NSlots}
	for _, t := range f.tasks {
		st.PromptTokens += uint64(len(t.Prompt))
		st.PromptTime += time.Duration(len(t.Prompt)) * time.Millisecond
		st.Generations++
	}
	return st
}
