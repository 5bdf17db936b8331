package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
)

// TestJSONSchemaConstraint samples with 100 seeds under a JSON-schema grammar on stories260K
// (which has never seen JSON: every token comes from the grammar's pressure) and checks each
// output is JSON that satisfies the schema.
func TestJSONSchemaConstraint(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	schema := `{"type":"object","properties":{"name":{"type":"string","maxLength":8},
		"age":{"type":"integer","minimum":0,"maximum":120},"pet":{"enum":["cat","dog"]}},
		"required":["name","age"]}`
	src, err := grammar.FromJSONSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	prompt := e.Tokenizer().Encode("Once upon a time", true, true)
	for seed := uint32(0); seed < 100; seed++ {
		p := engine.DefaultParams()
		p.Seed, p.NPredict, p.Grammar = seed, 400, g
		ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		text, final, _ := collect(t, ch)
		if final.Err != nil || final.StopType != engine.StopEOS {
			t.Fatalf("seed %d: stop %s err %v after %q", seed, final.StopType, final.Err, text)
		}
		var v struct {
			Name *string `json:"name"`
			Age  *int    `json:"age"`
			Pet  *string `json:"pet"`
		}
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			t.Fatalf("seed %d: %q is not JSON: %v", seed, text, err)
		}
		if v.Name == nil || utf8.RuneCountInString(*v.Name) > 8 || v.Age == nil || *v.Age < 0 || *v.Age > 120 || (v.Pet != nil && *v.Pet != "cat" && *v.Pet != "dog") {
			t.Fatalf("seed %d: %q does not satisfy the schema", seed, text)
		}
	}
}

// TestGBNFConstraint checks a hand-written grammar: sampled output is forced into it.
func TestGBNFConstraint(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	// Alternation, repetition with bounds, nested rules and character classes.
	g, err := grammar.Parse(`root ::= ("yes" | "no") ", " word ("-" word){0,2} "."
word ::= [a-z]+`)
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[string]bool{}
	for seed := uint32(0); seed < 100; seed++ {
		p := engine.DefaultParams()
		p.Seed, p.NPredict, p.Grammar = seed, 64, g
		ch, err := e.Submit(context.Background(), engine.Task{Prompt: e.Tokenizer().Encode("Once upon a time", true, true), Params: p})
		if err != nil {
			t.Fatal(err)
		}
		text, final, _ := collect(t, ch)
		m, _ := g.NewMatcher("root")
		if final.StopType != engine.StopEOS || m.Accept(text) != nil || !m.Done() {
			t.Fatalf("seed %d: %q (stop %s, err %v) is not in the grammar", seed, text, final.StopType, final.Err)
		}
		distinct[text] = true
	}
	if len(distinct) < 20 { // the grammar constrains the sampling, it does not make it greedy
		t.Errorf("only %d distinct outputs over 100 seeds", len(distinct))
	}
}

// TestLazyGrammar: a grammar with a trigger leaves the output free until the trigger appears
// (greedy stories260K writes ", there was a little girl named Lily..."), then holds it from the
// trigger on; a trigger that never appears leaves the output as it is without a grammar.
func TestLazyGrammar(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	g, err := grammar.Parse(`root ::= " little cat."`)
	if err != nil {
		t.Fatal(err)
	}
	prompt := e.Tokenizer().Encode("Once upon a time", true, true)
	generate := func(triggers ...engine.GrammarTrigger) (string, engine.Result) {
		p := greedy(32)
		p.Grammar, p.GrammarTriggers = g, triggers
		ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		text, final, _ := collect(t, ch)
		if final.Err != nil {
			t.Fatal(final.Err)
		}
		return text, final
	}
	if text, final := generate(engine.GrammarTrigger{Word: " little"}); text != ", there was a little cat." || final.StopType != engine.StopEOS {
		t.Errorf("triggered: %q (stop %s)", text, final.StopType)
	}
	const free = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
	if text, _ := generate(engine.GrammarTrigger{Word: "dragon"}); text != free {
		t.Errorf("never triggered: %q, want %q", text, free)
	}
	if text, _ := generate(engine.GrammarTrigger{Word: " little", AtStart: true}); text != free {
		t.Errorf("a start-only trigger fired mid-output: %q", text)
	}
}
