package gguf

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// realModels lists every .gguf under the shared models directory, recursively.
func realModels(t *testing.T) []string {
	t.Helper()
	root := shareddata.Path(t, "models")
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".gguf") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no .gguf files under %s", root)
	}
	return paths
}

func TestRealFiles(t *testing.T) {
	for _, p := range realModels(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Version < 2 || f.Version > 3 {
				t.Errorf("version %d", f.Version)
			}
			if len(f.KV) == 0 {
				t.Error("no metadata")
			}
			if _, ok := f.String("general.architecture"); !ok {
				t.Error("no general.architecture")
			}
			// LoRA adapters ("adapter") and vision projectors ("mmproj") carry no vocabulary.
			if typ, _ := f.String("general.type"); typ == "" || typ == "model" {
				if _, ok := f.Strings("tokenizer.ggml.tokens"); !ok {
					t.Error("no tokenizer.ggml.tokens")
				}
			}
			var total uint64
			for i := range f.Tensors {
				tt := &f.Tensors[i]
				if d := f.TensorData(tt); uint64(len(d)) != tt.Size {
					t.Errorf("%s: %d bytes, want %d", tt.Name, len(d), tt.Size)
				}
				total += tt.Size
			}
			if total > f.FileSize-f.DataOffset {
				t.Errorf("tensor bytes %d exceed data section %d", total, f.FileSize-f.DataOffset)
			}
		})
	}
}

func TestStories260K(t *testing.T) {
	f, err := Open(shareddata.Path(t, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if a := f.Architecture(); a != "llama" {
		t.Errorf("arch %q", a)
	}
	if len(f.Tensors) != 48 {
		t.Errorf("%d tensors, want 48", len(f.Tensors))
	}
	for _, tt := range f.Tensors {
		if tt.Type != TypeF32 {
			t.Errorf("%s: type %s, want F32", tt.Name, tt.Type)
		}
	}
	for key, want := range map[string]uint64{
		"llama.embedding_length": 64, "llama.block_count": 5, "llama.feed_forward_length": 172,
		"llama.attention.head_count": 8, "llama.attention.head_count_kv": 4, "llama.context_length": 2048,
		"tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
	} {
		if got, ok := f.Uint(key); !ok || got != want {
			t.Errorf("%s = %d, %v; want %d", key, got, ok, want)
		}
	}
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) != 512 || tokens[1] != "<s>" {
		t.Errorf("tokens: %d, ok=%v", len(tokens), ok)
	}
	if scores, ok := f.Float32s("tokenizer.ggml.scores"); !ok || len(scores) != 512 {
		t.Errorf("scores: %d, %v", len(scores), ok)
	}
	if tt, ok := f.Int32s("tokenizer.ggml.token_type"); !ok || len(tt) != 512 {
		t.Errorf("token_type: %d, %v", len(tt), ok)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || emb.Shape[0] != 64 || emb.Shape[1] != 512 || emb.Size != 64*512*4 {
		t.Errorf("token_embd.weight = %+v", emb)
	}
	if f.FileSize != 1185376 {
		t.Errorf("FileSize = %d", f.FileSize)
	}
}

func TestLlama2TinyRandom(t *testing.T) {
	f, err := Open(shareddata.Path(t, "models", "llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	count := map[GGMLType]int{}
	for _, tt := range f.Tensors {
		count[tt.Type]++
	}
	if count[TypeF16] != 9 || count[TypeF32] != 3 || len(f.Tensors) != 12 {
		t.Errorf("types %v", count)
	}
	if tokens, _ := f.Strings("tokenizer.ggml.tokens"); len(tokens) != 32000 {
		t.Errorf("%d tokens", len(tokens))
	}
	if n, _ := f.String("general.name"); n != "LLaMA v2" {
		t.Errorf("general.name %q", n)
	}
}

func TestQuantFileTypes(t *testing.T) {
	f, err := Open(shareddata.Path(t, "models", "quant", "stories260K-Q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	count := map[GGMLType]int{}
	for _, tt := range f.Tensors {
		count[tt.Type]++
	}
	want := map[GGMLType]int{TypeQ4_0: 31, TypeQ8_0: 1, TypeF16: 5, TypeF32: 11}
	for k, v := range want {
		if count[k] != v {
			t.Errorf("%s: %d tensors, want %d (all: %v)", k, count[k], v, count)
		}
	}
}

// TestRealTruncated cuts a real file at every length through its header and tensor infos.
func TestRealTruncated(t *testing.T) {
	p := shareddata.Path(t, "models", "stories260K.gguf")
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	full := f.data
	cuts := int(f.DataOffset) + 1
	if testing.Short() {
		cuts = 2000
	}
	for n := 0; n < cuts; n++ {
		if _, err := Parse(full[:n:n]); !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
	for _, n := range []uint64{f.DataOffset + 1, f.FileSize / 2, f.FileSize - 1} {
		if _, err := Parse(full[:n:n]); !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
}
