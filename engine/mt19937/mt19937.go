// Package mt19937 is C++'s std::mt19937 and the libstdc++ distributions llama.cpp samples
// with (generate_canonical, uniform_real_distribution, discrete_distribution), so that a seed
// draws here exactly the numbers, and so the tokens, it draws in llama.cpp.
package mt19937

// The 32-bit Mersenne Twister's parameters (std::mt19937).
const (
	n         = 624
	m         = 397
	matrixA   = 0x9908b0df
	upperMask = 0x80000000
	lowerMask = 0x7fffffff
)

// Generator is a std::mt19937: the same seed gives the same 32-bit outputs in the same order.
type Generator struct {
	state [n]uint32
	next  int // index of the next output in state; n means the block must be regenerated
}

// New returns a generator seeded as std::mt19937(seed).
func New(seed uint32) *Generator {
	g := &Generator{}
	g.Seed(seed)
	return g
}

// Seed restarts the generator as std::mt19937::seed(seed) does.
func (g *Generator) Seed(seed uint32) {
	g.state[0] = seed
	for i := uint32(1); i < n; i++ {
		prev := g.state[i-1]
		g.state[i] = 1812433253*(prev^(prev>>30)) + i
	}
	g.next = n
}

// Uint32 returns the next output.
func (g *Generator) Uint32() uint32 {
	if g.next >= n {
		g.twist()
	}
	y := g.state[g.next]
	g.next++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// twist regenerates the block of n outputs.
func (g *Generator) twist() {
	s := &g.state
	for i := 0; i < n; i++ {
		y := s[i]&upperMask | s[(i+1)%n]&lowerMask
		v := s[(i+m)%n] ^ y>>1
		if y&1 != 0 {
			v ^= matrixA
		}
		s[i] = v
	}
	g.next = 0
}
