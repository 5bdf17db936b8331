package hf

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestListCache lists one entry per quant of each cached repository, split models by their
// first part and no projectors, and removes a repository.
func TestListCache(t *testing.T) {
	cache := t.TempDir()
	rev := strings.Repeat("cd", 20)
	repo := filepath.Join(cache, "models--org--model")
	for _, f := range []string{"refs/main", "snapshots/" + rev + "/model-Q4_K_M.gguf", "snapshots/" + rev + "/model-Q8_0-00001-of-00002.gguf",
		"snapshots/" + rev + "/model-Q8_0-00002-of-00002.gguf", "snapshots/" + rev + "/mmproj-model-f16.gguf", "snapshots/" + rev + "/plain.gguf"} {
		p := filepath.Join(repo, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		data := "x"
		if f == "refs/main" {
			data = rev
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(cache, "models--org--empty"), 0o755) // no refs: not a model
	got, err := ListCache(cache)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID())
	}
	want := []string{"org/model:Q4_K_M", "org/model:Q8_0", "org/model"}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("ids %q, want %q", ids, want)
	}
	if got[1].Path != filepath.Join(repo, "snapshots", rev, "model-Q8_0-00001-of-00002.gguf") {
		t.Errorf("split model path %s", got[1].Path)
	}
	if ok, err := RemoveFromCache(cache, "org/model"); !ok || err != nil {
		t.Fatalf("remove: %v %v", ok, err)
	}
	if ok, err := RemoveFromCache(cache, "org/model"); ok || err != nil {
		t.Errorf("second remove: %v %v", ok, err)
	}
	if got, _ := ListCache(cache); len(got) != 0 {
		t.Errorf("after remove: %v", got)
	}
}
