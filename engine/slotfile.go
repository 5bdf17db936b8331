package engine

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// A slot file holds a slot's cached tokens and their KV cache rows, so that a later request
// sharing the prefix skips evaluating it. Layout, little-endian:
//
//	magic "WGLLSLOT", version uint32
//	identity: uint32 length, then the model identity text (see modelIdentity)
//	n_tokens, row_bytes, n_layers: uint32 each
//	tokens: n_tokens int32
//	per layer: n_tokens key rows, then n_tokens value rows (row_bytes each)
//	CRC-32 (IEEE) of everything before it: uint32
const (
	slotFileMagic   = "WGLLSLOT"
	slotFileVersion = 1
)

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

// modelIdentity describes the loaded model's shape and KV layout; a slot file restores only
// into an engine with the same identity. It is not a hash of the weights: two models of the
// same architecture, sizes and type (a base model and its fine-tune) pass it.
func (e *Engine) modelIdentity() string {
	c := e.model.Config
	return fmt.Sprintf("arch=%s n_layer=%d n_embd=%d n_head_kv=%d head_dim=%d n_vocab=%d n_params=%d size=%d ftype=%s kv_row=%d",
		c.Arch, c.NLayer, c.NEmbd, c.NKVHead, c.HeadDim, e.info.NVocab, e.info.NParams, e.info.Size, e.info.FileType, e.model.KVRowBytes())
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
		n, err := writeFileAtomic(path, func(w io.Writer) error {
			return e.encodeSlot(w, tokens, k, v)
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
		tokens, k, v, err := e.decodeSlot(data)
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
		if err := e.writeSlotRows(s, k, v); err != nil {
			e.truncate(s, 0) // the rows may be half written
			e.noteSlots()
			return err
		}
		s.cached = tokens
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
	row := e.model.KVRowBytes()
	tok := 0
	for _, sp := range e.slotRows(s, len(k[0])/row) {
		n := sp.end - sp.start
		if n == 0 {
			continue
		}
		ks, vs := make([][]byte, len(k)), make([][]byte, len(v))
		for l := range k {
			ks[l], vs[l] = k[l][tok*row:(tok+n)*row], v[l][tok*row:(tok+n)*row]
		}
		if err := e.model.WriteKVRows(e.kv, sp.start, ks, vs); err != nil {
			return err
		}
		tok += n
	}
	return nil
}

// encodeSlot writes a slot file.
func (e *Engine) encodeSlot(w io.Writer, tokens []int32, k, v [][]byte) error {
	crc := crc32.NewIEEE()
	bw := bufio.NewWriter(io.MultiWriter(w, crc))
	id := e.modelIdentity()
	put := func(vals ...any) {
		for _, x := range vals {
			_ = binary.Write(bw, binary.LittleEndian, x) // bufio reports the first error at Flush
		}
	}
	bw.WriteString(slotFileMagic)
	put(uint32(slotFileVersion), uint32(len(id)))
	bw.WriteString(id)
	put(uint32(len(tokens)), uint32(e.model.KVRowBytes()), uint32(len(k)), tokens)
	for l := range k {
		bw.Write(k[l])
		bw.Write(v[l])
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return binary.Write(w, binary.LittleEndian, crc.Sum32())
}

// decodeSlot checks a slot file against this engine and returns its tokens and rows.
func (e *Engine) decodeSlot(data []byte) (tokens []int32, k, v [][]byte, err error) {
	if len(data) < len(slotFileMagic)+4 || string(data[:len(slotFileMagic)]) != slotFileMagic {
		return nil, nil, nil, errors.New("not a slot file")
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, nil, nil, errors.New("checksum mismatch (truncated or damaged)")
	}
	r := &byteReader{b: body[len(slotFileMagic):]}
	if ver := r.u32(); ver != slotFileVersion {
		return nil, nil, nil, fmt.Errorf("version %d, this build reads version %d", ver, slotFileVersion)
	}
	id := string(r.bytes(int(r.u32())))
	if want := e.modelIdentity(); r.err == nil && id != want {
		return nil, nil, nil, fmt.Errorf("saved from another model (%s); this one is %s", id, want)
	}
	n, row, layers := int(r.u32()), int(r.u32()), int(r.u32())
	if r.err != nil {
		return nil, nil, nil, r.err
	}
	if n > e.slotCtx {
		return nil, nil, nil, fmt.Errorf("%d tokens do not fit the slot's context of %d", n, e.slotCtx)
	}
	if row != e.model.KVRowBytes() || layers != e.model.KVLayers() {
		return nil, nil, nil, fmt.Errorf("rows of %d bytes in %d layers, the cache has %d in %d", row, layers, e.model.KVRowBytes(), e.model.KVLayers())
	}
	raw := r.bytes(4 * n)
	for i := 0; i < n && r.err == nil; i++ {
		id := int32(binary.LittleEndian.Uint32(raw[4*i:]))
		if id < 0 || int(id) >= e.info.NVocab {
			return nil, nil, nil, fmt.Errorf("token %d out of range (vocabulary %d)", id, e.info.NVocab)
		}
		tokens = append(tokens, id)
	}
	for l := 0; l < layers; l++ {
		k, v = append(k, r.bytes(n*row)), append(v, r.bytes(n*row))
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d unexpected bytes after the rows", len(r.b))
	}
	if r.err != nil {
		return nil, nil, nil, r.err
	}
	return tokens, k, v, nil
}

// byteReader reads little-endian fields, remembering the first short read.
type byteReader struct {
	b   []byte
	err error
}

func (r *byteReader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errors.New("file ends early")
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *byteReader) u32() uint32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
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
