package gpu

import (
	"fmt"
	"strings"
)

// WeightType is the storage format of a weight matrix on the device: ggml's block types, as
// the kernels in shaders/dequant.inc.wgsl read them.
type WeightType uint8

// Weight formats the kernels read directly.
const (
	F32 WeightType = iota
	F16
	BF16
	Q8_0
	Q4_0
	Q4_1
	Q5_0
	Q5_1
	Q2_K
	Q3_K
	Q4_K
	Q5_K
	Q6_K
	IQ4_NL
	IQ4_XS
	MXFP4
	IQ3_S
	IQ3_XXS
	IQ2_S
	IQ2_XS
	IQ2_XXS
	IQ1_M
	IQ1_S
	numWeightTypes
)

// padding says where Pack inserts zero bytes to make a ggml block whole u32 words.
type padding uint8

const (
	padNone      padding = iota
	padAfterHalf         // two, after the leading f16 scale, so the fields that follow are aligned
	padEnd               // two at the end
	padAfterByte         // three after the leading byte (MXFP4's E8M0 scale): its quants aligned
)

type weightInfo struct {
	name       string
	blockSize  int // elements per block
	blockBytes int // bytes per block in GGUF
	words      int // u32 words per packed block
	pad        padding
}

var weightTypes = [numWeightTypes]weightInfo{
	F32:  {"F32", 4, 16, 4, padNone},
	F16:  {"F16", 4, 8, 2, padNone},
	BF16: {"BF16", 4, 8, 2, padNone},
	Q8_0: {"Q8_0", 32, 34, 9, padAfterHalf},
	Q4_0: {"Q4_0", 32, 18, 5, padAfterHalf},
	Q4_1: {"Q4_1", 32, 20, 5, padNone},
	Q5_0: {"Q5_0", 32, 22, 6, padAfterHalf},
	Q5_1: {"Q5_1", 32, 24, 6, padNone},
	Q2_K: {"Q2_K", 256, 84, 21, padNone},
	Q3_K: {"Q3_K", 256, 110, 28, padEnd},
	Q4_K: {"Q4_K", 256, 144, 36, padNone},
	Q5_K: {"Q5_K", 256, 176, 44, padNone},
	Q6_K: {"Q6_K", 256, 210, 53, padEnd},
	// The IQ types and MXFP4 (see dequant.inc.wgsl for each packed layout). IQ4_XS and IQ1_M
	// are whole words already; the others lead with an f16 d (MXFP4: an E8M0 byte), padded
	// after it so the quants, signs and scales that follow sit as in ggml, word-aligned.
	IQ4_NL:  {"IQ4_NL", 32, 18, 5, padAfterHalf},
	IQ4_XS:  {"IQ4_XS", 256, 136, 34, padNone},
	MXFP4:   {"MXFP4", 32, 17, 5, padAfterByte},
	IQ3_S:   {"IQ3_S", 256, 110, 28, padAfterHalf},
	IQ3_XXS: {"IQ3_XXS", 256, 98, 25, padAfterHalf},
	IQ2_S:   {"IQ2_S", 256, 82, 21, padAfterHalf},
	IQ2_XS:  {"IQ2_XS", 256, 74, 19, padAfterHalf},
	IQ2_XXS: {"IQ2_XXS", 256, 66, 17, padAfterHalf},
	IQ1_M:   {"IQ1_M", 256, 56, 14, padNone},
	IQ1_S:   {"IQ1_S", 256, 50, 13, padAfterHalf},
}

// String is the type's ggml name.
func (t WeightType) String() string {
	if t < numWeightTypes {
		return weightTypes[t].name
	}
	return fmt.Sprintf("WeightType(%d)", t)
}

// BlockSize is the number of elements per block; a row's length must be a multiple of it.
func (t WeightType) BlockSize() int { return weightTypes[t].blockSize }

// define is the shader define selecting the type's block decoder.
func (t WeightType) define() string { return "T_" + weightTypes[t].name }

// WeightTypeByName maps a ggml type name ("Q4_K") to the device format.
func WeightTypeByName(name string) (WeightType, bool) {
	for i, w := range weightTypes {
		if strings.EqualFold(w.name, name) {
			return WeightType(i), true
		}
	}
	return 0, false
}

// WeightTypeNames lists the supported types, for error messages.
func WeightTypeNames() []string {
	out := make([]string, len(weightTypes))
	for i, w := range weightTypes {
		out[i] = w.name
	}
	return out
}

// Pack converts rows of ggml blocks to the contents of one of the kernels' weight buffers:
// each block padded to whole words, then, for the IQ types with a lookup grid, the grid
// (GridBytes of it), which the kernels find at the end of the buffer they are bound to.
// A buffer holds whole rows and one grid: a weight split into chunks has one in each.
func Pack(t WeightType, data []byte) ([]byte, error) {
	blocks, err := packBlocks(t, data)
	if err != nil {
		return nil, err
	}
	grid := gridWords(t)
	if len(grid) == 0 {
		return blocks, nil
	}
	return appendGrid(blocks[:len(blocks):len(blocks)], grid), nil
}

