package model

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// loader uploads tensors from a GGUF file, checking names, shapes and types as it goes.
type loader struct {
	f        *gguf.File
	dev      *gpu.Device
	progress func(done, total uint64)
	done     uint64
	total    uint64
	bufs     []*gpu.Buffer // vectors uploaded, released on failure
	ones     *gpu.Buffer   // NEmbd ones, made once for the blocks that need them (Gemma 4's router)
	weights  []gpu.Weight  // matrices uploaded, released on failure
}

func (l *loader) tensor(name string, shape ...int) (*gguf.TensorInfo, error) {
	t, ok := l.f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("model: tensor %q missing", name)
	}
	if len(t.Shape) > len(shape) {
		for _, d := range t.Shape[len(shape):] {
			if d != 1 {
				return nil, fmt.Errorf("model: tensor %q has shape %v, want %v", name, t.Shape, shape)
			}
		}
	}
	for i, want := range shape {
		got := uint64(1)
		if i < len(t.Shape) {
			got = t.Shape[i]
		}
		if got != uint64(want) {
			return nil, fmt.Errorf("model: tensor %q has shape %v, want %v", name, t.Shape, shape)
		}
	}
	return t, nil
}

func (l *loader) progressed(t *gguf.TensorInfo) {
	l.done += t.Size
	if l.progress != nil {
		l.progress(l.done, l.total)
	}
}

func (l *loader) upload(t *gguf.TensorInfo, data []byte) (*gpu.Buffer, error) {
	b, err := l.dev.Upload(t.Name, data)
	if err != nil {
		return nil, fmt.Errorf("model: upload %q: %w", t.Name, err)
	}
	l.bufs = append(l.bufs, b)
	l.progressed(t)
	return b, nil
}

// float32s converts a tensor to f32 values whatever its float type.
func float32s(t *gguf.TensorInfo, data []byte) ([]float32, error) {
	n := t.NumElements()
	out := make([]float32, n)
	switch t.Type {
	case gguf.TypeF32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
	case gguf.TypeF16:
		for i := range out {
			out[i] = gguf.F16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
		}
	case gguf.TypeBF16:
		for i := range out {
			out[i] = gguf.BF16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
		}
	default:
		return nil, unsupportedType(t)
	}
	return out, nil
}

func unsupportedType(t *gguf.TensorInfo) error {
	return fmt.Errorf("model: tensor %q: type %s not supported yet (supported: %s)", t.Name, t.Type, strings.Join(gpu.WeightTypeNames(), ", "))
}

// floats reads a tensor of the given shape as f32 values, whatever its float type.
func (l *loader) floats(name string, shape ...int) (*gguf.TensorInfo, []float32, error) {
	t, err := l.tensor(name, shape...)
	if err != nil {
		return nil, nil, err
	}
	v, err := float32s(t, l.f.TensorData(t))
	return t, v, err
}

// vector loads a tensor of the given shape (a 1-D norm weight or bias; qwen35's conv taps) as
// f32.
func (l *loader) vector(name string, shape ...int) (*gpu.Buffer, error) {
	t, v, err := l.floats(name, shape...)
	if err != nil {
		return nil, err
	}
	return l.upload(t, gpu.Bytes(v))
}

// concatVectors loads 1-D tensors (biases) of the given lengths end to end into one f32 buffer.
func (l *loader) concatVectors(names []string, lens []int) (*gpu.Buffer, error) {
	var all []float32
	var last *gguf.TensorInfo
	for i, name := range names {
		t, v, err := l.floats(name, lens[i])
		if err != nil {
			return nil, err
		}
		all = append(all, v...)
		if i < len(names)-1 {
			l.progressed(t)
		}
		last = t
	}
	return l.upload(last, gpu.Bytes(all))
}

// matrix loads a rows x cols weight (ggml shape [cols, rows]) in its own format; the kernels
// dequantize it as they read it.
func (l *loader) matrix(name string, rows, cols int) (gpu.Weight, error) {
	t, err := l.tensor(name, cols, rows)
	if err != nil {
		return gpu.Weight{}, err
	}
	typ, ok := gpu.WeightTypeByName(t.Type.String())
	if !ok {
		return gpu.Weight{}, unsupportedType(t)
	}
	w, err := l.dev.UploadWeight(t.Name, typ, rows, cols, l.f.TensorData(t))
	if err != nil {
		return gpu.Weight{}, fmt.Errorf("model: %w", err)
	}
	l.keep(w, t)
	return w, nil
}

// keep records an uploaded weight (released if the load fails) and the tensors it holds as
// done.
func (l *loader) keep(w gpu.Weight, from ...*gguf.TensorInfo) {
	l.weights = append(l.weights, w)
	for _, t := range from {
		l.progressed(t)
	}
}

