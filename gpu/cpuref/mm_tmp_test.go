package cpuref_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
)

func TestMMOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range [][4]int{{256, 128, 5, 2}, {256, 128, 5, 1}, {128, 128, 5, 2}, {64, 128, 5, 2}, {4, 128, 5, 2}, {128, 256, 13, 2}, {512, 128, 5, 2}} {
		m, k, n, nth := c[0], c[1], c[2], c[3]
		w := make([]float32, m*k)
		x := make([]float32, n*k)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		var in bytes.Buffer
		binary.Write(&in, binary.LittleEndian, w)
		binary.Write(&in, binary.LittleEndian, x)
		cmd := exec.Command("/tmp/op/mm", strconv.Itoa(m), strconv.Itoa(k), strconv.Itoa(n), strconv.Itoa(nth))
		cmd.Stdin = &in
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, m*n)
		binary.Read(bytes.NewReader(out), binary.LittleEndian, want)
		var badT, badV int
		for tk := range n {
			for r := range m {
				tb := cpuref.DotF32TinyBLAS(w[r*k:(r+1)*k], x[tk*k:(tk+1)*k])
				vd := cpuref.DotF32VecDot(w[r*k:(r+1)*k], x[tk*k:(tk+1)*k])
				if math.Float32bits(tb) != math.Float32bits(want[tk*m+r]) {
					badT++
				}
				if math.Float32bits(vd) != math.Float32bits(want[tk*m+r]) {
					badV++
				}
			}
		}
		t.Logf("%v: tinyBLAS model differs %d, vec_dot model differs %d of %d", c, badT, badV, m*n)
	}
}
