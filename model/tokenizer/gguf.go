package tokenizer

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// GGUF metadata keys the tokenizer reads.
const (
	keyModel          = "tokenizer.ggml.model"
	keyTokens         = "tokenizer.ggml.tokens"
	keyScores         = "tokenizer.ggml.scores"
	keyTokenType      = "tokenizer.ggml.token_type"
	keyBOS            = "tokenizer.ggml.bos_token_id"
	keyEOS            = "tokenizer.ggml.eos_token_id"
	keyEOT            = "tokenizer.ggml.eot_token_id"
	keyEOM            = "tokenizer.ggml.eom_token_id"
	keyUNK            = "tokenizer.ggml.unknown_token_id"
	keyPAD            = "tokenizer.ggml.padding_token_id"
	keyFIMPad         = "tokenizer.ggml.fim_pad_token_id"
	keyFIMRep         = "tokenizer.ggml.fim_rep_token_id"
	keyFIMSep         = "tokenizer.ggml.fim_sep_token_id"
	keyAddBOS         = "tokenizer.ggml.add_bos_token"
	keyAddEOS         = "tokenizer.ggml.add_eos_token"
	keyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
	keyName           = "general.name"
)

// FromGGUF loads the vocabulary stored in a model file, with llama.cpp's defaults for absent
// keys (BOS 1, EOS 2, UNK 0, add BOS and space prefix on, EOS off) and its tolerance of special
// ids outside the vocabulary, which fall back to those defaults.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	model, err := stringKey(f, keyModel)
	if err != nil {
		return nil, err
	}
	if model != "llama" {
		return nil, fmt.Errorf("tokenizer model %q not supported yet (supported: llama)", model)
	}
	tokens, ok := f.Strings(keyTokens)
	if !ok {
		return nil, keyError(f, keyTokens, "array of strings")
	}
	n := len(tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: %s is empty", keyTokens)
	}
	v := Vocab{Model: model, Tokens: tokens}
	v.Name, _ = f.String(keyName)

	if _, present := f.Lookup(keyScores); present {
		scores, ok := f.Float32s(keyScores)
		if !ok {
			ints, isInt := f.Int32s(keyScores)
			if !isInt {
				return nil, keyError(f, keyScores, "array of float32 or int32")
			}
			scores = make([]float32, len(ints))
			for i, x := range ints {
				scores[i] = float32(x)
			}
		}
		if len(scores) < n {
			return nil, fmt.Errorf("tokenizer: %s has %d entries for %d tokens", keyScores, len(scores), n)
		}
		v.Scores = scores[:n]
	}
	if _, present := f.Lookup(keyTokenType); present {
		types, ok := f.Int32s(keyTokenType)
		if !ok {
			return nil, keyError(f, keyTokenType, "array of int32")
		}
		if len(types) < n {
			return nil, fmt.Errorf("tokenizer: %s has %d entries for %d tokens", keyTokenType, len(types), n)
		}
		v.Types = make([]TokenType, n)
		for i := range v.Types {
			v.Types[i] = TokenType(types[i])
		}
	}

	ids := []struct {
		key string
		dst *int32
		def int32
	}{
		{keyBOS, &v.BOS, 1}, {keyEOS, &v.EOS, 2}, {keyEOT, &v.EOT, -1},
		{keyUNK, &v.UNK, 0}, {keyPAD, &v.PAD, -1},
	}
	for _, s := range ids {
		if int(s.def) >= n {
			s.def = -1
		}
		if *s.dst, err = idKey(f, s.key, s.def, n); err != nil {
			return nil, err
		}
	}
	for _, key := range []string{keyEOM, keyFIMPad, keyFIMRep, keyFIMSep} {
		id, err := idKey(f, key, -1, n)
		if err != nil {
			return nil, err
		}
		if id >= 0 {
			v.EOG = append(v.EOG, id)
		}
	}

	if v.AddBOS, err = boolKey(f, keyAddBOS, true); err != nil {
		return nil, err
	}
	if v.AddEOS, err = boolKey(f, keyAddEOS, false); err != nil {
		return nil, err
	}
	if v.AddSpacePrefix, err = boolKey(f, keyAddSpacePrefix, true); err != nil {
		return nil, err
	}
	if v.AddBOS && v.BOS < 0 {
		return nil, fmt.Errorf("tokenizer: %s is true, but %s is not set", keyAddBOS, keyBOS)
	}
	if v.AddEOS && v.EOS < 0 {
		return nil, fmt.Errorf("tokenizer: %s is true, but %s is not set", keyAddEOS, keyEOS)
	}
	return New(v)
}

// keyError says whether key is missing or of the wrong type.
func keyError(f *gguf.File, key, want string) error {
	kv, ok := f.Lookup(key)
	if !ok {
		return fmt.Errorf("tokenizer: GGUF key %s is missing", key)
	}
	got := kv.Type.String()
	if a, isArray := kv.Value.(gguf.Array); isArray {
		got = "array of " + a.Elem.String()
	}
	return fmt.Errorf("tokenizer: GGUF key %s is %s, want %s", key, got, want)
}

func stringKey(f *gguf.File, key string) (string, error) {
	s, ok := f.String(key)
	if !ok {
		return "", keyError(f, key, "string")
	}
	return s, nil
}

func boolKey(f *gguf.File, key string, def bool) (bool, error) {
	if _, present := f.Lookup(key); !present {
		return def, nil
	}
	b, ok := f.Bool(key)
	if !ok {
		return false, keyError(f, key, "bool")
	}
	return b, nil
}

// idKey reads a special token id; like llama.cpp it keeps def for an id outside the vocabulary
// (converters write 0xFFFFFFFF for "none").
func idKey(f *gguf.File, key string, def int32, n int) (int32, error) {
	if _, present := f.Lookup(key); !present {
		return def, nil
	}
	i, ok := f.Int(key)
	if !ok {
		if _, isUint := f.Uint(key); !isUint {
			return 0, keyError(f, key, "integer")
		}
		return def, nil // a uint64 beyond int64: out of range anyway
	}
	if i < 0 || i >= int64(n) {
		return def, nil
	}
	return int32(i), nil
}
