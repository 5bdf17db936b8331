package cli

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// stdin is what --stdin reads; tests replace it.
var stdin io.Reader = os.Stdin

// runTokenize implements `wgpu-llama tokenize`, like llama.cpp's llama-tokenize: it tokenizes
// text with a model's vocabulary and prints one `%6d -> 'PIECE'` line per token, or with --ids
// the ids as "[1, 403, 407]". Only the vocabulary is read, so vocabulary-only GGUFs work and no
// GPU is needed.
func runTokenize(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tokenize", "wgpu-llama tokenize -m FILE [--ids|--pieces] [--no-bos] [--no-parse-special] [--show-count] (TEXT | -p TEXT | -f FILE | --stdin)", stderr)
	var (
		path, prompt, file             string
		ids, pieces, noBOS, showCount  bool
		parseSpecial, noParse, fromStd bool
	)
	stringVar(fs, &path, "", "model or vocabulary GGUF file (default: stories260K from the shared test data)", "m", "model")
	stringVar(fs, &prompt, "", "text to tokenize", "p", "prompt")
	stringVar(fs, &file, "", "read the text to tokenize from FILE, byte for byte", "f", "file")
	fs.BoolVar(&fromStd, "stdin", false, "read the text to tokenize from standard input, byte for byte")
	fs.BoolVar(&ids, "ids", false, "print only the token ids, as [1, 2, 3]")
	fs.BoolVar(&pieces, "pieces", false, `print only the pieces, as quoted strings: [" Once", " upon"]`)
	fs.BoolVar(&noBOS, "no-bos", false, "do not add the BOS (and other special tokens) the vocabulary asks for")
	fs.BoolVar(&parseSpecial, "parse-special", true, `read special-token text such as "<s>" as that token (the default)`)
	fs.BoolVar(&noParse, "no-parse-special", false, "treat special-token text as plain text")
	fs.BoolVar(&showCount, "show-count", false, "end with the number of tokens")

	texts, err := parseInterspersed(fs, args) // flags may come before or after TEXT
	if err != nil {
		return err
	}
	if len(texts) > 1 {
		return fmt.Errorf("tokenize: want one TEXT argument, got %d (quote the text)", len(texts))
	}
	if ids && pieces {
		return errors.New("tokenize: give --ids or --pieces, not both")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	sources := 0
	for _, given := range []bool{len(texts) == 1, set["p"] || set["prompt"], set["f"] || set["file"], fromStd} {
		if given {
			sources++
		}
	}
	if sources != 1 {
		fs.Usage()
		return fmt.Errorf("tokenize: give the text once, as TEXT, -p TEXT, -f FILE or --stdin (got %d)", sources)
	}

	var text string
	switch {
	case len(texts) == 1:
		text = texts[0]
	case fromStd:
		data, err := io.ReadAll(stdin)
		if err != nil {
			return fmt.Errorf("tokenize: reading standard input: %w", err)
		}
		text = string(data)
	case set["f"] || set["file"]:
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("tokenize: %w", err)
		}
		text = string(data)
	default:
		text = prompt
	}

	tok, err := loadTokenizer(path)
	if err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	toks := tok.Encode(text, !noBOS, parseSpecial && !noParse)

	w := bufio.NewWriter(stdout)
	switch {
	case ids:
		w.WriteByte('[')
		for i, id := range toks {
			if i > 0 {
				w.WriteString(", ")
			}
			w.WriteString(strconv.Itoa(int(id)))
		}
		w.WriteString("]\n")
	case pieces:
		w.WriteByte('[')
		for i, id := range toks {
			if i > 0 {
				w.WriteString(", ")
			}
			w.WriteString(strconv.Quote(string(tok.Piece(id, true))))
		}
		w.WriteString("]\n")
	default:
		// As llama-tokenize, pieces are written as they are, even when not valid UTF-8.
		for _, id := range toks {
			fmt.Fprintf(w, "%6d -> '%s'\n", id, tok.Piece(id, true))
		}
	}
	if showCount {
		fmt.Fprintf(w, "Total number of tokens: %d\n", len(toks))
	}
	return w.Flush()
}

// loadTokenizer reads only the vocabulary of the GGUF at path (the default model when empty).
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	if path == "" {
		var err error
		if path, err = defaultModel(); err != nil {
			return nil, err
		}
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tok, nil
}
