// Package seqstate reads and writes llama.cpp's sequence state files, as llama-server saves
// a slot (see the format below). It is the byte format alone, apart from the engine and its
// device, so that it can be tested and fuzzed on its own: it depends on nothing of the module.
package seqstate

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
//	    per cell: pos int32, n_seq_id uint32 = 1, for M-RoPE models (PosExt) the cell's 2-D
//	        position x, y int32 (a text token's: pos, pos), seq_id int32
//	    v_trans uint32 = 0, n_layer uint32
//	    per layer: key type int32 (ggml: 0 f32, 1 f16), row size uint64, cell_count rows
//	    per layer: value type int32, row size uint64, cell_count rows
//	a hybrid model's recurrent state (llama_memory_recurrent::state_write of one sequence):
//	    cell_count uint32: 1, or 0 without tokens
//	    per cell: pos int32 (the last token's), n_seq_id uint32 = 0
//	    s_trans uint32 = 0, n_layer uint32 (the model's blocks)
//	    per recurrent layer: conv state type int32 (0 f32), row size uint64, cell_count rows
//	    per recurrent layer: delta-rule state type int32, row size uint64, cell_count rows
//
// A file restores only where its layer count, types and row sizes match the cache's, and
// its cells are the positions 0 .. n_tokens-1 of its tokens.
const (
	Magic                     = 0x67677371 // "ggsq", LLAMA_STATE_SEQ_MAGIC
	Version                   = 2          // LLAMA_STATE_SEQ_VERSION
	packedTokensVersion       = 1          // SERVER_TOKENS_STATE_VERSION
	packedTokensMarker        = -1         // LLAMA_TOKEN_NULL, first word of a packed payload
	TypeF32, TypeF16    int32 = 0, 1       // ggml types of the rows
)

// Layout is what a slot file must agree with to restore into a cache: the engine's state
// that encoding and decoding need.
type Layout struct {
	KVType   int32 // the ggml type of the cache's rows (TypeF32 or TypeF16)
	Layers   int   // KV layers
	RowBytes []int // per KV layer, the bytes of one token's key (or value) row
	SlotCtx  int   // most tokens a slot holds
	NVocab   int   // tokens below this are valid
	// MediaToken is the first media placeholder id: ids from it on are valid too.
	MediaToken int32
	// PosExt marks a model that turns by M-RoPE positions (llama.cpp's n_pos_per_embd > 1),
	// whose cells carry a 2-D position.
	PosExt bool
	// StateLayers, for a hybrid model, is its recurrent layers (0: none), each with a conv
	// state row of ConvBytes and a delta-rule state row of SSMBytes, of Blocks in all.
	StateLayers, ConvBytes, SSMBytes, Blocks int
}

// StateBytes is a sequence's recurrent state in the layout's rows: every layer's conv row,
// then every layer's delta-rule row.
func (l Layout) StateBytes() int { return l.StateLayers * (l.ConvBytes + l.SSMBytes) }

// Encode writes a slot file of sequence id's tokens and their rows: k and v hold one slice per
// layer of len(tokens) rows each; state, for a hybrid model, the recurrent state after them
// (StateBytes; ignored without tokens).
func (l Layout) Encode(w io.Writer, id int, tokens []int32, k, v [][]byte, state []byte) error {
	bw := bufio.NewWriter(w)
	put := func(vals ...any) {
		for _, x := range vals {
			_ = binary.Write(bw, binary.LittleEndian, x) // bufio reports the first error at Flush
		}
	}
	put(uint32(Magic), uint32(Version), uint32(len(tokens)+4),
		int32(packedTokensMarker), uint32(packedTokensVersion), uint32(len(tokens)), tokens, uint32(0))
	put(uint32(1), uint32(len(tokens)))
	for pos := range tokens {
		put(int32(pos), uint32(1))
		if l.PosExt {
			put(int32(pos), int32(pos))
		}
		put(int32(id))
	}
	put(uint32(0), uint32(len(k)))
	for _, rows := range [][][]byte{k, v} {
		for i := range rows {
			put(l.KVType, uint64(l.RowBytes[i]))
			bw.Write(rows[i])
		}
	}
	if l.StateLayers > 0 {
		if len(tokens) > 0 && len(state) != l.StateBytes() {
			return fmt.Errorf("seqstate: a recurrent state of %d bytes, want %d", len(state), l.StateBytes())
		}
		cells := min(len(tokens), 1)
		put(uint32(cells))
		if cells > 0 {
			put(int32(len(tokens)-1), uint32(0))
		}
		put(uint32(0), uint32(l.Blocks))
		for part, size := range []int{l.ConvBytes, l.SSMBytes} {
			for i := range l.StateLayers {
				put(TypeF32, uint64(size))
				if cells > 0 {
					at := part*l.StateLayers*l.ConvBytes + i*size
					bw.Write(state[at : at+size])
				}
			}
		}
	}
	return bw.Flush()
}

