package server

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// fakeBackend is a deterministic Backend: whatever the prompt, it "generates" storyWords one
// token each (then EOS), honouring n_predict, stop strings, ignore_eos and cancellation, with
// timings derived from token counts.
type fakeBackend struct {
	tok  *tokenizer.Tokenizer
	info engine.ModelInfo

	// submitErr, when set, is returned by Submit.
	submitErr error
	// failAfter >= 0 makes the task end with finalErr after that many partial results.
	failAfter int
	finalErr  error
	// delay is waited before each result.
	delay time.Duration
	// output, when set, replaces the story: each piece is one generated "token", then EOS.
	output []string
	// slotsBusy makes both of the fake's slots report a running request (fake_slots_test.go).
	slotsBusy bool

	mu        sync.Mutex
	tasks     []engine.Task
	cancelled chan struct{} // closed when a task's context ends before its final result
}

// storyWords is the fake model's output, token by token (stories260K's greedy continuation of
// "Once upon a time", then a newline).
var storyWords = []string{",", "▁there", "▁was", "▁a", "▁little", "▁girl", "▁named", "▁Lily", ".", "▁She", "▁loved", "▁to", "▁play", "<0x0A>"}

// fakeVocab is a small SentencePiece vocabulary: specials, byte fallback, single characters (so
// any ASCII text tokenizes) and the story's words.
func fakeVocab() tokenizer.Vocab {
	v := tokenizer.Vocab{Model: "llama", BOS: 1, EOS: 2, EOT: -1, UNK: 0, PAD: -1, AddBOS: true, AddSpacePrefix: true}
	add := func(text string, typ tokenizer.TokenType, score float32) {
		v.Tokens = append(v.Tokens, text)
		v.Types = append(v.Types, typ)
		v.Scores = append(v.Scores, score)
	}
	add("<unk>", tokenizer.TypeUnknown, 0)
	add("<s>", tokenizer.TypeControl, 0)
	add("</s>", tokenizer.TypeControl, 0)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), tokenizer.TypeByte, 0)
	}
	add("▁", tokenizer.TypeNormal, -1)
	for c := byte('!'); c <= '~'; c++ {
		add(string(c), tokenizer.TypeNormal, -2)
	}
	for _, w := range storyWords {
		if strings.HasPrefix(w, "▁") {
			add(w, tokenizer.TypeNormal, -3)
		}
	}
	return v
}

func newFakeBackend(t testing.TB) *fakeBackend {
	t.Helper()
	tok, err := tokenizer.New(fakeVocab())
	if err != nil {
		t.Fatalf("building the fake vocabulary: %v", err)
	}
	return &fakeBackend{
		tok: tok,
		info: engine.ModelInfo{
			Name: "fake.gguf", Path: "/models/fake.gguf", NCtx: 256, NCtxTrain: 2048,
			NVocab: tok.NVocab(), NEmbd: 64, NParams: 292800, Size: 1171200,
			FileType: "all F32", NSlots: 2,
		},
		failAfter: -1,
		cancelled: make(chan struct{}),
	}
}

func (f *fakeBackend) Tokenizer() *tokenizer.Tokenizer { return f.tok }
func (f *fakeBackend) Info() engine.ModelInfo          { return f.info }

// lastTask is the most recent task Submit accepted.
func (f *fakeBackend) lastTask(t testing.TB) engine.Task {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.tasks) == 0 {
		t.Fatal("no task was submitted")
	}
	return f.tasks[len(f.tasks)-1]
}

func (f *fakeBackend) Submit(ctx context.Context, task engine.Task) (<-chan engine.Result, error) {
	if f.submitErr != nil {
		return nil, f.submitErr
	}
	if task.Kind != engine.TaskGenerate {
		return f.embed(task)
	}
	if len(task.Prompt) == 0 {
		return nil, engine.ErrEmptyPrompt
	}
	if len(task.Prompt) >= f.info.NCtx {
		return nil, fmt.Errorf("%w: %d tokens", engine.ErrPromptTooBig, len(task.Prompt))
	}
	f.mu.Lock()
	f.tasks = append(f.tasks, task)
	f.mu.Unlock()
	ch := make(chan engine.Result)
	go f.generate(ctx, task, ch)
	return ch, nil
}

