package cli

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// --lora and --lora-scaled, repeated or comma-separated, number the adapters in the order
// given; --lora-init-without-apply is passed on; a scale that is not a number is refused.
func TestLoraFlags(t *testing.T) {
	f, err := parseServeFlags([]string{"--lora", "a.gguf,b.gguf", "--lora-scaled", "c.gguf:0.5,/x:y/d.gguf:-1", "--lora=e.gguf", "--lora-init-without-apply"}, io.Discard, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(f.lora.specs); got != "[{a.gguf 1} {b.gguf 1} {c.gguf 0.5} {/x:y/d.gguf -1} {e.gguf 1}]" || !f.lora.initEmpty {
		t.Errorf("specs %s, init without apply %v", got, f.lora.initEmpty)
	}
	for _, bad := range []string{"c.gguf", "c.gguf:half", "c.gguf:NaN"} {
		if _, err := parseServeFlags([]string{"--lora-scaled", bad}, io.Discard, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("--lora-scaled %s: %v", bad, err)
		}
	}
}