// packBlocks is Pack without the grid: the blocks padded to whole words.
func packBlocks(t WeightType, data []byte) ([]byte, error) {
	info := weightTypes[t]
	if len(data)%info.blockBytes != 0 {
		return nil, fmt.Errorf("gpu: %d bytes of %s data is not a whole number of %d-byte blocks", len(data), info.name, info.blockBytes)
	}
	if info.pad == padNone {
		return data, nil
	}
	n := len(data) / info.blockBytes
	out := make([]byte, n*info.words*4)
	for i := 0; i < n; i++ {
		src := data[i*info.blockBytes : (i+1)*info.blockBytes]
		dst := out[i*info.words*4 : (i+1)*info.words*4]
		switch info.pad {
		case padAfterHalf:
			copy(dst[:2], src[:2])
			copy(dst[4:], src[2:])
		case padAfterByte:
			dst[0] = src[0]
			copy(dst[4:], src[1:])
		default:
			copy(dst, src)
		}
	}
	return out, nil
}

// PackedBytes is the device size of a weight of type t that takes fileBytes in a GGUF file: its
// blocks padded to whole words as Pack pads them, and the lookup grid a chunk carries
// (GridBytes; one chunk assumed).
func PackedBytes(t WeightType, fileBytes uint64) uint64 {
	info := weightTypes[t]
	return fileBytes/uint64(info.blockBytes)*uint64(info.words)*4 + uint64(GridBytes(t))
}

// WeightChunk is a run of whole rows of a weight that fits in one storage binding.
type WeightChunk struct {
	Buf  *Buffer // the chunk's rows, packed for the kernels (see Pack)
	Row0 int     // index of the chunk's first row in the whole weight
	Rows int     // number of rows in the chunk
}

// Weight is a row-major matrix (ggml layout: Rows rows of Cols elements) on the device, split
// into chunks when it exceeds the adapter's maxStorageBufferBindingSize (an 8B model's
// embedding table does on lavapipe), so kernels never see the split except as extra dispatches.
type Weight struct {
	Type   WeightType    // ggml block type of the data; selects the kernel variant
	Rows   int           // output features (ggml ne1)
	Cols   int           // row length, input features (ggml ne0); a multiple of the block size
	Chunks []WeightChunk // in row order, covering all Rows
	// Experts, when not 0, says the weight holds that many experts' matrices of
	// Rows/Experts rows each, expert e's from row e·Rows/Experts, every chunk whole experts
	// (UploadExperts; MatMulID's weight).
	Experts int
}

// Bytes is the weight's size on the device: its padded blocks and, for the IQ types with a
// lookup grid, each chunk's copy of the grid (GridBytes, at most 8 KiB a chunk).
func (w Weight) Bytes() uint64 {
	var n uint64
	for _, c := range w.Chunks {
		n += c.Buf.Size()
	}
	return n
}

// Release frees the weight's buffers.
func (w Weight) Release() {
	for _, c := range w.Chunks {
		c.Buf.Release()
	}
}

// UploadWeight packs a rows x cols matrix given as ggml blocks of type t and uploads it,
// split into chunks of whole rows no larger than d.MaxBinding, each with the type's lookup
// grid after its rows (see Pack).
func (d *Device) UploadWeight(label string, t WeightType, rows, cols int, data []byte) (Weight, error) {
	if t >= numWeightTypes {
		return Weight{}, fmt.Errorf("gpu: weight %q: unknown type %d", label, t)
	}
	info := weightTypes[t]
	if rows <= 0 || cols <= 0 || cols%info.blockSize != 0 {
		return Weight{}, fmt.Errorf("gpu: weight %q: %d x %d of %s: row length must be a positive multiple of %d", label, rows, cols, info.name, info.blockSize)
	}
	rowBlocks := cols / info.blockSize
	if len(data) != rows*rowBlocks*info.blockBytes {
		return Weight{}, fmt.Errorf("gpu: weight %q: %d bytes for %d x %d %s, want %d", label, len(data), rows, cols, info.name, rows*rowBlocks*info.blockBytes)
	}
	packed, err := packBlocks(t, data)
	if err != nil {
		return Weight{}, fmt.Errorf("gpu: weight %q: %w", label, err)
	}
	grid := gridWords(t)
	rowBytes := rowBlocks * info.words * 4
	perChunk := 0
	if room := d.MaxBinding; room > uint64(4*len(grid)) {
		perChunk = int((room - uint64(4*len(grid))) / uint64(rowBytes))
	}
	if perChunk == 0 {
		return Weight{}, fmt.Errorf("gpu: weight %q: one row of %d bytes exceeds the binding limit %d", label, rowBytes, d.MaxBinding)
	}
	w := Weight{Type: t, Rows: rows, Cols: cols}
	for r0 := 0; r0 < rows; r0 += perChunk {
		n := min(perChunk, rows-r0)
		name := label
		if r0 > 0 || n < rows {
			name = fmt.Sprintf("%s[%d:%d]", label, r0, r0+n)
		}
		buf, err := d.uploadRows(name, packed[r0*rowBytes:(r0+n)*rowBytes], grid)
		if err != nil {
			w.Release()
			return Weight{}, err
		}
		w.Chunks = append(w.Chunks, WeightChunk{Buf: buf, Row0: r0, Rows: n})
	}
	return w, nil
}
