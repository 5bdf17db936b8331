package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

func TestQuantizeMatchesLlamaQuantize(t *testing.T) {
	in := shareddata.Path(t, "models", "quant", "synth256-F32.gguf")
	ref := shareddata.Path(t, "models", "quant", "synth256-Q4_K_M.gguf")
	out := filepath.Join(t.TempDir(), "out.gguf")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"quantize", in, out, "q4_k_m"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("output differs from llama-quantize's synth256-Q4_K_M.gguf")
	}
	text := stdout.String()
	for _, s := range []string{
		"[ 1/21] output.weight", "converting to Q6_K .. size =     0.50 MiB ->     0.10 MiB",
		"[17/21] blk.1.attn_v.weight", "[ 2/21] output_norm.weight", "size =    0.001 MiB",
		"model size  =     7.00 MiB (32.00 BPW)", "quant size  =     1.08 MiB (4.92 BPW)",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("stdout lacks %q:\n%s", s, text)
		}
	}
}

func TestQuantizeFallbacksAndDryRun(t *testing.T) {
	in := shareddata.Path(t, "models", "stories260K.gguf")
	out := filepath.Join(t.TempDir(), "out.gguf")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"quantize", "--dry-run", in, "Q4_K_M"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	text := stdout.String()
	for _, s := range []string{
		"blk.0.ffn_down.weight", "converting to F16", "must use F16 due to unusual shape",
		"converting to Q5_0", "(fallback: ncols 64 not divisible by 256 (required for type Q4_K), falling back to Q5_0)",
		"WARNING: 36 of 48 tensor(s) required fallback quantization",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("dry run output lacks %q:\n%s", s, text)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dry run wrote %s", out)
	}

	// Q8_0 needs an F16 fallback for ffn_down (172 columns), which llama-quantize only does
	// with --tensor-type ffn_down=f16; the result is that file.
	stdout.Reset()
	if err := run(context.Background(), []string{"quantize", in, out, "Q8_0"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, ti := range f.Tensors {
		want := gguf.TypeQ8_0
		switch {
		case len(ti.Shape) == 1:
			want = gguf.TypeF32
		case strings.Contains(ti.Name, "ffn_down"):
			want = gguf.TypeF16
		}
		if ti.Type != want {
			t.Errorf("%s: %s, want %s", ti.Name, ti.Type, want)
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	dir := t.TempDir()
	// A model with a tensor type that cannot be dequantized.
	iq := filepath.Join(dir, "iq.gguf")
	err := gguf.WriteFile(iq, []gguf.KV{{Key: "general.architecture", Type: gguf.TypeString, Value: "llama"}},
		[]gguf.TensorData{{Name: "blk.0.attn_q.weight", Shape: []uint64{256, 2}, Type: gguf.TypeTQ2_0,
			Data: make([]byte, 2*gguf.TypeTQ2_0.TypeSize())}})
	if err != nil {
		t.Fatal(err)
	}
	f32 := filepath.Join(dir, "f32.gguf")
	if err := gguf.WriteFile(f32, nil, []gguf.TensorData{{Name: "w.weight", Shape: []uint64{32, 2}, Type: gguf.TypeF32,
		Data: make([]byte, 256)}}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.gguf")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{f32, out, "Q9_9"}, `unknown quantization type "Q9_9"`},
		{[]string{f32, out, "IQ2_XXS"}, "quantization type IQ2_XXS is not supported"},
		{[]string{filepath.Join(dir, "missing.gguf"), out, "Q8_0"}, "no such file"},
		{[]string{iq, out, "Q8_0"}, "tensor blk.0.attn_q.weight has type TQ2_0, which cannot be converted"},
		{[]string{f32, out}, "want IN.gguf OUT.gguf TYPE, got 2 arguments"},
		{[]string{f32, out, "Q8_0", "extra"}, "got 4 arguments"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"quantize"}, c.args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("quantize %q: %v, want an error containing %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed runs left %s behind", out)
	}
}