// Decode checks a slot file against the layout and returns its tokens and rows. Every count
// the file gives is checked against the bytes that are left (or the slot's context) before it
// sizes anything, so a damaged or hostile file fails with an error and the memory used beyond
// data is at most the token list; the rows are slices of data.
func (l Layout) Decode(data []byte) (tokens []int32, k, v [][]byte, state []byte, err error) {
	tokens, k, v, rest, err := l.decodeKV(data)
	if err == nil && l.StateLayers == 0 && len(rest) != 0 {
		err = fmt.Errorf("%d unexpected bytes after the rows", len(rest))
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if l.StateLayers == 0 {
		return tokens, k, v, nil, nil
	}
	if state, err = l.decodeState(rest, len(tokens)); err != nil {
		return nil, nil, nil, nil, err
	}
	return tokens, k, v, state, nil
}

// decodeState reads the recurrent state that follows the rows of n tokens: nil for none.
func (l Layout) decodeState(data []byte, n int) ([]byte, error) {
	r := &byteReader{b: data}
	cells := int(r.u32())
	if r.err == nil && cells != min(n, 1) {
		return nil, fmt.Errorf("%d recurrent state cells for %d tokens", cells, n)
	}
	if cells > 0 {
		if pos, nSeq := int32(r.u32()), r.u32(); r.err == nil && (int(pos) != n-1 || nSeq != 0) {
			return nil, fmt.Errorf("the recurrent state is at position %d of %d sequences, want %d of the file's", pos, nSeq, n-1)
		}
	}
	if sTrans, blocks := r.u32(), int(r.u32()); r.err == nil && (sTrans != 0 || blocks != l.Blocks) {
		return nil, fmt.Errorf("a recurrent state of %d blocks (transposed %d), the model has %d", blocks, sTrans, l.Blocks)
	}
	state := make([]byte, 0, cells*l.StateBytes())
	for part, size := range []int{l.ConvBytes, l.SSMBytes} {
		for i := 0; i < l.StateLayers && r.err == nil; i++ {
			typ, got := int32(r.u32()), r.u64()
			if r.err == nil && (typ != TypeF32 || got != uint64(size)) {
				return nil, fmt.Errorf("%s state of recurrent layer %d: type %d of %d bytes, want type %d of %d",
					[]string{"conv", "delta-rule"}[part], i, typ, got, TypeF32, size)
			}
			state = append(state, r.bytes(cells*size)...)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d unexpected bytes after the recurrent state", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	if cells == 0 {
		return nil, nil
	}
	return state, nil
}

// decodeKV reads the tokens and KV rows, returning the bytes after them.
func (l Layout) decodeKV(data []byte) (tokens []int32, k, v [][]byte, rest []byte, err error) {
	r := &byteReader{b: data}
	if magic, ver := r.u32(), r.u32(); r.err != nil || magic != Magic {
		return nil, nil, nil, nil, errors.New("not a llama.cpp sequence state file")
	} else if ver != Version {
		return nil, nil, nil, nil, fmt.Errorf("state file version %d, this build reads version %d", ver, Version)
	}
	words := int(r.u32())
	if r.err == nil && words > len(r.b)/4 {
		return nil, nil, nil, nil, errors.New("file ends early")
	}
	payload := &byteReader{b: r.bytes(4 * words)}
	if tokens, err = unpackTokens(payload, words); err != nil {
		return nil, nil, nil, nil, err
	}
	n := len(tokens)
	if n > l.SlotCtx {
		return nil, nil, nil, nil, fmt.Errorf("%d tokens do not fit the slot's context of %d", n, l.SlotCtx)
	}
	for i, id := range tokens {
		if (id < 0 || int(id) >= l.NVocab) && id < l.MediaToken {
			return nil, nil, nil, nil, fmt.Errorf("token %d (at %d) out of range (vocabulary %d)", id, i, l.NVocab)
		}
	}
	if streams := r.u32(); r.err == nil && streams != 1 {
		return nil, nil, nil, nil, fmt.Errorf("%d KV streams, a slot file has 1", streams)
	}
	if cells := int(r.u32()); r.err == nil && cells != n {
		return nil, nil, nil, nil, fmt.Errorf("%d KV cells for %d tokens", cells, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		pos, nSeq := int32(r.u32()), r.u32()
		if l.PosExt {
			r.u64() // the 2-D position: rows from the first image on are not restored
		}
		r.u32() // the saving slot's sequence id: the cells go to the restoring slot
		if r.err == nil && (pos != int32(i) || nSeq != 1) {
			return nil, nil, nil, nil, fmt.Errorf("KV cell %d holds position %d of %d sequences, want position %d of 1", i, pos, nSeq, i)
		}
	}
	vTrans, layers := r.u32(), int(r.u32())
	if r.err == nil && vTrans != 0 {
		return nil, nil, nil, nil, errors.New("transposed values are not supported")
	}
	if r.err == nil && (layers != l.Layers || len(l.RowBytes) != l.Layers) {
		return nil, nil, nil, nil, fmt.Errorf("%d layers, the cache has %d", layers, l.Layers)
	}
	for part, rows := range []*[][]byte{&k, &v} {
		for i := 0; i < layers && r.err == nil; i++ {
			typ, size := int32(r.u32()), r.u64()
			if r.err == nil && (typ != l.KVType || size != uint64(l.RowBytes[i])) {
				return nil, nil, nil, nil, fmt.Errorf("%s rows of layer %d: type %d of %d bytes, the cache has type %d of %d",
					[]string{"key", "value"}[part], i, typ, size, l.KVType, l.RowBytes[i])
			}
			*rows = append(*rows, r.bytes(n*l.RowBytes[i]))
		}
	}
	if r.err != nil {
		return nil, nil, nil, nil, r.err
	}
	return tokens, k, v, r.b, nil
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
