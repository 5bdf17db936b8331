package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// runComplete implements `wgpu-llama complete`: like llama.cpp's llama-completion, it prints
// the prompt and then the generated text to stdout as it comes, and logs to stderr.
func runComplete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("complete", "wgpu-llama complete -m FILE -p PROMPT [-n N] [--temp T] [--seed S] [-md DRAFT | --spec-type ngram-simple]", stderr)
	var (
		mf                    modelFlags
		sf                    specFlags
		prompt                string
		nPredict, topK, seed  int
		temp, topP, minP      float64
		noSpecials, ignoreEOS bool
	)
	mf.register(fs)
	sf.register(fs)
	stringVar(fs, &prompt, "", "prompt text", "p", "prompt")
	intVar(fs, &nPredict, -1, "tokens to generate (-1: until end of generation or a full context)", "n", "n-predict")
	floatVar(fs, &temp, 0.8, "temperature (0: greedy)", "temp", "temperature")
	intVar(fs, &topK, 40, "top-k sampling (0: off)", "top-k")
	floatVar(fs, &topP, 0.95, "top-p sampling (1: off)", "top-p")
	floatVar(fs, &minP, 0.05, "min-p sampling (0: off)", "min-p")
	intVar(fs, &seed, -1, "sampling seed (-1: random)", "s", "seed")
	fs.BoolVar(&ignoreEOS, "ignore-eos", false, "keep generating past end-of-generation tokens")
	fs.BoolVar(&noSpecials, "no-parse-special", false, "treat special-token text in the prompt as plain text")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger := newLogger(stderr, mf.verbose)
	cfg, err := mf.engineConfig("", logger)
	if err != nil {
		return err
	}
	if cfg.Speculative, err = sf.config(); err != nil {
		return err
	}
	eng, err := engine.Load(ctx, cfg)
	if err != nil {
		return err
	}
	defer eng.Close()

	tok := eng.Tokenizer()
	ids := tok.Encode(prompt, true, !noSpecials)
	p := engine.DefaultParams()
	p.NPredict, p.Temperature, p.TopK, p.TopP, p.MinP = nPredict, float32(temp), topK, float32(topP), float32(minP)
	p.Seed, p.IgnoreEOS = engine.SeedRandom, ignoreEOS
	if seed >= 0 {
		p.Seed = uint32(seed)
	}
	ch, err := eng.Submit(ctx, engine.Task{Prompt: ids, Params: p})
	if err != nil {
		return err
	}
	// The prompt is echoed as its token pieces, special tokens hidden, as llama.cpp prints it.
	for _, id := range ids {
		if _, err := stdout.Write(tok.Piece(id, false)); err != nil {
			return err
		}
	}
	var final engine.Result
	for r := range ch {
		if _, err := io.WriteString(stdout, r.Text); err != nil {
			return err
		}
		final = r
	}
	fmt.Fprint(stdout, "\n\n")
	if final.Err != nil {
		return final.Err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	tm := final.Timings
	logger.Info("done", "stop", final.StopType,
		"prompt_tokens", tm.PromptN, "prompt_tps", perSecond(tm.PromptN, tm.Prompt.Seconds()),
		"predicted_tokens", tm.PredictedN, "predicted_tps", perSecond(tm.PredictedN, tm.Predicted.Seconds()))
	if eng.Info().SpecType != engine.SpecNone {
		rate := "-"
		if tm.DraftN > 0 {
			rate = fmt.Sprintf("%.3f", float64(tm.DraftNAccepted)/float64(tm.DraftN))
		}
		logger.Info("draft acceptance", "rate", rate, "accepted", tm.DraftNAccepted, "drafted", tm.DraftN, "type", eng.Info().SpecType)
	}
	return nil
}

func perSecond(n int, sec float64) string {
	if sec <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(n)/sec)
}
