package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// runEmbed implements `wgpu-llama embed`, like llama.cpp's llama-embedding: the embedding of
// the prompt, normalised (Euclidean by default), printed one vector per line. Pooling is the
// model file's unless --pooling says otherwise; with none (a decoder's default) every token
// gets its own line.
func runEmbed(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("embed", "wgpu-llama embed -m FILE -p TEXT [--pooling none|mean|cls|last] [--embd-normalize N]", stderr)
	var (
		mf             modelFlags
		prompt, pool   string
		embdNormalize  int
		defaultPooling = "the model's"
	)
	mf.register(fs)
	stringVar(fs, &prompt, "", "text to embed", "p", "prompt")
	stringVar(fs, &pool, defaultPooling, "pooling: none, mean, cls or last", "pooling")
	intVar(fs, &embdNormalize, model.NormEuclidean, "normalisation: -1 none, 0 max absolute (int16 range), 1 taxicab, 2 Euclidean, >2 p-norm", "embd-normalize")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, _, closeModel, err := mf.loadModel(stderr, 1, nil)
	if err != nil {
		return err
	}
	defer closeModel()
	pooling := m.Config.Pooling
	if pool != defaultPooling {
		if pooling, err = model.ParsePooling(pool); err != nil {
			return fmt.Errorf("--pooling: %w", err)
		}
	}
	if pooling == model.PoolRank {
		return errors.New("embed: rank pooling scores a query and a document: serve the model with --reranking and use /v1/rerank")
	}
	tokens := m.Tokenizer.Encode(prompt, true, true)
	if len(tokens) == 0 {
		return errors.New("embed: the prompt has no tokens")
	}
	kv, err := m.NewKVCache(len(tokens))
	if err != nil {
		return err
	}
	defer kv.Release()
	b := model.Batch{Tokens: tokens, Pos: make([]int32, len(tokens)), Base: make([]int32, len(tokens))}
	for i := range b.Pos {
		b.Pos[i] = int32(i)
	}
	hidden, err := m.ForwardEmbed(kv, b)
	if err != nil {
		return err
	}
	n := m.Config.NEmbd
	vectors := [][]float32{model.Pool(hidden, n, pooling)}
	if pooling == model.PoolNone {
		vectors = vectors[:0]
		for i := range tokens {
			vectors = append(vectors, hidden[i*n:(i+1)*n])
		}
	}
	var sb strings.Builder
	for i, v := range vectors {
		fmt.Fprintf(&sb, "embedding %d:", i)
		for _, x := range model.Normalize(v, embdNormalize) {
			fmt.Fprintf(&sb, " %9.6f", x)
		}
		sb.WriteByte('\n')
	}
	_, err = io.WriteString(stdout, sb.String())
	return err
}
