package mt19937

import (
	"math"
	"testing"
)

// The expected values below are std::mt19937's and libstdc++'s (g++ 12), and each is also
// worked out by hand in its comment.

func TestOutputs(t *testing.T) {
	// The C++ standard's own check: the 10000th output of a default-seeded (5489) mt19937.
	g := New(5489)
	want := []uint32{3499211612, 581869302, 3890346734, 3586334585, 545404204}
	for i, w := range want {
		if got := g.Uint32(); got != w {
			t.Fatalf("seed 5489 output %d = %d, want %d", i+1, got, w)
		}
	}
	for i := len(want) + 1; i < 10000; i++ {
		g.Uint32()
	}
	if got := g.Uint32(); got != 4123659995 {
		t.Errorf("seed 5489 output 10000 = %d, want 4123659995", got)
	}
	g.Seed(42)
	for i, w := range []uint32{1608637542, 3421126067, 4083286876} {
		if got := g.Uint32(); got != w {
			t.Errorf("seed 42 output %d = %d, want %d", i+1, got, w)
		}
	}
}

func TestCanonical64(t *testing.T) {
	// (3499211612 + 581869302*2^32) / 2^64 rounded once: two outputs per draw.
	g := New(5489)
	for i, w := range []float64{0.1354770042967805, 0.8350085899945795, 0.96886777112423139} {
		if got := Canonical64(g); got != w {
			t.Errorf("draw %d = %.17g, want %.17g", i+1, got, w)
		}
	}
	// Three draws used six outputs: the seventh is next.
	g2 := New(5489)
	for range 6 {
		g2.Uint32()
	}
	if a, b := g.Uint32(), g2.Uint32(); a != b {
		t.Errorf("after two draws the next output is %d, want the 7th, %d", a, b)
	}
	if got := UniformFloat64(New(5489), 0, 1); got != 0.1354770042967805 {
		t.Errorf("uniform_real_distribution<double>(0, 1) = %.17g, want the canonical draw", got)
	}
	if got := Canonical64(constant(math.MaxUint32)); got != math.Nextafter(1, 0) {
		t.Errorf("all-ones outputs = %.17g, want the double below 1", got)
	}
}

func TestCanonical32(t *testing.T) {
	// float32(3499211612) = 3499211520, / 2^32 = 0.81472367: one output per draw.
	g := New(5489)
	for i, w := range []float32{0.81472367, 0.135477006, 0.905791938, 0.835008562} {
		if got := UniformFloat32(g, 0, 1); got != w {
			t.Errorf("draw %d = %.9g, want %.9g", i+1, got, w)
		}
	}
	// 2^32-1 rounds to the float 2^32: the quotient 1 becomes the float below 1.
	if got := Canonical32(constant(math.MaxUint32)); got != math.Nextafter32(1, 0) {
		t.Errorf("an all-ones output = %.9g, want the float below 1", got)
	}
}

func TestDiscrete(t *testing.T) {
	// Weights .5, .3, .2 (as floats: .5, .30000001, .20000000): cumulative .49999999, .8, 1.
	// The draws of seed 5489 are .1355, .8350, .9689, .2210, ...: indices 0, 2, 2, 0, ...
	g := New(5489)
	w := []float32{0.5, 0.3, 0.2}
	for i, want := range []int{0, 2, 2, 0, 0, 1, 0, 2, 2, 2} {
		if got := Discrete(g, w); got != want {
			t.Errorf("draw %d = %d, want %d", i+1, got, want)
		}
	}
	// One weight: index 0, and no output used.
	g.Seed(5489)
	if got := Discrete(g, []float32{1}); got != 0 {
		t.Errorf("one weight: %d, want 0", got)
	}
	if got := g.Uint32(); got != 3499211612 {
		t.Errorf("one weight drew from the generator: next output %d, want the first, 3499211612", got)
	}
}

// constant is a source whose every output is v.
type constant uint32

func (c constant) Uint32() uint32 { return uint32(c) }
