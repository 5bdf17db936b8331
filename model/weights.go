package model

import (
	"encoding/binary"
	"fmt"
	"math"

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
	bufs     []*gpu.Buffer // everything uploaded, released on failure
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

func (l *loader) upload(t *gguf.TensorInfo, data []byte) (*gpu.Buffer, error) {
	b, err := l.dev.Upload(t.Name, data)
	if err != nil {
		return nil, fmt.Errorf("model: upload %q: %w", t.Name, err)
	}
	l.bufs = append(l.bufs, b)
	l.done += t.Size
	if l.progress != nil {
		l.progress(l.done, l.total)
	}
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
	return fmt.Errorf("model: tensor %q: type %s not supported yet (supported: F32, F16, BF16)", t.Name, t.Type)
}

// vector loads a 1-D tensor (norm weights) as f32.
func (l *loader) vector(name string, n int) (*gpu.Buffer, error) {
	t, err := l.tensor(name, n)
	if err != nil {
		return nil, err
	}
	v, err := float32s(t, l.f.TensorData(t))
	if err != nil {
		return nil, err
	}
	return l.upload(t, gpu.Bytes(v))
}

// matrix loads a rows x cols weight (ggml shape [cols, rows]), keeping F16 as F16 where the
// kernels can read it and widening anything else they cannot.
func (l *loader) matrix(name string, rows, cols int) (gpu.Weight, error) {
	t, err := l.tensor(name, cols, rows)
	if err != nil {
		return gpu.Weight{}, err
	}
	data := l.f.TensorData(t)
	w := gpu.Weight{Rows: rows, Cols: cols, Type: gpu.F32}
	if t.Type == gguf.TypeF16 && cols%2 == 0 {
		w.Type = gpu.F16
		w.Buf, err = l.upload(t, data)
		return w, err
	}
	if t.Type == gguf.TypeF32 {
		w.Buf, err = l.upload(t, data)
		return w, err
	}
	v, err := float32s(t, data)
	if err != nil {
		return gpu.Weight{}, err
	}
	w.Buf, err = l.upload(t, gpu.Bytes(v))
	return w, err
}

func (l *loader) release() {
	for _, b := range l.bufs {
		b.Release()
	}
	l.bufs = nil
}
