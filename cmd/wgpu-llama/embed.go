package main

import (
	"fmt"
	"io"
	"strings"
)

// runEmbed implements `wgpu-llama embed`, like llama.cpp's llama-embedding: the pooled,
// L2-normalised embedding of the prompt from an encoder model (BERT), printed on one line.
func runEmbed(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("embed", "wgpu-llama embed -m FILE -p TEXT", stderr)
	var (
		mf     modelFlags
		prompt string
	)
	mf.register(fs)
	stringVar(fs, &prompt, "", "text to embed", "p", "prompt")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, _, closeModel, err := mf.loadModel(stderr, 1)
	if err != nil {
		return err
	}
	defer closeModel()
	tokens := m.Tokenizer.Encode(prompt, true, true)
	kv, err := m.NewKVCache(max(len(tokens), 1))
	if err != nil {
		return err
	}
	defer kv.Release()
	emb, err := m.Embed(kv, tokens)
	if err != nil {
		return err
	}
	var sb strings.Builder
	sb.WriteString("embedding 0:")
	for _, v := range emb {
		fmt.Fprintf(&sb, " %9.6f", v)
	}
	sb.WriteByte('\n')
	_, err = io.WriteString(stdout, sb.String())
	return err
}
