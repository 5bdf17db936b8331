package cli

import (
	"flag"
	"io"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// TestServeEmbeddingFlags checks --embeddings (--embedding), --pooling and --reranking
// (--rerank), which means rank pooling, as llama-server's flags do.
func TestServeEmbeddingFlags(t *testing.T) {
	for _, tt := range []struct {
		args       []string
		embeddings bool
		pooling    string
		err        string
	}{
		{nil, false, "", ""},
		{[]string{"--embeddings"}, true, "", ""},
		{[]string{"--embedding", "--pooling", "mean"}, true, "mean", ""},
		{[]string{"--reranking"}, true, "rank", ""},
		{[]string{"--rerank", "--pooling", "rank"}, true, "rank", ""},
		{[]string{"--rerank", "--pooling", "cls"}, false, "", "--reranking pools by rank; --pooling cls contradicts it"},
		{[]string{"--embeddings", "--pooling", "max"}, false, "", `--pooling: pooling "max" not supported (supported: none, mean, cls, last, rank)`},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var ef embedFlags
		ef.register(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		var cfg engine.Config
		err := ef.apply(&cfg)
		switch {
		case tt.err != "":
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: %v, want %q", tt.args, err, tt.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case cfg.Embeddings != tt.embeddings || cfg.Pooling != tt.pooling:
			t.Errorf("%q: embeddings %v pooling %q, want %v %q", tt.args, cfg.Embeddings, cfg.Pooling, tt.embeddings, tt.pooling)
		}
	}
}