func (f *fakeBackend) generate(ctx context.Context, task engine.Task, ch chan<- engine.Result) {
	defer close(ch)
	nPrompt := len(task.Prompt)
	abandoned := func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		select {
		case <-f.cancelled:
		default:
			close(f.cancelled)
		}
		return false
	}
	send := func(r engine.Result) bool {
		if f.delay > 0 {
			select {
			case <-time.After(f.delay):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			return abandoned()
		}
		select {
		case ch <- r:
			return true
		case <-ctx.Done():
			return abandoned()
		}
	}
	var (
		out  strings.Builder
		sent int
		n    int
		stop = engine.StopLimit
		word string
	)
	final := func() engine.Result {
		return engine.Result{
			Stop: true, StopType: stop, StoppingWord: word,
			TokensEvaluated: nPrompt, TokensPredicted: n, TokensCached: nPrompt + n - 1,
			Timings: engine.Timings{
				PromptN: nPrompt, Prompt: time.Duration(nPrompt) * time.Millisecond,
				PredictedN: n, Predicted: time.Duration(n) * 500 * time.Microsecond,
			},
		}
	}
	for task.Params.NPredict < 0 || n < task.Params.NPredict {
		if f.failAfter >= 0 && n == f.failAfter {
			r := final()
			r.Err = f.finalErr
			send(r)
			return
		}
		var id int32
		var piece string
		if f.output != nil {
			if n == len(f.output) {
				stop = engine.StopEOS
				break
			}
			id, piece = 3, f.output[n] // token 3 stands for any scripted piece
		} else {
			i := n % (len(storyWords) + 1)
			if i == len(storyWords) && !task.Params.IgnoreEOS {
				stop = engine.StopEOS
				break
			}
			id = f.tok.EOS()
			if i < len(storyWords) {
				id, _ = f.tok.TokenID(storyWords[i])
			}
			piece = string(f.tok.Piece(id, false))
		}
		n++
		out.WriteString(piece)
		text := out.String()
		if at, w := firstStop(text, task.Params.Stop); at >= 0 {
			stop, word = engine.StopWord, w
			r := final()
			r.Tokens = []int32{id} // the unsent token comes with the final result, as from the engine
			if at > sent {
				r.Text = text[sent:at]
			}
			send(r)
			return
		}
		if !send(engine.Result{Text: text[sent:], Tokens: []int32{id}, TokensEvaluated: nPrompt, TokensPredicted: n}) {
			return
		}
		sent = len(text)
	}
	send(final())
}

// embed answers an embedding or rerank task at once: fakeVector of each token (pooling none)
// or of the tokens' sum, or fakeScore.
func (f *fakeBackend) embed(task engine.Task) (<-chan engine.Result, error) {
	if len(task.Prompt) == 0 {
		return nil, engine.ErrEmptyPrompt
	}
	f.mu.Lock()
	f.tasks = append(f.tasks, task)
	f.mu.Unlock()
	res := engine.Result{Stop: true, TokensEvaluated: len(task.Prompt), Slot: 1}
	switch {
	case task.Kind == engine.TaskRerank:
		res.Embedding = [][]float32{{fakeScore(task.Prompt)}}
	case f.info.Pooling == model.PoolNone:
		for _, id := range task.Prompt {
			res.Embedding = append(res.Embedding, fakeVector(id, f.info.NEmbd))
		}
	default:
		sum := int32(0)
		for _, id := range task.Prompt {
			sum += id
		}
		res.Embedding = [][]float32{fakeVector(sum, f.info.NEmbd)}
	}
	ch := make(chan engine.Result, 1)
	ch <- res
	close(ch)
	return ch, nil
}

// fakeVector is the fake's unnormalised embedding of seed: sin(seed * (i+1)) for i < n.
func fakeVector(seed int32, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.Sin(float64(seed) * float64(i+1)))
	}
	return v
}

// fakeScore is the fake's relevance score of a rerank prompt: its length, with its last
// token's id as a tie-break.
func fakeScore(prompt []int32) float32 {
	return float32(len(prompt)) + float32(prompt[len(prompt)-1])/1000
}

// firstStop finds the earliest stop string in text.
func firstStop(text string, stops []string) (int, string) {
	at, word := -1, ""
	for _, s := range stops {
		if i := strings.Index(text, s); i >= 0 && (at < 0 || i < at) {
			at, word = i, s
		}
	}
	return at, word
}

// testLogger discards logs unless the test runs verbosely (-v), then writes them to stderr.
// (t.Log cannot be used: the request log line may come after the test has finished.)
func testLogger() *log.Logger {
	if testing.Verbose() {
		return log.NewWithOptions(os.Stderr, log.Options{Level: log.DebugLevel})
	}
	return log.NewWithOptions(io.Discard, log.Options{})
}
