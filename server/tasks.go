package server

import (
	"context"
	"sync"

	"github.com/wgpu-llama/wgpu-llama/engine"
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

// next waits for the next result of any task, or for the request to end.
func (s *taskSet) next(ctx context.Context) (taskResult, error) {
	select {
	case <-ctx.Done():
		return taskResult{}, ctx.Err()
	case r, ok := <-s.results:
		if !ok {
			return taskResult{}, errNoFinal
		}
		return r, nil
	}
}

// close cancels whatever still runs and releases the forwarding goroutines.
func (s *taskSet) close() { s.cancel() }
