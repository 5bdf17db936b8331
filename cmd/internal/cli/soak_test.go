package cli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/soak"
)

// TestSoakFlags checks soak's flags and their defaults.
func TestSoakFlags(t *testing.T) {
	env := func(k string) string { return map[string]string{"LLAMA_API_KEY": "from-env"}[k] }
	f, err := parseSoakFlags(nil, io.Discard, env)
	if err != nil {
		t.Fatal(err)
	}
	c := f.cfg
	if c.URL != "http://127.0.0.1:8080" || c.Streams != 64 || c.Duration != 10*time.Minute || c.Seed != 0 || c.APIKey != "from-env" || f.json {
		t.Errorf("defaults: %+v json=%v", c, f.json)
	}
	f, err = parseSoakFlags([]string{"--url", "http://h:1", "--api-key", "k", "--streams", "3", "--duration", "20s",
		"--seed", "7", "--json", "--max-tokens", "8", "--overload-every", "-1s"}, io.Discard, env)
	if err != nil {
		t.Fatal(err)
	}
	c = f.cfg
	if c.URL != "http://h:1" || c.APIKey != "k" || c.Streams != 3 || c.Duration != 20*time.Second || c.Seed != 7 || !f.json ||
		c.MaxTokens != 8 || c.OverloadEvery != -time.Second {
		t.Errorf("parsed: %+v json=%v", c, f.json)
	}
	for _, bad := range [][]string{{"--streams", "0"}, {"--duration", "0s"}, {"extra"}, {"--nope"}} {
		if _, err := parseSoakFlags(bad, io.Discard, env); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestSoakEndToEnd soaks a real server (stories260K, two slots, a small queue) for a few
// seconds with eight streams and checks that every kind ran, nothing failed, the reattached
// streams continued exactly, and the only shedding was the soak's own overload bursts.
func TestSoakEndToEnd(t *testing.T) {
	model := shareddata.Path(t, "models", "stories260K.gguf")
	requireGPU(t)
	// Room for the eight streams (and the cut streams the server is still letting go of),
	// so that only the bursts overflow the queue.
	srv := startServer(t, "-m", model, "-np", "2", "--max-queue", "12", "--metrics", "--embeddings", "--pooling", "mean")
	srv.waitReady(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := soak.Run(ctx, soak.Config{URL: srv.base, Streams: 8, Duration: 4 * time.Second, Seed: 42,
		MaxTokens: 16, OverloadEvery: time.Second, IdleWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", table.String())

	for kind, ks := range rep.Kinds {
		if ks.Skipped != "" || ks.Requests == 0 {
			t.Errorf("%s did not run: %+v", kind, ks)
		}
	}
	if rep.ErrorCount != 0 {
		for k, e := range rep.Errors {
			t.Errorf("error %s ×%d: %s", k, e.Count, e.First)
		}
	}
	if rep.ReattachPassed == 0 || rep.ReattachFailed != 0 {
		t.Errorf("reattach: %d passed, %d failed", rep.ReattachPassed, rep.ReattachFailed)
	}
	var shed int64
	for _, ks := range rep.Kinds {
		shed += ks.Shed
	}
	if rep.OverloadBursts == 0 || rep.Kinds[soak.KindOverload].Shed == 0 || shed != rep.ShedProvoked {
		t.Errorf("shedding: %d bursts, %d overload requests shed, %d shed in all, %d provoked",
			rep.OverloadBursts, rep.Kinds[soak.KindOverload].Shed, shed, rep.ShedProvoked)
	}
	if rep.ServerShed != nil && int64(*rep.ServerShed) != shed {
		t.Errorf("the server counted %g shed, the soak %d", *rep.ServerShed, shed)
	}
	if len(rep.SlotsBusy) != 0 || rep.Slots != 2 {
		t.Errorf("slots at the end: %d, busy %v", rep.Slots, rep.SlotsBusy)
	}
	if rep.CompletionTokens == 0 || rep.TTFT.Count == 0 || rep.InterToken.Count == 0 {
		t.Errorf("tokens %d, ttft %+v, inter-token %+v", rep.CompletionTokens, rep.TTFT, rep.InterToken)
	}
	for _, row := range []string{"verdict", "chat-stream", "completion", "v1-completions", "embeddings", "cancel", "drop",
		"reattach", "tools", "overload", "ttft ms", "inter-token ms", "rss", "goroutines", "kv cache tokens", "slots at end", "leaks"} {
		if !strings.Contains(table.String(), "\n"+row+" ") {
			t.Errorf("the table lacks the row %q", row)
		}
	}
}
