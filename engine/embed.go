package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// Errors of embedding and rerank tasks, and of generation on a model that cannot generate.
var (
	ErrEmbeddingsDisabled = errors.New("engine: embeddings are not enabled (start with --embeddings)")
	ErrNotReranker        = errors.New("engine: reranking needs rank pooling (start with --reranking)")
	ErrRankPooling        = errors.New("engine: with rank pooling the model scores query-document pairs and computes no embeddings")
	ErrNoGeneration       = errors.New("engine: the model is an encoder: it computes embeddings and does not generate text")
)

// InputTooLargeError is an embedding or rerank input that must be evaluated in one pass (as
// every one must but a decoder's pooled by its last token) and is longer than a pass.
type InputTooLargeError struct {
	Tokens, BatchSize int
}

// Error is llama-server's message for it.
func (e *InputTooLargeError) Error() string {
	return fmt.Sprintf("input (%d tokens) is too large to process. increase the physical batch size (current batch size: %d)", e.Tokens, e.BatchSize)
}

// ContextExceededError is an embedding or rerank input, evaluated in one pass, that is longer
// than a slot's context (an encoder's: also than its learned positions). It is an
// ErrPromptTooBig.
type ContextExceededError struct {
	Tokens, NCtx int
}

// Error is llama-server's message for it.
func (e *ContextExceededError) Error() string {
	return fmt.Sprintf("input (%d tokens) is larger than the max context size (%d tokens). skipping", e.Tokens, e.NCtx)
}

// Unwrap makes it an ErrPromptTooBig.
func (e *ContextExceededError) Unwrap() error { return ErrPromptTooBig }

// embedPooling resolves the pooling embeddings use as llama.cpp does: --pooling, else the
// model file's (none when it has none). Rank pooling needs a classification head.
func embedPooling(cfg Config, m *model.Model) (model.Pooling, error) {
	p := m.Config.Pooling
	if cfg.Pooling != "" {
		var err error
		if p, err = model.ParsePooling(cfg.Pooling); err != nil {
			return p, fmt.Errorf("engine: --pooling: %w", err)
		}
	}
	if cfg.Embeddings && p == model.PoolRank && !m.CanRank() {
		return p, fmt.Errorf("engine: rank pooling needs a reranker, and %s has no classification head (cls.weight)", cfg.ModelPath)
	}
	return p, nil
}

// embedJob is an embedding or rerank task in a slot: its tokens and how many are evaluated.
// Only a decoder pooling by the last token may take several passes (llama.cpp's can_split);
// every other input is evaluated whole, in one pass.
type embedJob struct {
	r     *request
	done  int
	start time.Time
}

// splits says whether an embedding input may span several passes.
func (e *Engine) splits() bool { return !e.encoder && e.info.Pooling == model.PoolLast }

// checkKind checks what Submit can check of a task beyond generation's checks: that the model
// generates, for generation; for embedding and rerank tasks, that they are served and that the
// input fits, in one pass where it must be evaluated whole.
func (e *Engine) checkKind(t Task) error {
	switch t.Kind {
	case TaskGenerate:
		if e.encoder {
			return ErrNoGeneration
		}
		return nil
	case TaskEmbed, TaskRerank:
	default:
		return fmt.Errorf("engine: unknown task kind %d", t.Kind)
	}
	switch {
	case !e.info.Embeddings:
		return ErrEmbeddingsDisabled
	case t.Kind == TaskRerank && e.info.Pooling != model.PoolRank:
		return ErrNotReranker
	case t.Kind == TaskEmbed && e.info.Pooling == model.PoolRank:
		return ErrRankPooling
	}
	n := len(t.Prompt)
	if n == 0 {
		return ErrEmptyPrompt
	}
	for _, id := range t.Prompt {
		if (id < 0 || int(id) >= e.info.NVocab) && id < model.MediaToken {
			return fmt.Errorf("engine: prompt token %d out of range (vocabulary %d)", id, e.info.NVocab)
		}
	}
	if err := e.mediaRows(t.Prompt); err != nil {
		return err
	}
	if e.splits() {
		if n >= e.slotCtx {
			return fmt.Errorf("%w: the input has %d tokens, the context holds %d", ErrPromptTooBig, n, e.slotCtx)
		}
		return nil
	}
	limit := e.slotCtx
	if e.encoder {
		limit = min(limit, e.info.NCtxTrain)
	}
	switch {
	case n > e.batch:
		return &InputTooLargeError{Tokens: n, BatchSize: e.batch}
	case n > limit:
		return &ContextExceededError{Tokens: n, NCtx: limit}
	}
	return nil
}

// startJob puts an embedding or rerank request in slot s. Its tokens overwrite the slot's
// cache from the first row: nothing cached is reused.
func (e *Engine) startJob(s *slot, r *request) error {
	e.truncate(s, 0)
	s.job = &embedJob{r: r, start: time.Now()}
	return nil
}

