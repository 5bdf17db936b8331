package router

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestScanSources checks every source and the precedence of presets: a models-dir file and
// a subfolder (its projector left out), a cache entry, a preset section overriding a model
// found before and one adding a model, with [*] under each model's own options.
func TestScanSources(t *testing.T) {
	dir := t.TempDir()
	models := filepath.Join(dir, "models")
	writeFile(t, filepath.Join(models, "alpha.gguf"), "x")
	writeFile(t, filepath.Join(models, "vision", "mmproj-vision-f16.gguf"), "x")
	writeFile(t, filepath.Join(models, "vision", "vision-Q8_0.gguf"), "x")
	writeFile(t, filepath.Join(models, "notes.txt"), "x")
	cache := filepath.Join(dir, "cache")
	rev := strings.Repeat("ab", 20)
	writeFile(t, filepath.Join(cache, "models--org--repo", "refs", "main"), rev)
	writeFile(t, filepath.Join(cache, "models--org--repo", "snapshots", rev, "repo-Q4_K_M.gguf"), "x")
	writeFile(t, filepath.Join(cache, "models--org--repo", "snapshots", rev, "mmproj-repo-f16.gguf"), "x")
	preset := filepath.Join(dir, "presets.ini")
	writeFile(t, preset, "version = 1\n; a comment\n[*]\nctx-size = 512\ntemp = 0.5\n\n[alpha]\nctx-size = 1024\nlora-scaled = style.gguf:0.5\nload-on-startup = true\nstop-timeout = 3\n\n[custom]\n--hf-repo = org/other:Q8_0\n")

	got, err := Catalog{CacheDir: cache, ModelsDir: models, PresetFile: preset}.Scan()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		source string
		args   []string
	}{
		"alpha":           {SourcePreset, []string{"--ctx-size=1024", "--lora-scaled=style.gguf:0.5", "--model=" + filepath.Join(models, "alpha.gguf"), "--temp=0.5"}},
		"vision":          {SourceModelsDir, []string{"--ctx-size=512", "--mmproj=" + filepath.Join(models, "vision", "mmproj-vision-f16.gguf"), "--model=" + filepath.Join(models, "vision", "vision-Q8_0.gguf"), "--temp=0.5"}},
		"org/repo:Q4_K_M": {SourceCache, []string{"--ctx-size=512", "--hf-repo=org/repo:Q4_K_M", "--temp=0.5"}},
		"custom":          {SourcePreset, []string{"--ctx-size=512", "--hf-repo=org/other:Q8_0", "--temp=0.5"}},
	}
	if len(got) != len(want) {
		t.Fatalf("models %v, want %d", keys(got), len(want))
	}
	for name, w := range want {
		m := got[name]
		if m == nil {
			t.Fatalf("no model %q in %v", name, keys(got))
		}
		if m.Source != w.source || !reflect.DeepEqual(m.Args(), w.args) {
			t.Errorf("%s: source %s args %q, want %s %q", name, m.Source, m.Args(), w.source, w.args)
		}
	}
	if !got["alpha"].LoadOnStartup() || got["alpha"].StopTimeout() != 3*time.Second {
		t.Errorf("alpha: load-on-startup %v stop-timeout %v", got["alpha"].LoadOnStartup(), got["alpha"].StopTimeout())
	}
	if got["vision"].LoadOnStartup() || got["vision"].StopTimeout() != defaultStopTimeout {
		t.Errorf("vision: load-on-startup %v stop-timeout %v", got["vision"].LoadOnStartup(), got["vision"].StopTimeout())
	}
}

func keys(m map[string]*Model) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestReadPresetErrors checks that a bad preset says which line is wrong.
func TestReadPresetErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ text, want string }{
		{"version = 2\n", ":1: unsupported version 2"},
		{"[*]\nctx-size\n", ":2: expected key = value"},
		{"[]\n", ":1: bad section header"},
	} {
		p := filepath.Join(dir, "p.ini")
		writeFile(t, p, c.text)
		if _, err := ReadPreset(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
}
