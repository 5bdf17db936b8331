package quantize

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// QuantizationVersion is ggml's GGML_QNT_VERSION, which llama-quantize stores as
// general.quantization_version in every file it writes.
const QuantizationVersion = 2

// Progress reports one tensor written, for llama-quantize-style per-tensor lines.
type Progress struct {
	// Index counts from 1 to Count in file order.
	Index, Count int
	// Plan is the tensor's name, shape and type change, for the per-tensor line.
	Plan TensorPlan
	// OldSize and NewSize are the tensor's bytes before and after.
	OldSize, NewSize uint64
}

// Summary totals a conversion, for the "model size / quant size" lines.
type Summary struct {
	// Plans lists the tensors in output order.
	Plans []TensorPlan
	// Elements counts all tensor elements (for bits per weight).
	Elements uint64
	// OldSize and NewSize sum the tensor data bytes, padding excluded.
	OldSize, NewSize uint64
	// Fallbacks counts tensors whose row length forced another type than the mix wanted.
	Fallbacks int
}

// KVs returns the metadata of a converted file: the input's, with general.file_type set to the
// mix and general.quantization_version to QuantizationVersion, both moved to the end as
// llama-quantize's gguf_set_val does.
func KVs(in []gguf.KV, mix Mix) []gguf.KV {
	out := make([]gguf.KV, 0, len(in)+2)
	for _, kv := range in {
		if kv.Key != "general.quantization_version" && kv.Key != "general.file_type" {
			out = append(out, kv)
		}
	}
	return append(out,
		gguf.KV{Key: "general.quantization_version", Type: gguf.TypeUint32, Value: uint32(QuantizationVersion)},
		gguf.KV{Key: "general.file_type", Type: gguf.TypeUint32, Value: mix.FileType()})
}

// File writes in converted to mix as a GGUF image to w, tensor by tensor (one batch of rows in
// memory at a time), in llama-quantize's tensor order. Each converted tensor is dequantized to
// float32 and quantized again; tensors that keep their type are copied. progress, if not nil,
// is called after each tensor.
func File(in *gguf.File, w io.Writer, mix Mix, progress func(Progress)) (Summary, error) {
	kvs, srcs, sum, err := sources(in, mix, progress)
	if err == nil {
		err = gguf.WriteStream(w, kvs, srcs)
	}
	return *sum, err
}

// Path converts the GGUF file at inPath to mix and writes it to outPath, through a temporary
// file renamed into place once complete.
func Path(inPath, outPath string, mix Mix, progress func(Progress)) (Summary, error) {
	in, err := gguf.Open(inPath)
	if err != nil {
		return Summary{}, err
	}
	defer in.Close()
	kvs, srcs, sum, err := sources(in, mix, progress)
	if err == nil {
		err = gguf.WriteFileStream(outPath, kvs, srcs)
	}
	return *sum, err
}

// sources plans the conversion and returns the output metadata and tensor sources; the
// Summary fills in as the sources are written.
func sources(in *gguf.File, mix Mix, progress func(Progress)) ([]gguf.KV, []gguf.TensorSource, *Summary, error) {
	sum := &Summary{}
	plans, err := Plan(in, mix)
	if err != nil {
		return nil, nil, sum, err
	}
	sum.Plans = plans
	for _, p := range plans {
		if p.Converts() && !p.From.CanDequantize() {
			return nil, nil, sum, fmt.Errorf("quantize: tensor %s has type %s, which cannot be converted (to %s): %w",
				p.Name, p.From, p.To, gguf.ErrUnsupportedType)
		}
		if p.Converts() && !p.To.CanQuantize() {
			return nil, nil, sum, fmt.Errorf("quantize: tensor %s: cannot write type %s: %w", p.Name, p.To, gguf.ErrUnsupportedType)
		}
		if p.Fallback() {
			sum.Fallbacks++
		}
	}
	srcs := make([]gguf.TensorSource, len(plans))
	for i, p := range plans {
		info, _ := in.Tensor(p.Name)
		data := in.TensorData(info)
		if data == nil {
			return nil, nil, sum, fmt.Errorf("quantize: tensor %s: data unavailable (file closed?)", p.Name)
		}
		srcs[i] = gguf.TensorSource{Name: p.Name, Shape: p.Shape, Type: p.To, Write: func(w io.Writer) error {
			if err := convertTensor(w, p, data); err != nil {
				return fmt.Errorf("quantize: tensor %s (%s to %s): %w", p.Name, p.From, p.To, err)
			}
			newSize := p.Size()
			sum.Elements += p.Elements()
			sum.OldSize += uint64(len(data))
			sum.NewSize += newSize
			if progress != nil {
				progress(Progress{Index: i + 1, Count: len(plans), Plan: p, OldSize: uint64(len(data)), NewSize: newSize})
			}
			return nil
		}}
	}
	return KVs(in.KV, mix), srcs, sum, nil
}

func convertTensor(w io.Writer, p TensorPlan, data []byte) error {
	if !p.Converts() {
		_, err := w.Write(data)
		return err
	}
	rowLen := p.Shape[0]
	nrows := p.Elements() / rowLen
	inRow, _ := p.From.RowSize(rowLen)
	return Rows(w, p.To, rowLen, nrows, func(dst []float32, row uint64) error {
		n := uint64(len(dst)) / rowLen
		return gguf.Dequantize(p.From, data[row*inRow:(row+n)*inRow], dst)
	})
}

// partElems is the number of elements one worker fills and converts at a time: large enough
// to amortise goroutine hand-offs, small enough that all workers together stay in cache-sized
// buffers (a few MiB) whatever the tensor's size.
const partElems = 1 << 18

// Rows writes nrows rows of rowLen float32 values, converted to type t, to w in row order.
// fill must set dst to the values of the len(dst)/rowLen rows starting at row; it is called
// concurrently for disjoint rows, so every CPU fills and converts its own part of a batch while
// memory stays bounded for tensors of any size.
func Rows(w io.Writer, t gguf.GGMLType, rowLen, nrows uint64, fill func(dst []float32, row uint64) error) error {
	if rowLen == 0 || rowLen%t.BlockSize() != 0 {
		return fmt.Errorf("row length %d is not a multiple of the %s block size %d", rowLen, t, t.BlockSize())
	}
	workers := runtime.GOMAXPROCS(0)
	partRows := max(1, partElems/rowLen)
	bufs := make([][]float32, workers)
	outs := make([][]byte, workers)
	errs := make([]error, workers)
	for row := uint64(0); row < nrows; {
		var wg sync.WaitGroup
		parts := 0
		for k := 0; k < workers && row < nrows; k++ {
			n := min(partRows, nrows-row)
			if uint64(cap(bufs[k])) < n*rowLen {
				bufs[k] = make([]float32, n*rowLen)
			}
			buf, start := bufs[k][:n*rowLen], row
			wg.Go(func() {
				if errs[k] = fill(buf, start); errs[k] == nil {
					outs[k], errs[k] = gguf.Quantize(t, buf)
				}
			})
			row += n
			parts++
		}
		wg.Wait()
		if err := errors.Join(errs[:parts]...); err != nil {
			return err
		}
		for _, o := range outs[:parts] {
			if _, err := w.Write(o); err != nil {
				return err
			}
		}
	}
	return nil
}