// runJobs evaluates the slots' embedding and rerank tasks, in a pass of their own: every
// input that fits whole in what is left of the batch (or, when inputs may span passes, the
// next part of it), and delivers the tasks that are complete.
func (e *Engine) runJobs() {
	encoder := e.encoder
	b := model.Batch{PageBits: pageBits}
	if encoder {
		// An encoder keeps nothing between passes: each input just needs rows of its own for
		// this pass, so inputs are laid out one after another from row 0.
		b.PageBits = 0
	}
	var bp batchPages
	encRow := int32(0)
	type part struct {
		s          *slot
		row, count int // the part's first batch row and its tokens
	}
	var parts []part
	budget := min(e.batch, e.kv.NCtx)
	for _, s := range e.slots {
		j := s.job
		if j == nil {
			continue
		}
		if err := j.r.ctx.Err(); err != nil {
			e.endJob(s, Result{Stop: true, StopType: StopNone, Err: err, Slot: s.id})
			continue
		}
		rest := j.r.task.Prompt[j.done:]
		if len(rest) > budget && (!e.splits() || budget == 0) {
			continue // next pass
		}
		take := e.cutMedia(rest, rest[:min(len(rest), budget)])
		if len(take) == 0 {
			continue // an image that does not fit this pass's room
		}
		base := encRow
		if !encoder {
			got := e.reserve(s, j.done+len(take), &b.Copies)
			if got < len(take) && !e.splits() || got == 0 {
				continue // no room in the cache this turn
			}
			take, base = take[:got], bp.base(s)
		} else {
			encRow += int32(len(take))
		}
		parts = append(parts, part{s: s, row: len(b.Tokens), count: len(take)})
		for i, tok := range take {
			b.Tokens = append(b.Tokens, tok)
			b.Pos = append(b.Pos, int32(j.done+i))
			b.Base = append(b.Base, base)
		}
		e.appendStates(&b, s, len(take))
		b.MPos = e.appendMRoPE(b.MPos, j.r.task.Prompt[:j.done], take)
		budget -= len(take)
	}
	if len(parts) == 0 {
		return
	}
	b.Pages = bp.pages
	if i, ok := e.attachMedia(&b); !ok {
		for _, p := range parts {
			if i >= p.row && i < p.row+p.count {
				e.truncate(p.s, 0)
				e.endJob(p.s, Result{Stop: true, StopType: StopNone, Slot: p.s.id,
					Err: fmt.Errorf("%w: the image at input position %d is no longer held: send the request again", ErrBadMedia, int(b.Pos[i]))})
			}
		}
		return
	}
	rank := e.info.Pooling == model.PoolRank
	var (
		hidden []float32
		scores [][]float32
		err    error
	)
	w := e.watchPass()
	if rank {
		firsts := make([]int, len(parts))
		for i, p := range parts {
			firsts[i] = p.row
		}
		err = e.embedPass(func() (err error) { scores, err = e.model.ForwardRank(e.kv, b, firsts); return })
	} else {
		err = e.embedPass(func() (err error) { hidden, err = e.model.ForwardEmbed(e.kv, b); return })
	}
	if w != nil {
		for _, p := range parts {
			w.add(p.s.id, p.count, true)
		}
		e.passDone(w)
	}
	for i, p := range parts {
		s, j := p.s, p.s.job
		if err != nil {
			e.truncate(s, 0)
			e.endJob(s, Result{Stop: true, StopType: StopNone, Err: err, Slot: s.id})
			continue
		}
		prompt := j.r.task.Prompt
		j.done += p.count
		if !e.encoder {
			s.cached = append(s.cached[:0], prompt[:j.done]...) // a decoder's cache rows hold them
		}
		if j.done < len(prompt) {
			continue
		}
		res := Result{Stop: true, StopType: StopNone, TokensEvaluated: len(prompt), TokensCached: len(s.cached), Slot: s.id}
		res.Timings.PromptN = len(prompt)
		res.Timings.Prompt = time.Since(j.start)
		if rank {
			res.Embedding = [][]float32{scores[i]}
		} else {
			res.Embedding = e.pooled(hidden[p.row*e.info.NEmbd : (p.row+p.count)*e.info.NEmbd])
		}
		e.endJob(s, res)
	}
}

// embedPass runs one embedding or rerank pass, turning a GPU panic into an error as forward
// does for generation.
func (e *Engine) embedPass(run func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine: internal error: %v", p)
		}
	}()
	if err = run(); err != nil {
		e.log.Error("embedding pass failed", "err", err)
	}
	return err
}

// pooled turns the hidden states of a task's last part (all of it, unless it spanned several
// passes, which only last-token pooling does) into its result: one vector per token with
// pooling none, else one pooled vector.
func (e *Engine) pooled(hidden []float32) [][]float32 {
	n := e.info.NEmbd
	if e.info.Pooling != model.PoolNone {
		return [][]float32{model.Pool(hidden, n, e.info.Pooling)}
	}
	out := make([][]float32, len(hidden)/n)
	for i := range out {
		out[i] = hidden[i*n : (i+1)*n : (i+1)*n]
	}
	return out
}

// endJob delivers a job's final result and frees its slot.
func (e *Engine) endJob(s *slot, final Result) {
	j := s.job
	j.r.send(final)
	j.r.close()
	s.job, s.lastUsed = nil, time.Now()
}

// failJobs ends every running embedding and rerank task with err (the engine is closing).
func (e *Engine) failJobs(err error) {
	for _, s := range e.slots {
		if s.job != nil {
			e.endJob(s, Result{Stop: true, StopType: StopNone, Err: err, Slot: s.id})
		}
	}
}
