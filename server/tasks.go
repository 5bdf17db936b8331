package server

import (
	"context"
	"sync"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// taskResult is one result of one of several tasks running together.
type taskResult struct {
	task int
	res  engine.Result
}

// taskSet is several tasks of one request, submitted together, whose results arrive on one
// channel in the order the engine produces them.
type taskSet struct {
	results <-chan taskResult
	cancel  context.CancelFunc
}

// submitAll queues tasks; if one cannot be queued, the ones already queued are cancelled and
// the error is returned with the failed task's index. Close must be called when done.
func submitAll(ctx context.Context, b Backend, tasks []engine.Task) (*taskSet, int, error) {
	ctx, cancel := context.WithCancel(ctx)
	chans := make([]<-chan engine.Result, 0, len(tasks))
	for i, t := range tasks {
		ch, err := b.Submit(ctx, t)
		if err != nil {
			cancel()
			for _, c := range chans {
				drain(c)
			}
			return nil, i, err
		}
		chans = append(chans, ch)
	}
	out := make(chan taskResult)
	var wg sync.WaitGroup
	for i, ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer drain(ch)
			final := false
			for res := range ch {
				final = res.Stop
				select {
				case out <- taskResult{task: i, res: res}:
				case <-ctx.Done():
					return
				}
			}
			if !final {
				select {
				case out <- taskResult{task: i, res: engine.Result{Stop: true, Err: errNoFinal}}:
				case <-ctx.Done():
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	return &taskSet{results: out, cancel: cancel}, 0, nil
}

// next waits for the next result of any task, or for the request to end, pinging sse (nil
// for none) while it waits.
func (s *taskSet) next(ctx context.Context, sse *sseWriter) (taskResult, error) {
	r, ok, err := await(ctx, s.results, sse)
	switch {
	case err != nil:
		return taskResult{}, err
	case !ok:
		return taskResult{}, errNoFinal
	}
	return r, nil
}

// close cancels whatever still runs and releases the forwarding goroutines.
func (s *taskSet) close() { s.cancel() }

// choiceCount reads llama-server's n_cmpl, or OpenAI's n when it is absent: how many
// completions of one prompt to generate, at least 1 and at most the number of slots.
func choiceCount(nCmpl, n gen.OptNilInt, slots int) (int, error) {
	v, name := 1, "n"
	if x, ok := nCmpl.Get(); ok {
		v, name = x, "n_cmpl"
	} else if x, ok := n.Get(); ok {
		v = x
	}
	if v < 1 {
		return 0, invalidRequest("'%s' must be at least 1, got %d", name, v)
	}
	if v > slots {
		return 0, invalidRequest("n_cmpl cannot be greater than the number of slots, please increase -np")
	}
	return v, nil
}

// slotOf reads id_slot: nil (the engine chooses) when it is absent, null or -1, else the slot.
// An id the engine lacks is refused by Submit (engine.ErrInvalidSlot).
func slotOf(o gen.OptNilInt) *int {
	v, ok := o.Get()
	if !ok || v == -1 {
		return nil
	}
	return &v
}

// generationTasks is n generations of one prompt. Only the first is bound to slot: as in
// llama-server, where id_slot names the parent task's slot, the others take free slots.
func generationTasks(prompt []int32, params engine.Params, stream bool, slot *int, n int) []engine.Task {
	params.ReturnProgress = params.ReturnProgress && stream // as llama-server: progress is streamed
	tasks := make([]engine.Task, n)
	for i := range tasks {
		tasks[i] = engine.Task{Prompt: prompt, Params: params, Stream: stream}
	}
	tasks[0].Slot = slot
	return tasks
}

// totalOf is the final result that stands for all of finals: the one itself, or the sums of
// several (sumResults).
func totalOf(finals []engine.Result) engine.Result {
	if len(finals) == 1 {
		return finals[0]
	}
	return sumResults(finals)
}
