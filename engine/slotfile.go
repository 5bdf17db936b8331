package engine

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// A slot file is llama.cpp's sequence state file, as llama-server writes it for a slot
// (llama_state_seq_save_file with the slot's tokens packed by server_tokens::serialize):
// little-endian,
//
//	magic "ggsq" (0x67677371), version 2: uint32 each
//	n_words uint32, then n_words int32: the token payload, either packed
//	    (-1, version 1, n_tokens, the tokens, 0 media chunks) or, in files of older servers,
//	    the plain token list
//	the sequence's KV cache (llama_kv_cache::state_write of one stream):
//	    n_stream = 1, cell_count: uint32 each
//	    per cell: pos int32, n_seq_id uint32 = 1, seq_id int32
//	    v_trans uint32 = 0, n_layer uint32
//	    per layer: key type int32 (ggml: 0 f32, 1 f16), row size uint64, cell_count rows
//	    per layer: value type int32, row size uint64, cell_count rows
//
// A file restores only where its layer count, types and row sizes match the cache's, and
// its cells are the positions 0 .. n_tokens-1 of its tokens.
const (
	slotFileMagic            = 0x67677371 // "ggsq", LLAMA_STATE_SEQ_MAGIC
	slotFileVersion          = 2          // LLAMA_STATE_SEQ_VERSION
	packedTokensVersion      = 1          // SERVER_TOKENS_STATE_VERSION
	packedTokensMarker       = -1         // LLAMA_TOKEN_NULL, first word of a packed payload
	ggmlTypeF32, ggmlTypeF16 = 0, 1
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
			return e.encodeSlot(w, s.id, tokens, k, v)
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
		// Image placeholders name images only within the process that made them: the rows from
		// the first one on are not trusted as a prefix (another image may have those ids now).
		for i, id := range tokens {
			if id >= model.MediaToken {
				tokens = tokens[:i]
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

// kvType is the ggml type of the cache's rows.
func (e *Engine) kvType() int32 {
	if e.model.KVRowBytes() == e.model.Config.NKVHead*e.model.Config.HeadDim*4 {
		return ggmlTypeF32
	}
	return ggmlTypeF16
}

// encodeSlot writes a slot file of slot id's tokens and their rows.
func (e *Engine) encodeSlot(w io.Writer, id int, tokens []int32, k, v [][]byte) error {
	bw := bufio.NewWriter(w)
	put := func(vals ...any) {
		for _, x := range vals {
			_ = binary.Write(bw, binary.LittleEndian, x) // bufio reports the first error at Flush
		}
	}
	put(uint32(slotFileMagic), uint32(slotFileVersion), uint32(len(tokens)+4),
		int32(packedTokensMarker), uint32(packedTokensVersion), uint32(len(tokens)), tokens, uint32(0))
	put(uint32(1), uint32(len(tokens)))
	for pos := range tokens {
		put(int32(pos), uint32(1), int32(id))
	}
	row := uint64(e.model.KVRowBytes())
	put(uint32(0), uint32(len(k)))
	for _, rows := range [][][]byte{k, v} {
		for l := range rows {
			put(e.kvType(), row)
			bw.Write(rows[l])
		}
	}
	return bw.Flush()
}

// decodeSlot checks a slot file against this engine and returns its tokens and rows.
func (e *Engine) decodeSlot(data []byte) (tokens []int32, k, v [][]byte, err error) {
	r := &byteReader{b: data}
	if magic, ver := r.u32(), r.u32(); r.err != nil || magic != slotFileMagic {
		return nil, nil, nil, errors.New("not a llama.cpp sequence state file")
	} else if ver != slotFileVersion {
		return nil, nil, nil, fmt.Errorf("state file version %d, this build reads version %d", ver, slotFileVersion)
	}
	words := int(r.u32())
	if r.err == nil && words > len(r.b)/4 {
		return nil, nil, nil, errors.New("file ends early")
	}
	payload := &byteReader{b: r.bytes(4 * words)}
	if tokens, err = unpackTokens(payload, words); err != nil {
		return nil, nil, nil, err
	}
	n := len(tokens)
	if n > e.slotCtx {
		return nil, nil, nil, fmt.Errorf("%d tokens do not fit the slot's context of %d", n, e.slotCtx)
	}
	for i, id := range tokens {
		if (id < 0 || int(id) >= e.info.NVocab) && id < model.MediaToken {
			return nil, nil, nil, fmt.Errorf("token %d (at %d) out of range (vocabulary %d)", id, i, e.info.NVocab)
		}
	}
	if streams := r.u32(); r.err == nil && streams != 1 {
		return nil, nil, nil, fmt.Errorf("%d KV streams, a slot file has 1", streams)
	}
	if cells := int(r.u32()); r.err == nil && cells != n {
		return nil, nil, nil, fmt.Errorf("%d KV cells for %d tokens", cells, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		pos, nSeq := int32(r.u32()), r.u32()
		r.u32() // the saving slot's sequence id: the cells go to the restoring slot
		if r.err == nil && (pos != int32(i) || nSeq != 1) {
			return nil, nil, nil, fmt.Errorf("KV cell %d holds position %d of %d sequences, want position %d of 1", i, pos, nSeq, i)
		}
	}
	vTrans, layers := r.u32(), int(r.u32())
	if r.err == nil && vTrans != 0 {
		return nil, nil, nil, errors.New("transposed values are not supported")
	}
	if r.err == nil && layers != e.model.KVLayers() {
		return nil, nil, nil, fmt.Errorf("%d layers, the cache has %d", layers, e.model.KVLayers())
	}
	row := e.model.KVRowBytes()
	for part, rows := range []*[][]byte{&k, &v} {
		for l := 0; l < layers && r.err == nil; l++ {
			typ, size := int32(r.u32()), r.u64()
			if r.err == nil && (typ != e.kvType() || size != uint64(row)) {
				return nil, nil, nil, fmt.Errorf("%s rows of layer %d: type %d of %d bytes, the cache has type %d of %d",
					[]string{"key", "value"}[part], l, typ, size, e.kvType(), row)
			}
			*rows = append(*rows, r.bytes(n*row))
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d unexpected bytes after the rows", len(r.b))
	}
	if r.err != nil {
		return nil, nil, nil, r.err
	}
	return tokens, k, v, nil
}

// unpackTokens reads a state file's token payload of words int32: llama-server's packed
// server_tokens, or the plain token list older servers wrote.
func unpackTokens(r *byteReader, words int) ([]int32, error) {
	ids := func(n int) []int32 {
		raw := r.bytes(4 * n)
		out := make([]int32, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			out = append(out, int32(binary.LittleEndian.Uint32(raw[4*i:])))
		}
		return out
	}
	if len(r.b) < 4 || int32(binary.LittleEndian.Uint32(r.b)) != packedTokensMarker {
		return ids(words), r.err
	}
	r.u32()
	if ver := r.u32(); r.err == nil && ver != packedTokensVersion {
		return nil, fmt.Errorf("packed tokens version %d, this build reads version %d", ver, packedTokensVersion)
	}
	n := int(r.u32())
	if r.err == nil && n > len(r.b)/4 {
		return nil, errors.New("the token payload ends early")
	}
	tokens := ids(n)
	if media := r.u32(); r.err == nil && media != 0 {
		return nil, fmt.Errorf("%d media chunks: restoring media needs a multimodal projector", media)
	}
	if r.err == nil && len(r.b) != 0 {
		return nil, fmt.Errorf("%d unexpected bytes after the packed tokens", len(r.b))
	}
	return tokens, r.err
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

func (r *byteReader) u64() uint64 {
	b := r.bytes(8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
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
