// Package quantize converts GGUF models between tensor types the way llama.cpp's llama-quantize
// does: a Mix (llama.cpp's "file type", such as Q4_K_M) picks a type per tensor, with the same
// per-layer "use more bits" rules and the same fallbacks for rows whose length the block size
// does not divide, so a file made here has the tensor types llama-quantize would give it (and,
// the quantizers being bit-exact, the same bytes). Differences: where llama-quantize aborts for
// lack of a fallback (a 32-block type on rows 32 does not divide) this falls back to F16, as
// llama-quantize's --tensor-type NAME=f16 would; quantized input is requantized without an
// --allow-requantize; there is no importance matrix, overrides or --pure, and of the IQ mixes
// only IQ4_NL and IQ4_XS (the others need an importance matrix and a lattice search this
// package does not write; ParseMix refuses them by name).
package quantize

import (
	"fmt"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// Mix is a llama.cpp file type (enum llama_ftype): a default tensor type plus rules that give
// some tensors more bits. Its value is the general.file_type number written to the file.
type Mix uint32

// The mixes this package writes, numbered as llama_ftype. The IQ mixes other than IQ4_NL and
// IQ4_XS, and Q2_K_S, are left out: they need an importance matrix or quantizers this project
// lacks (unsupportedMixes).
const (
	MixF32    Mix = 0
	MixF16    Mix = 1
	MixQ4_0   Mix = 2
	MixQ4_1   Mix = 3
	MixQ8_0   Mix = 7
	MixQ5_0   Mix = 8
	MixQ5_1   Mix = 9
	MixQ2_K   Mix = 10
	MixQ3_K_S Mix = 11
	MixQ3_K_M Mix = 12
	MixQ3_K_L Mix = 13
	MixQ4_K_S Mix = 14
	MixQ4_K_M Mix = 15
	MixQ5_K_S Mix = 16
	MixQ5_K_M Mix = 17
	MixQ6_K   Mix = 18
	MixIQ4_NL Mix = 25
	MixIQ4_XS Mix = 30
	MixBF16   Mix = 32
	// MixMXFP4_MOE puts MXFP4 on the expert tensors (3-D, one matrix per expert) and Q8_0 on
	// every other matrix.
	MixMXFP4_MOE Mix = 38
)

type mixInfo struct {
	mix  Mix
	name string
	def  gguf.GGMLType
}

// mixTable lists the mixes in llama-quantize's help order, with llama.cpp's default types
// (llama_ftype_get_default_type).
var mixTable = []mixInfo{
	{MixQ4_0, "Q4_0", gguf.TypeQ4_0},
	{MixQ4_1, "Q4_1", gguf.TypeQ4_1},
	{MixMXFP4_MOE, "MXFP4_MOE", gguf.TypeMXFP4},
	{MixQ5_0, "Q5_0", gguf.TypeQ5_0},
	{MixQ5_1, "Q5_1", gguf.TypeQ5_1},
	{MixQ2_K, "Q2_K", gguf.TypeQ2_K},
	{MixQ3_K_S, "Q3_K_S", gguf.TypeQ3_K},
	{MixQ3_K_M, "Q3_K_M", gguf.TypeQ3_K},
	{MixQ3_K_L, "Q3_K_L", gguf.TypeQ3_K},
	{MixIQ4_NL, "IQ4_NL", gguf.TypeIQ4_NL},
	{MixIQ4_XS, "IQ4_XS", gguf.TypeIQ4_XS},
	{MixQ4_K_S, "Q4_K_S", gguf.TypeQ4_K},
	{MixQ4_K_M, "Q4_K_M", gguf.TypeQ4_K},
	{MixQ5_K_S, "Q5_K_S", gguf.TypeQ5_K},
	{MixQ5_K_M, "Q5_K_M", gguf.TypeQ5_K},
	{MixQ6_K, "Q6_K", gguf.TypeQ6_K},
	{MixQ8_0, "Q8_0", gguf.TypeQ8_0},
	{MixF16, "F16", gguf.TypeF16},
	{MixBF16, "BF16", gguf.TypeBF16},
	{MixF32, "F32", gguf.TypeF32},
}

// unsupportedMixes are llama-quantize's other types, by name and llama_ftype number, with why
// this package does not write them; ParseMix refuses them with the reason.
var unsupportedMixes = []struct {
	name   string
	ftype  uint32
	reason string
}{
	{"Q1_0", 40, "no Q1_0 quantizer here"},
	{"Q2_0", 41, "no Q2_0 quantizer here"},
	{"IQ2_XXS", 19, iqReason},
	{"IQ2_XS", 20, iqReason},
	{"IQ2_S", 28, iqReason},
	{"IQ2_M", 29, iqReason},
	{"IQ1_S", 24, iqReason},
	{"IQ1_M", 31, iqReason},
	{"TQ1_0", 36, "no ternary quantizers here"},
	{"TQ2_0", 37, "no ternary quantizers here"},
	{"Q2_K_S", 21, "it needs an importance matrix, which this tool does not take"},
	{"IQ3_XXS", 23, iqReason},
	{"IQ3_S", 26, iqReason},
	{"IQ3_M", 27, iqReason},
	{"IQ3_XS", 22, iqReason},
	{"NVFP4", 39, "no NVFP4 quantizer here"},
	{"COPY", 0, "copying without quantizing is not a mode of this tool"},
}

const iqReason = "the 1-, 2- and 3-bit IQ types need an importance matrix and a lattice search that this tool does not write"

// aliases are llama-quantize's other spellings.
var aliases = map[string]Mix{"Q3_K": MixQ3_K_M, "Q4_K": MixQ4_K_M, "Q5_K": MixQ5_K_M}

func (m Mix) info() (mixInfo, bool) {
	for _, mi := range mixTable {
		if mi.mix == m {
			return mi, true
		}
	}
	return mixInfo{}, false
}

// Mixes returns every supported mix, for help text and tests.
func Mixes() []Mix {
	out := make([]Mix, len(mixTable))
	for i, mi := range mixTable {
		out[i] = mi.mix
	}
	return out
}

// ParseMix reads a mix name as llama-quantize spells it ("Q4_K_M", case-insensitive; "Q4_K"
// means Q4_K_M as there), or a general.file_type number.
func ParseMix(name string) (Mix, error) {
	up := strings.ToUpper(strings.TrimSpace(name))
	for _, mi := range mixTable {
		if mi.name == up {
			return mi.mix, nil
		}
	}
	if m, ok := aliases[up]; ok {
		return m, nil
	}
	var n uint32
	number := false
	if _, err := fmt.Sscanf(up, "%d", &n); err == nil && fmt.Sprint(n) == up {
		if _, ok := Mix(n).info(); ok {
			return Mix(n), nil
		}
		number = true
	}
	names := make([]string, len(mixTable))
	for i, mi := range mixTable {
		names[i] = mi.name
	}
	for _, u := range unsupportedMixes {
		if u.name == up || number && u.ftype == n && u.name != "COPY" {
			return 0, fmt.Errorf("quantization type %s is not supported: %s (supported: %s)", u.name, u.reason, strings.Join(names, ", "))
		}
	}
	return 0, fmt.Errorf("unknown quantization type %q (want one of %s)", name, strings.Join(names, ", "))
}

// String returns llama-quantize's name for the mix.
func (m Mix) String() string {
	if mi, ok := m.info(); ok {
		return mi.name
	}
	return fmt.Sprintf("Mix(%d)", uint32(m))
}

// DefaultType is the type most matrices get; the mix's rules change it for a few.
func (m Mix) DefaultType() gguf.GGMLType {
	mi, _ := m.info()
	return mi.def
}

// FileType is the general.file_type value llama.cpp writes for the mix.
func (m Mix) FileType() uint32 { return uint32(m) }

// quantized reports whether the mix's default type is a block type, the case in which
// llama.cpp applies its per-tensor rules and fallbacks (never for F32, F16 or BF16).
func (m Mix) quantized() bool {
	switch m.DefaultType() {
	case gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16:
		return false
	}
	return true
}
