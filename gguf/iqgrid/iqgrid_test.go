package iqgrid

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"testing"
)

// ksignsTable is ggml-common.h's ksigns_iq2xs, which KSigns computes.
var ksignsTable = [128]uint8{
	0, 129, 130, 3, 132, 5, 6, 135, 136, 9, 10, 139, 12, 141, 142, 15, 144, 17, 18, 147, 20, 149, 150, 23, 24, 153, 154, 27, 156, 29, 30, 159, 160, 33, 34, 163, 36, 165, 166, 39, 40, 169, 170, 43, 172, 45, 46, 175, 48, 177, 178, 51, 180, 53, 54, 183, 184, 57, 58, 187, 60, 189, 190, 63, 192, 65, 66, 195, 68, 197, 198, 71, 72, 201, 202, 75, 204, 77, 78, 207, 80, 209, 210, 83, 212, 85, 86, 215, 216, 89, 90, 219, 92, 221, 222, 95, 96, 225, 226, 99, 228, 101, 102, 231, 232, 105, 106, 235, 108, 237, 238, 111, 240, 113, 114, 243, 116, 245, 246, 119, 120, 249, 250, 123, 252, 125, 126, 255,
}

func TestKSigns(t *testing.T) {
	for i, want := range ksignsTable {
		if got := KSigns(i); got != want {
			t.Errorf("KSigns(%d) = %d, want %d", i, got, want)
		}
	}
}

// TestGridValues checks that every point of every grid holds only its type's levels.
func TestGridValues(t *testing.T) {
	levels := func(vals ...byte) map[byte]bool {
		m := map[byte]bool{}
		for _, v := range vals {
			m[v] = true
		}
		return m
	}
	iq2 := levels(8, 25, 43)
	iq3 := levels(4, 12, 20, 28, 36, 44, 52, 62)
	iq3s := levels(1, 3, 5, 7, 9, 11, 13, 15)
	iq1 := levels(0xff, 0, 1)
	check64 := func(name string, n int, at func(int) uint64, ok map[byte]bool) {
		for i := range n {
			for j := range 8 {
				if b := byte(at(i) >> (8 * j)); !ok[b] {
					t.Fatalf("%s[%d] byte %d = %d", name, i, j, b)
				}
			}
		}
	}
	check32 := func(name string, n int, at func(int) uint32, ok map[byte]bool) {
		for i := range n {
			for j := range 4 {
				if b := byte(at(i) >> (8 * j)); !ok[b] {
					t.Fatalf("%s[%d] byte %d = %d", name, i, j, b)
				}
			}
		}
	}
	check64("iq2xxs", IQ2XXSLen, IQ2XXS, iq2)
	check64("iq2xs", IQ2XSLen, IQ2XS, iq2)
	check64("iq2s", IQ2SLen, IQ2S, iq2)
	check64("iq1s", IQ1SLen, IQ1S, iq1)
	check32("iq3xxs", IQ3XXSLen, IQ3XXS, iq3)
	check32("iq3s", IQ3SLen, IQ3S, iq3s)
}

// TestGridDigests pins the tables to the bytes generated from ggml-common.h (SHA-256 of each
// grid's entries as little-endian integers), so an accidental edit cannot pass unnoticed.
func TestGridDigests(t *testing.T) {
	digest := func(n, size int, at func(int) uint64) string {
		b := make([]byte, 0, n*size)
		for i := range n {
			b = binary.LittleEndian.AppendUint64(b, at(i))[:len(b)+size]
		}
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	u32 := func(f func(int) uint32) func(int) uint64 { return func(i int) uint64 { return uint64(f(i)) } }
	for _, c := range []struct {
		name    string
		n, size int
		at      func(int) uint64
		want    string
	}{
		{"iq2xxs", IQ2XXSLen, 8, IQ2XXS, "05826b5d3e472a3a78f196be62ac78acf81df0f909626e12ab9fa2a5d490dd54"},
		{"iq2xs", IQ2XSLen, 8, IQ2XS, "06e47aaca60b4dc1d9b5a3f34540437058a6b142b4d7a59d5ded769b4d1bf1de"},
		{"iq2s", IQ2SLen, 8, IQ2S, "e1aa1473412b0552c2174c30ef22ab4073f6a181b85a17056e8249bd2932fd88"},
		{"iq3xxs", IQ3XXSLen, 4, u32(IQ3XXS), "46e35f5a997efdee6c99ce57854c8a0d4f0ff8ca57e5e8a60c0793ea580acf5d"},
		{"iq3s", IQ3SLen, 4, u32(IQ3S), "bd1af4945a1717c65610b0284e4628b9a1ba3b306fae3a06f6e5f597356e349f"},
		{"iq1s", IQ1SLen, 8, IQ1S, "07540ffc1aeaf6ad4d97e96b0fcc765aae39671d4ae4a27bbd0e796fde167c6a"},
	} {
		if got := digest(c.n, c.size, c.at); got != c.want {
			t.Errorf("%s: digest %s, want %s", c.name, got, c.want)
		}
	}
}
