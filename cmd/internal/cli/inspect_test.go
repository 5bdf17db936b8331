package cli

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// tinyGGUF hand-encodes a v3 file with a few metadata values and one F32 tensor [2, 3].
func tinyGGUF() []byte {
	le := binary.LittleEndian
	var b []byte
	str := func(s string) { b = le.AppendUint64(b, uint64(len(s))); b = append(b, s...) }
	b = append(b, "GGUF"...)
	b = le.AppendUint32(b, 3)
	b = le.AppendUint64(b, 1) // tensors
	b = le.AppendUint64(b, 4) // kvs
	str("general.architecture")
	b = le.AppendUint32(b, uint32(gguf.TypeString))
	str("tiny")
	str("tiny.block_count")
	b = le.AppendUint32(b, uint32(gguf.TypeUint32))
	b = le.AppendUint32(b, 7)
	str("tokenizer.chat_template")
	b = le.AppendUint32(b, uint32(gguf.TypeString))
	str(strings.Repeat("{% for m in messages %}", 20))
	str("tokenizer.ggml.tokens")
	b = le.AppendUint32(b, uint32(gguf.TypeArray))
	b = le.AppendUint32(b, uint32(gguf.TypeString))
	b = le.AppendUint64(b, 10)
	for _, s := range []string{"<unk>", "<s>", "</s>", "a", "b", "c", "d", "e", "f", "g"} {
		str(s)
	}
	str("w.weight")
	b = le.AppendUint32(b, 2)
	b = le.AppendUint64(b, 2)
	b = le.AppendUint64(b, 3)
	b = le.AppendUint32(b, uint32(gguf.TypeF32))
	b = le.AppendUint64(b, 0)
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	return append(b, make([]byte, 24)...)
}

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func inspect(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runInspect(args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestInspectSynthetic(t *testing.T) {
	p := writeTemp(t, "tiny.gguf", tinyGGUF())
	out, _, err := inspect(t, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"file:        " + p,
		"version:     3",
		"alignment:   32",
		"tensors:     1",
		`general.architecture     string`,
		`"tiny"`,
		"tiny.block_count         uint32",
		`[arr string x 10]  ["<unk>", "<s>", "</s>", ...]`,
		`"{% for m in messages %}{% for m in messages %}{% for m in messages %}{% for m in"... (460 bytes)`,
		"w.weight",
		"[2, 3]",
		"F32",
		"total: 1 tensors, 6 parameters, 24 bytes (24 B)",
		// The model registry's word on the file: the list comes from it.
		`model:       does not run here: architecture "tiny" not supported (supported: bert, gemma2, gemma3, gemma4, gpt-oss, llama, phi3, qwen2, qwen2moe, qwen2vl, qwen3, qwen35, qwen35moe, qwen3moe)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Flags may follow the file name.
	out, _, err = inspect(t, p, "--no-tensors")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "w.weight") || !strings.Contains(out, "total: 1 tensors") {
		t.Errorf("--no-tensors output:\n%s", out)
	}
}

func TestInspectRealModels(t *testing.T) {
	root := shareddata.Path(t, "models")
	var paths []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".gguf") {
			paths = append(paths, p)
		}
		return err
	})
	if len(paths) == 0 {
		t.Fatalf("no .gguf under %s", root)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			out, _, err := inspect(t, p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			wants := []string{"file:        " + p, "general.architecture", "total: "}
			// LoRA adapters ("adapter") and vision projectors ("mmproj") carry no vocabulary.
			if typ, _ := f.String("general.type"); typ == "" || typ == "model" {
				wants = append(wants, "tokenizer.ggml.tokens")
			}
			for _, tt := range f.Tensors {
				wants = append(wants, tt.Name)
			}
			for _, want := range wants {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q", want)
				}
			}
		})
	}
}

func TestInspectStories(t *testing.T) {
	out, _, err := inspect(t, shareddata.Path(t, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`[arr string x 512]`,
		`["<unk>", "<s>", "</s>", ...]`,
		"llama.embedding_length",
		"token_embd.weight",
		"[64, 512]",
		"total: 48 tensors",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestInspectErrors(t *testing.T) {
	full := tinyGGUF()
	truncated := writeTemp(t, "trunc.gguf", full[:len(full)-30])
	_, _, err := inspect(t, truncated)
	if err == nil || !strings.Contains(err.Error(), truncated) || !errors.Is(err, gguf.ErrTruncated) {
		t.Errorf("truncated file: %v", err)
	}
	if p := shareddata.Dir(); p != "" {
		real, err := os.ReadFile(filepath.Join(p, "models", "stories260K.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		cut := writeTemp(t, "cut.gguf", real[:5000])
		if _, _, err := inspect(t, cut); err == nil || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), cut) {
			t.Errorf("cut real file: %v", err)
		}
	}

	bad := append([]byte("GGML"), full[4:]...)
	badMagic := writeTemp(t, "bad.gguf", bad)
	_, _, err = inspect(t, badMagic)
	if err == nil || !strings.Contains(err.Error(), badMagic) || !strings.Contains(err.Error(), "bad magic") {
		t.Errorf("bad magic: %v", err)
	}

	missing := filepath.Join(t.TempDir(), "missing.gguf")
	if _, _, err := inspect(t, missing); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}

	for _, args := range [][]string{nil, {"a.gguf", "b.gguf"}} {
		_, stderr, err := inspect(t, args...)
		if err == nil || !strings.Contains(stderr, "usage: wgpu-llama inspect") {
			t.Errorf("args %q: err %v, stderr %q", args, err, stderr)
		}
	}
	if _, _, err := inspect(t, "--bogus", "x.gguf"); err == nil {
		t.Error("unknown flag accepted")
	}
	if _, _, err := inspect(t, "-h"); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

func TestFormatHelpers(t *testing.T) {
	if got := humanBytes(1185376); got != "1.13 MiB" {
		t.Errorf("humanBytes = %q", got)
	}
	if got := quoteTrunc("héllo wörld", 6); got != `"héllo"... (13 bytes)` {
		t.Errorf("quoteTrunc = %q", got)
	}
	if got := quoteTrunc("héllo", 2); got != `"h"... (6 bytes)` { // never splits a rune
		t.Errorf("quoteTrunc = %q", got)
	}
	nested := gguf.Array{Elem: gguf.TypeArray, Values: []gguf.Array{
		{Elem: gguf.TypeInt32, Values: []int32{1, 2}},
		{Elem: gguf.TypeFloat32, Values: []float32{0.5}},
	}}
	if got := formatValue(nested); got != "[[1, 2], [0.5]]" {
		t.Errorf("nested = %q", got)
	}
	if got := formatValue(float32(0.1)); got != "0.1" {
		t.Errorf("float32 = %q", got)
	}
}

// TestInspectModelLine checks the registry's line for a dense, a Mixture-of-Experts and a hybrid
// recurrent file.
func TestInspectModelLine(t *testing.T) {
	for file, want := range map[string]string{
		"stories260K.gguf":       "model:       llama, 5 layers, n_embd 64, 8 heads (4 KV) of 8, n_ff 172\n",
		"moe/qwen3moe-F32.gguf":  "model:       qwen3moe, 4 layers, n_embd 128, 4 heads (2 KV) of 32, 8 experts (2 used) of 64\n",
		"hybrid/qwen35-F32.gguf": "model:       qwen35, 8 layers, n_embd 128, 4 heads (2 KV) of 32 (6 recurrent layers: 4 value heads of 32, 2 key heads, conv 4), n_ff 256\n",
	} {
		out, _, err := inspect(t, shareddata.Path(t, "models", file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s: output lacks %q:\n%s", file, want, out[:min(len(out), 600)])
		}
	}
}
