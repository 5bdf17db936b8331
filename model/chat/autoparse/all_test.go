package autoparse_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestAnalyzeAllTemplates analyses every template llama.cpp's tests and the reference
// renderings use: none may panic or hit an internal error, and each result is logged.
func TestAnalyzeAllTemplates(t *testing.T) {
	var paths []string
	for _, dir := range [][]string{
		{"llama-server-tests", "upstream", "models", "templates"},
		{"reference", "chat-templates"},
	} {
		m, err := filepath.Glob(filepath.Join(shareddata.Path(t, dir...), "*.jinja"))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	if len(paths) < 69 {
		t.Fatalf("found %d templates, want at least 69", len(paths))
	}
	for _, p := range paths {
		name := filepath.Base(filepath.Dir(p)) + "/" + strings.TrimSuffix(filepath.Base(p), ".jinja")
		t.Run(name, func(t *testing.T) {
			a, err := analyzeFile(t, p, nil)
			if err != nil {
				if strings.Contains(err.Error(), "internal error") {
					t.Fatalf("%s: %v", name, err)
				}
				t.Logf("| %s | error: %v |", name, err)
				return
			}
			t.Logf("| %s | %s |", name, summary(a))
		})
	}
}
