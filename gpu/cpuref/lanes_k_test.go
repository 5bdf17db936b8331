package cpuref_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestSuperLanesAreGGMLs runs llama.cpp's own vec_dot (the shared CPU build's libggml-cpu,
// x86 with AVX2 and FMA, through testdata/ggmldot.c) on random rows of every type
// MatMulSuperLanes covers and checks that the Go model gives the same float bit for bit.
func TestSuperLanesAreGGMLs(t *testing.T) {
	bin, lib := ggmlDotTool(t)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, typ := range cpuref.SuperLaneTypes {
		for _, nb := range []int{1, 3, 11} {
			rows, cols := 24, 256*nb
			w := cpuref.RandomSuperBlocks(rng, typ, rows*nb)
			x := make([]float32, cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			want := ggmlDot(t, bin, lib, typ, w, rows, x)
			got, err := cpuref.MatMulSuperLanes(typ, w, rows, cols, x, 1)
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for r := range rows {
				if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
					if bad < 3 {
						t.Errorf("%s %d blocks, row %d: %g, llama.cpp %g", typ, nb, r, got[r], want[r])
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%s %d blocks: %d of %d rows differ", typ, nb, bad, rows)
			}
		}
	}
}

// ggmlDotTool builds testdata/ggmldot.c and returns it with the shared llama.cpp CPU
// libraries' folder it loads.
func ggmlDotTool(t *testing.T) (bin, lib string) {
	t.Helper()
	lib = shareddata.Path(t, "llama.cpp", "cpu")
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build testdata/ggmldot.c")
	}
	bin = filepath.Join(t.TempDir(), "ggmldot")
	if out, err := exec.Command(cc, "-O2", "-o", bin, "testdata/ggmldot.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("building ggmldot: %v\n%s", err, out)
	}
	return bin, lib
}

// ggmlDot runs ggmldot: llama.cpp's vec_dot of each row of w with x.
func ggmlDot(t *testing.T, bin, lib string, typ gguf.GGMLType, w []byte, rows int, x []float32) []float32 {
	t.Helper()
	var in bytes.Buffer
	binary.Write(&in, binary.LittleEndian, []int32{int32(typ), int32(len(x)), int32(rows)})
	in.Write(w)
	binary.Write(&in, binary.LittleEndian, x)
	cmd := exec.Command(bin, lib)
	cmd.Stdin = &in
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ggmldot %s: %v", typ, err)
	}
	got := make([]float32, rows)
	if err := binary.Read(bytes.NewReader(out), binary.LittleEndian, got); err != nil {
		t.Fatalf("ggmldot %s: %v", typ, err)
	}
	return got
}

// TestVecDotF32IsGGMLs checks DotF32VecDot bit for bit against llama.cpp's own
// ggml_vec_dot_f32 (the shared CPU build, through testdata/ggmldot.c) for row lengths with
// every kind of leftover past the runs of 32: none, fewer than 4, fours, fours and more.
func TestVecDotF32IsGGMLs(t *testing.T) {
	bin, lib := ggmlDotTool(t)
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{3, 8, 32, 33, 36, 39, 64, 100, 172, 255, 257} {
		const rows = 64
		w := make([]float32, rows*n)
		x := make([]float32, n)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		raw := make([]byte, 4*len(w))
		for i, v := range w {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
		}
		want := ggmlDot(t, bin, lib, gguf.TypeF32, raw, rows, x)
		for r := range rows {
			if got := cpuref.DotF32VecDot(w[r*n:(r+1)*n], x); math.Float32bits(got) != math.Float32bits(want[r]) {
				t.Errorf("n=%d row %d: %g, llama.cpp %g", n, r, got, want[r])
				break
			}
		}
	}
}

