package gpu_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestAttentionIsGGMLs runs llama.cpp's own CPU flash attention (the shared build's
// libggml-cpu, through testdata/ggmlfa.c) on random queries over an f16 cache and checks that
// CPU adapters' kernels reproducing llama.cpp's arithmetic (token lanes and head-major) give
// the same floats, bit for bit: heads of 32 and 64, grouped-query heads, one query and
// prompts of 3 to 20 over 6 to 40 keys, without and with attention sinks (gpt-oss).
func TestAttentionIsGGMLs(t *testing.T) {
	lib := shareddata.Path(t, "llama.cpp", "cpu")
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build testdata/ggmlfa.c")
	}
	bin := filepath.Join(t.TempDir(), "ggmlfa")
	if out, err := exec.Command(cc, "-O2", "-o", bin, "testdata/ggmlfa.c", "-ldl", "-lm").CombinedOutput(); err != nil {
		t.Fatalf("building ggmlfa: %v\n%s", err, out)
	}
	d := laneOrderDevice(t)
	defer func(l bool) { d.TokenLanes = l }(d.TokenLanes)
	rng := rand.New(rand.NewPCG(61, 62))
	for _, lanes := range []bool{true, false} {
		d.TokenLanes = lanes
		for i, c := range []sinkCase{{4, 2, 32, 6, 1, 0, true}, {4, 2, 32, 7, 3, 0, true}, {4, 2, 32, 5, 5, 0, true},
			{4, 2, 64, 40, 9, 0, true}, {8, 2, 32, 20, 20, 0, true}, {4, 4, 64, 33, 1, 0, true},
			{4, 2, 32, 6, 1, 0, true}, {4, 2, 32, 7, 3, 0, true}, {8, 2, 64, 30, 12, 0, true}} {
			in := newSinkInputs(t, d, rng, c)
			var sinks []float32
			ap := in.params(t, d, nil)
			if i >= 6 {
				// Sinks, some of them a head's largest score (the case where llama.cpp's sum
				// is not fused).
				sinks = randSinks(rng, c.nHead)
				ap = in.params(t, d, upload(t, d, sinks))
			}
			got := in.attention(t, d, ap, false)
			var stdin bytes.Buffer
			for _, v := range [][]float32{in.q, in.k, in.v, sinks} {
				binary.Write(&stdin, binary.LittleEndian, v)
			}
			cmd := exec.Command(bin, lib, fmt.Sprint(c.headDim), fmt.Sprint(c.tokens), fmt.Sprint(c.nHead), fmt.Sprint(c.nCtx), fmt.Sprint(c.nKV), fmt.Sprint(ap.Scale), fmt.Sprint(len(sinks)/max(len(sinks), 1)))
			cmd.Stdin = &stdin
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("ggmlfa: %v", err)
			}
			want := make([]float32, len(in.q))
			if err := binary.Read(bytes.NewReader(out), binary.LittleEndian, want); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Errorf("token lanes %v, %+v, sinks %v: value %d is %v, llama.cpp's %v", lanes, c, sinks, i, got[i], want[i])
					break
				}
			}
		}
	}
}
