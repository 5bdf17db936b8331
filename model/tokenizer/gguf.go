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
	keyFIMPre         = "tokenizer.ggml.fim_pre_token_id"
	keyFIMSuf         = "tokenizer.ggml.fim_suf_token_id"
	keyFIMMid         = "tokenizer.ggml.fim_mid_token_id"
	keyPrefix         = "tokenizer.ggml.prefix_token_id" // older names of fim_pre, fim_suf, fim_mid
	keySuffix         = "tokenizer.ggml.suffix_token_id"
	keyMiddle         = "tokenizer.ggml.middle_token_id"
	keyFIMPad         = "tokenizer.ggml.fim_pad_token_id"
	keyFIMRep         = "tokenizer.ggml.fim_rep_token_id"
	keyFIMSep         = "tokenizer.ggml.fim_sep_token_id"
	keyAddBOS         = "tokenizer.ggml.add_bos_token"
	keyAddEOS         = "tokenizer.ggml.add_eos_token"
	keyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
	keyName           = "general.name"
	keyPre            = "tokenizer.ggml.pre"
	keyMerges         = "tokenizer.ggml.merges"
	keySEP            = "tokenizer.ggml.seperator_token_id" // sic, as in GGUF and llama.cpp
	keyAddSEP         = "tokenizer.ggml.add_sep_token"
	keyLowercase      = "tokenizer.ggml.normalizer.lowercase"
	keyStripAccents   = "tokenizer.ggml.normalizer.strip_accents"
)

// modelDefaults are llama.cpp's per-model defaults for absent keys.
type modelDefaults struct {
	bos, eos, unk, sep, pad        int32
	addBOS, addSpacePrefix, addSEP bool
}

var defaultsByModel = map[string]modelDefaults{
	"llama": {bos: 1, eos: 2, unk: 0, sep: -1, pad: -1, addBOS: true, addSpacePrefix: true},
	"gpt2":  {bos: 11, eos: 11, unk: -1, sep: -1, pad: -1},
	"bert":  {bos: 101, eos: -1, unk: 100, sep: 102, pad: 0, addBOS: true, addSEP: true},
}

// FromGGUF loads the vocabulary stored in a model file, with llama.cpp's per-model defaults for
// absent keys (SentencePiece: BOS 1, EOS 2, UNK 0, add BOS and space prefix on; BPE: BOS and EOS
// 11, add BOS only for the pre-tokenizers llama.cpp adds it for; WordPiece: [CLS] 101 as BOS,
// UNK 100, SEP 102, PAD 0) and its tolerance of special ids outside the vocabulary, which fall
// back to those defaults.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	model, err := stringKey(f, keyModel)
	if err != nil {
		return nil, err
	}
	defs, ok := defaultsByModel[model]
	if !ok {
		return nil, fmt.Errorf("tokenizer model %q not supported yet (supported: llama, gpt2, bert)", model)
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
	if model == "gpt2" {
		if _, present := f.Lookup(keyPre); present {
			if v.Pre, err = stringKey(f, keyPre); err != nil {
				return nil, err
			}
		}
		pt, err := preTypeFor(v.Pre)
		if err != nil {
			return nil, err
		}
		defs.addBOS = pt.addBOS
		if v.Merges, ok = f.Strings(keyMerges); !ok {
			return nil, keyError(f, keyMerges, "array of strings")
		}
	}

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
		{keyBOS, &v.BOS, defs.bos}, {keyEOS, &v.EOS, defs.eos}, {keyEOT, &v.EOT, -1},
		{keyUNK, &v.UNK, defs.unk}, {keyPAD, &v.PAD, defs.pad}, {keySEP, &v.SEP, defs.sep},
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
	fimKeys := []struct {
		kind FIMKind
		keys []string
	}{
		{FIMPre, []string{keyFIMPre, keyPrefix}}, {FIMSuf, []string{keyFIMSuf, keySuffix}},
		{FIMMid, []string{keyFIMMid, keyMiddle}}, {FIMPad, []string{keyFIMPad}},
		{FIMRep, []string{keyFIMRep}}, {FIMSep, []string{keyFIMSep}},
	}
	for _, fk := range fimKeys {
		for _, key := range fk.keys {
			id, err := idKey(f, key, -1, n)
			if err != nil {
				return nil, err
			}
			if id >= 0 {
				if v.FIM == nil {
					v.FIM = map[FIMKind]int32{}
				}
				v.FIM[fk.kind] = id
				break
			}
		}
	}

	if v.AddBOS, err = boolKey(f, keyAddBOS, defs.addBOS); err != nil {
		return nil, err
	}
	if v.AddEOS, err = boolKey(f, keyAddEOS, false); err != nil {
		return nil, err
	}
	if v.AddSEP, err = boolKey(f, keyAddSEP, defs.addSEP); err != nil {
		return nil, err
	}
	if v.AddSpacePrefix, err = boolKey(f, keyAddSpacePrefix, defs.addSpacePrefix); err != nil {
		return nil, err
	}
	// BERT normaliser: accents are stripped exactly when lowercasing unless said otherwise.
	lowercase, err := boolKey(f, keyLowercase, true)
	if err != nil {
		return nil, err
	}
	stripAccents, err := boolKey(f, keyStripAccents, lowercase)
	if err != nil {
		return nil, err
	}
	v.KeepCase, v.KeepAccents = !lowercase, !stripAccents
	if v.AddBOS && v.BOS < 0 {
		return nil, fmt.Errorf("tokenizer: %s is true, but %s is not set", keyAddBOS, keyBOS)
	}
	if v.AddEOS && v.EOS < 0 {
		return nil, fmt.Errorf("tokenizer: %s is true, but %s is not set", keyAddEOS, keyEOS)
	}
	if v.AddSEP && v.SEP < 0 {
		return nil, fmt.Errorf("tokenizer: %s is true, but %s is not set", keyAddSEP, keySEP)
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
