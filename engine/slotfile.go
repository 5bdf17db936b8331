package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine/internal/seqstate"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// A slot file is llama.cpp's sequence state file (package seqstate has the format). A file
// restores only where its layer count, types and row sizes match the cache's, and its cells
// are the positions 0 .. n_tokens-1 of its tokens.

// ErrSlotFile marks a slot file that cannot be restored: unreadable, damaged, saved from
// another model or too long for the slot.
var ErrSlotFile = errors.New("engine: invalid slot file")

// SlotFile says what a slot save or restore moved.
type SlotFile struct {
	// Tokens is the number of tokens saved or restored.
	Tokens int
	// Bytes is the size of the file written or read.
	Bytes int64
	// Took is how long the save or restore took.
	Took time.Duration
}

// SaveSlot writes what slot id holds in the KV cache to path (replacing it atomically). It
// waits for a request running in the slot to finish.
func (e *Engine) SaveSlot(ctx context.Context, id int, path string) (SlotFile, error) {
	s, err := e.slotByID(id)
	if err != nil {
		return SlotFile{}, err
	}
	var res SlotFile
	err = e.do(ctx, s, func() error {
		start := time.Now()
		tokens := append([]int32(nil), s.cached...)
		k, v, err := e.readSlotRows(s, len(tokens))
		if err != nil {
			return err
		}
		var state []byte // a recurrent model's state after the tokens
		if e.recurrent && len(tokens) > 0 {
			if state, err = e.model.ReadState(e.kv, s.id); err != nil {
				return err
			}
		}
		n, err := writeFileAtomic(path, func(w io.Writer) error {
			return e.slotLayout().Encode(w, s.id, tokens, k, v, state)
		})
		if err != nil {
			return err
		}
		res = SlotFile{Tokens: len(tokens), Bytes: n, Took: time.Since(start)}
		return nil
	})
	return res, err
}

// RestoreSlot loads a slot file saved by SaveSlot into slot id, replacing what the slot held.
// It waits for a request running in the slot to finish. A file that cannot be restored fails
// with ErrSlotFile and leaves the slot as it was.
func (e *Engine) RestoreSlot(ctx context.Context, id int, path string) (SlotFile, error) {
	s, err := e.slotByID(id)
	if err != nil {
		return SlotFile{}, err
	}
	var res SlotFile
	err = e.do(ctx, s, func() error {
		start := time.Now()
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrSlotFile, err)
		}
		tokens, k, v, state, err := e.slotLayout().Decode(data)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrSlotFile, filepath.Base(path), err)
		}
		// The slot's own pages, none shared: the restored rows overwrite them.
		e.truncate(s, 0)
		if got := e.reserve(s, len(tokens), new([]model.RowCopy)); got < len(tokens) {
			e.truncate(s, 0)
			e.noteSlots()
			return fmt.Errorf("%w: %d tokens to restore, room for %d", errCacheFull, len(tokens), got)
		}
		err = e.writeSlotRows(s, k, v)
		if err == nil && state != nil {
			err = e.model.WriteState(e.kv, s.id, state)
		}
		if err != nil {
			e.truncate(s, 0) // the rows may be half written
			e.noteSlots()
			return err
		}
		// Image placeholders name images only within the process that made them: the rows from
		// the first one on are not trusted as a prefix (another image may have those ids now).
		for i, id := range tokens {
			if id >= model.MediaToken {
				tokens = tokens[:i]
				if e.recurrent { // the state is the whole file's: no prefix of it is had
					tokens = nil
				}
				break
			}
		}
		// A slot file does not say which adapter scales made its rows (llama.cpp's format has no
		// room for it): they are taken for the base model's, as llama-server takes them.
		s.cached, s.lora = tokens, ""
		e.noteSlots()
		res = SlotFile{Tokens: len(tokens), Bytes: int64(len(data)), Took: time.Since(start)}
		return nil
	})
	return res, err
}

// readSlotRows reads the KV rows of slot s's first n tokens, per layer in token order.
func (e *Engine) readSlotRows(s *slot, n int) (k, v [][]byte, err error) {
	k, v = make([][]byte, e.model.KVLayers()), make([][]byte, e.model.KVLayers())
	for _, sp := range e.slotRows(s, n) {
		if sp.end == sp.start {
			continue
		}
		ks, vs, err := e.model.ReadKVRows(e.kv, sp.start, sp.end)
		if err != nil {
			return nil, nil, err
		}
		for l := range k {
			k[l], v[l] = append(k[l], ks[l]...), append(v[l], vs[l]...)
		}
	}
	return k, v, nil
}

// writeSlotRows writes per-layer rows, in token order, into the rows of slot s.
func (e *Engine) writeSlotRows(s *slot, k, v [][]byte) error {
	rows := e.model.KVRows()
	tok := 0
	for _, sp := range e.slotRows(s, len(k[0])/rows[0]) {
		n := sp.end - sp.start
		if n == 0 {
			continue
		}
		ks, vs := make([][]byte, len(k)), make([][]byte, len(v))
		for l := range k {
			row := rows[l]
			ks[l], vs[l] = k[l][tok*row:(tok+n)*row], v[l][tok*row:(tok+n)*row]
		}
		if err := e.model.WriteKVRows(e.kv, sp.start, ks, vs); err != nil {
			return err
		}
		tok += n
	}
	return nil
}

// slotLayout is the layout of the engine's cache that a slot file must agree with.
func (e *Engine) slotLayout() seqstate.Layout {
	typ := seqstate.TypeF32
	if e.model.KVF16() {
		typ = seqstate.TypeF16
	}
	st := e.model.StateShape()
	return seqstate.Layout{KVType: typ, Layers: e.model.KVLayers(), RowBytes: e.model.KVRows(), SlotCtx: e.slotCtx,
		NVocab: e.info.NVocab, MediaToken: model.MediaToken, PosExt: e.model.Config.MRoped(),
		StateLayers: st.Layers, ConvBytes: st.ConvBytes, SSMBytes: st.SSMBytes, Blocks: st.Blocks}
}

// writeFileAtomic writes a file through write into a temporary file beside path and renames
// it over path, so that readers see the old file or the whole new one. It returns the size.
// The temporary name does not grow with path's, so any name the file system takes for path
// (up to 255 bytes) works.
func writeFileAtomic(path string, write func(io.Writer) error) (int64, error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".slot-*.tmp")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if err := write(f); err != nil {
		f.Close()
		return 0, err
	}
	n, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	return n, err
}