// TestF32ProductsAreGGMLs runs llama.cpp's own mul_mat on F32 weights (testdata/ggmlmm.c)
// and checks DotF32TinyBLAS (batches, the shapes llamafile's tinyBLAS takes: rows a multiple
// of 4, row length of 8) and DotF32VecDot (one token) bit for bit against it, for the
// projection shapes of the shared reference models.
func TestF32ProductsAreGGMLs(t *testing.T) {
	lib := shareddata.Path(t, "llama.cpp", "cpu")
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build testdata/ggmlmm.c")
	}
	bin := filepath.Join(t.TempDir(), "ggmlmm")
	if out, err := exec.Command(cc, "-O2", "-o", bin, "testdata/ggmlmm.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("building ggmlmm: %v\n%s", err, out)
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, c := range [][3]int{{256, 128, 5}, {64, 128, 5}, {4, 128, 5}, {8, 128, 13}, {128, 256, 13}, {512, 128, 1}, {172, 64, 1}} {
		rows, k, n := c[0], c[1], c[2]
		w, x := make([]float32, rows*k), make([]float32, n*k)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		var in bytes.Buffer
		binary.Write(&in, binary.LittleEndian, w)
		binary.Write(&in, binary.LittleEndian, x)
		cmd := exec.Command(bin, lib, strconv.Itoa(rows), strconv.Itoa(k), strconv.Itoa(n))
		cmd.Stdin = &in
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ggmlmm: %v", err)
		}
		want := make([]float32, rows*n)
		if err := binary.Read(bytes.NewReader(out), binary.LittleEndian, want); err != nil {
			t.Fatal(err)
		}
		dot := cpuref.DotF32TinyBLAS
		if n == 1 {
			dot = cpuref.DotF32VecDot
		}
		for tk := range n {
			for r := range rows {
				got := dot(w[r*k:(r+1)*k], x[tk*k:(tk+1)*k])
				if math.Float32bits(got) != math.Float32bits(want[tk*rows+r]) {
					t.Fatalf("%d x %d, %d tokens: token %d row %d: %v, llama.cpp %v", rows, k, n, tk, r, got, want[tk*rows+r])
				}
			}
		}
	}
}

// TestExpfIsGlibcs and TestLogfIsGlibcs check Expf and Logf bit for bit against this
// machine's C library (glibc, whose expf and logf llama.cpp's CPU backend calls) on a million
// floats over each one's range and beyond: random ones over a model's range and random bit
// patterns.
func TestExpfIsGlibcs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	checkLibmf(t, "expf", cpuref.Expf, func(i int) float32 {
		switch i % 3 {
		case 0:
			return float32(rng.Float64()*193 - 104)
		case 1:
			return float32(rng.NormFloat64() * 3)
		}
		return math.Float32frombits(rng.Uint32())
	})
}

func TestLogfIsGlibcs(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	checkLibmf(t, "logf", cpuref.Logf, func(i int) float32 {
		if i%2 == 0 {
			return float32(math.Exp(rng.Float64()*200 - 100))
		}
		return math.Float32frombits(rng.Uint32())
	})
}

// checkLibmf compares f with the C library's function fn (testdata/libmf.c) on 2^20 inputs
// from input.
func checkLibmf(t *testing.T, fn string, f func(float32) float32, input func(int) float32) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build testdata/libmf.c")
	}
	bin := filepath.Join(t.TempDir(), "libmf")
	if out, err := exec.Command(cc, "-O2", "-o", bin, "testdata/libmf.c", "-lm").CombinedOutput(); err != nil {
		t.Fatalf("building libmf: %v\n%s", err, out)
	}
	xs := make([]float32, 1<<20)
	for i := range xs {
		xs[i] = input(i)
	}
	var in bytes.Buffer
	binary.Write(&in, binary.LittleEndian, xs)
	cmd := exec.Command(bin, fn)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(xs))
	if err := binary.Read(bytes.NewReader(out), binary.LittleEndian, want); err != nil {
		t.Fatal(err)
	}
	for i, x := range xs {
		got := f(x)
		if math.Float32bits(got) != math.Float32bits(want[i]) && !(got != got && want[i] != want[i]) {
			t.Fatalf("%s(%v) = %v, glibc's %v", fn, x, got, want[i])
		}
	}
}
