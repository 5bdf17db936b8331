package engine_test

import (
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// loraEngine serves stories260K with the reference's adapters A (id 0) and B (id 1), logging
// its passes.
func loraEngine(t *testing.T, slots int) (*engine.Engine, *enginetest.LogBuffer) {
	dir := shareddata.Path(t, "models", "lora")
	logs := &enginetest.LogBuffer{}
	e := enginetest.LoadConfig(t, engine.Config{
		ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 512, Slots: slots,
		Lora:   []engine.LoraSpec{{Path: dir + "/stories260K-lora-A-F32.gguf", Scale: 1}, {Path: dir + "/stories260K-lora-B-F32.gguf", Scale: 1}},
		Logger: log.NewWithOptions(logs, log.Options{Level: log.DebugLevel}),
	})
	return e, logs
}

// The reference's greedy continuations of "Once upon a time", as text.
const (
	loraBase = " Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
	loraA1   = " Once upon a time, there was a big boy named Timmy. Timmy loved to play with his toys. One day, he found a big b"
	loraA05  = " Once upon a time, there was a little girl named Lily. She loved to play with her toys and dreams. One day, she f"
	loraAB   = " Once upon a time, there was a big boy named Tim. Tim was very cold and loved to play with his friends. One day, he f"
)

func story(t *testing.T, e *engine.Engine, scales []float32, cache bool) string {
	t.Helper()
	p := greedy(32)
	p.Lora, p.SkipPromptCache = scales, !cache
	text, _ := generate(t, e, "Once upon a time", p)
	return " Once upon a time" + text
}

// Scales per request and the global ones give llama.cpp's text; a changed adapter set never
// reuses the rows cached under another (the reference's STALE steps give the clean answers).
func TestLoraScales(t *testing.T) {
	e, _ := loraEngine(t, 1)
	if a := e.Adapters(); len(a) != 2 || a[0].Scale != 1 || a[1].Scale != 1 || !strings.HasSuffix(a[1].Path, "lora-B-F32.gguf") {
		t.Fatalf("adapters %+v", a)
	}
	for _, c := range []struct {
		name   string
		scales []float32
		want   string
	}{
		{"global A+B", nil, loraAB}, {"A", []float32{1}, loraA1}, {"A x0.5", []float32{0.5, 0}, loraA05},
		{"none", []float32{0, 0}, loraBase}, {"empty", []float32{}, loraBase}, {"A+B cached", []float32{1, 1}, loraAB},
	} {
		// each after another set in the one slot: a prefix cached under the other must not count
		if got := story(t, e, c.scales, true); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	e.SetAdapterScales(map[int]float32{0: 0.5, 7: 1})
	if a := e.Adapters(); a[0].Scale != 0.5 || a[1].Scale != 0 {
		t.Errorf("after setting: %+v", a)
	}
	if got := story(t, e, nil, true); got != loraA05 {
		t.Errorf("global A x0.5 after A+B in the cache: %q", got)
	}
}

// Two requests with different scales give their solo answers and never share a pass; two
// with equal scales share passes.
func TestLoraBatching(t *testing.T) {
	e, logs := loraEngine(t, 2)
	pass := regexp.MustCompile(`forward pass slots="?\[([0-9 ]*)\]"? tokens=\d+ lora=(\S*)`)
	run := func(a, b []float32) (string, string, [][]string) {
		start := len(logs.String())
		var wg sync.WaitGroup
		texts := make([]string, 2)
		for i, sc := range [][]float32{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				texts[i] = story(t, e, sc, false)
			}()
		}
		wg.Wait()
		return texts[0], texts[1], pass.FindAllStringSubmatch(logs.String()[start:], -1)
	}
	x, y, passes := run([]float32{0.5, 0}, []float32{1, 0})
	if x != loraA05 || y != loraA1 {
		t.Errorf("A x0.5 and A x1 at once:\n%q\n%q", x, y)
	}
	for _, p := range passes {
		if strings.Contains(p[1], " ") {
			t.Fatalf("a pass mixed the two sets: %v", p)
		}
	}
	if len(passes) < 64 {
		t.Errorf("%d passes for two requests of 32 tokens run apart", len(passes))
	}
	x, y, passes = run([]float32{0.5, 0}, []float32{0.5, 0})
	if x != loraA05 || y != loraA05 {
		t.Errorf("A x0.5 twice at once:\n%q\n%q", x, y)
	}
	shared := 0
	for _, p := range passes {
		if strings.Contains(p[1], " ") {
			shared++
		}
	}
	if shared < 16 {
		t.Errorf("equal sets shared %d of %d passes: %v", shared, len(passes), passes)
	}

}