func (l *loader) release() {
	for _, b := range l.bufs {
		b.Release()
	}
	for _, w := range l.weights {
		w.Release()
	}
	l.bufs, l.weights = nil, nil
}

// proj is one projection writing a column range of a fused output row.
type proj struct {
	w   gpu.Weight
	col int
}

// rowsOf is a tensor's rows that a fused projection takes: all of them, or, when every > 0,
// in each block of every rows the run rows from from (qwen35's attn_q, which holds each head's
// q rows and then its gate rows).
type rowsOf struct {
	name             string
	rows             int // rows taken
	of               int // the tensor's rows (0: rows)
	from, run, every int
	repeat           bool // the tensor's rows again (Gemma 4's keys as its values): not counted twice
}

// all is the tensor's row count.
func (p rowsOf) all() int { return cmp.Or(p.of, p.rows) }

// pick is the bytes of the rows p takes of t's data (rows of equal size in any type).
func (p rowsOf) pick(t *gguf.TensorInfo, data []byte) []byte {
	if p.every == 0 {
		return data
	}
	row := len(data) / p.all()
	out := make([]byte, 0, p.rows*row)
	for r := 0; r < p.all(); r++ {
		if k := r % p.every; k >= p.from && k < p.from+p.run {
			out = append(out, data[r*row:(r+1)*row]...)
		}
	}
	return out
}

// fused loads projections that share an input (q, k, v; gate, up) so that their outputs land
// side by side in one row: when all have the same type the matrices are concatenated into one
// weight, computed by one dispatch; otherwise each writes its own column range.
func (l *loader) fused(names []string, rows []int, cols int) ([]proj, error) {
	parts := make([]rowsOf, len(names))
	for i, n := range names {
		parts[i] = rowsOf{name: n, rows: rows[i]}
	}
	return l.fusedRows(parts, cols)
}

// fusedRows is fused over parts of tensors (rowsOf).
func (l *loader) fusedRows(parts []rowsOf, cols int) ([]proj, error) {
	infos := make([]*gguf.TensorInfo, len(parts))
	same := true
	for i, p := range parts {
		t, err := l.tensor(p.name, cols, p.all())
		if err != nil {
			return nil, err
		}
		if p.every > 0 && (p.all()%p.every != 0 || p.from+p.run > p.every || p.all()/p.every*p.run != p.rows) {
			return nil, fmt.Errorf("model: tensor %q: rows %d..%d of every %d do not make %d of %d", p.name, p.from, p.from+p.run-1, p.every, p.rows, p.all())
		}
		infos[i] = t
		same = same && t.Type == infos[0].Type
	}
	var out []proj
	col := 0
	var data []byte
	total := 0
	for i, t := range infos {
		typ, ok := gpu.WeightTypeByName(t.Type.String())
		if !ok {
			return nil, unsupportedType(t)
		}
		rows := parts[i].pick(t, l.f.TensorData(t))
		if same {
			data = append(data, rows...)
			total += parts[i].rows
			continue
		}
		w, err := l.dev.UploadWeight(t.Name, typ, parts[i].rows, cols, rows)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		l.keep(w, parts[i].counted(t)...)
		out = append(out, proj{w: w, col: col})
		col += parts[i].rows
	}
	if !same {
		return out, nil
	}
	typ, _ := gpu.WeightTypeByName(infos[0].Type.String())
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.name
	}
	w, err := l.dev.UploadWeight(strings.Join(names, "+"), typ, total, cols, data)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	var counted []*gguf.TensorInfo
	for i, t := range infos {
		counted = append(counted, parts[i].counted(t)...)
	}
	l.keep(w, counted...)
	return []proj{{w: w}}, nil
}

// counted is t when loading p counts it as done for the progress: the part that takes a
// tensor's first rows, so that a tensor split over two projections counts once.
func (p rowsOf) counted(t *gguf.TensorInfo) []*gguf.TensorInfo {
	if p.repeat || p.every > 0 && p.from > 0 {
		return nil
	}
	return []*gguf.TensorInfo{t}
}

// firstRow loads row 0 of a matrix of rows of n values as an f32 vector (BERT's token type
// 0, the only type a single-segment input uses).
func (l *loader) firstRow(name string, n int) (*gpu.Buffer, error) {
	t, ok := l.f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("model: tensor %q missing", name)
	}
	if len(t.Shape) < 1 || t.Shape[0] != uint64(n) {
		return nil, fmt.Errorf("model: tensor %q has shape %v, want rows of %d", name, t.Shape, n)
	}
	row := make([]float32, n)
	rowBytes, ok := t.Type.RowSize(uint64(n))
	if !ok {
		return nil, unsupportedType(t)
	}
	if err := gguf.Dequantize(t.Type, l.f.TensorData(t)[:rowBytes], row); err != nil {
		return nil, fmt.Errorf("model: %s: %w", name, err)
	}
	return l.upload(t, gpu.Bytes(row))
}
