package engine

import (
	"context"
	"sync"
)

// outbox holds a request's results until its reader takes them, so the engine goroutine
// never waits on a client: one that stops reading a stream holds back only its own results,
// not the other slots. A pump goroutine per request moves results to the reader's channel.
type outbox struct {
	mu     sync.Mutex
	items  []Result
	closed bool
	wake   chan struct{} // signalled (capacity 1) when items or closed change
}

func newOutbox() *outbox { return &outbox{wake: make(chan struct{}, 1)} }

// push queues a result; it never blocks.
func (o *outbox) push(r Result) {
	o.mu.Lock()
	o.items = append(o.items, r)
	o.mu.Unlock()
	o.signal()
}

// close marks the end of the results; the pump closes the reader's channel after the last.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.signal()
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// pump delivers queued results to out in order and closes out after the last one. When ctx
// ends (the client left) it stops delivering, and closes out once the engine has closed the
// outbox, so a reader still ranging over out also finishes.
func (o *outbox) pump(ctx context.Context, out chan<- Result) {
	defer close(out)
	left := false // the client left: drop what remains
	for {
		o.mu.Lock()
		items, closed := o.items, o.closed
		o.items = nil
		o.mu.Unlock()
		for _, r := range items {
			if left {
				break
			}
			select { // as long as the reader's buffer has room, deliver even after it left
			case out <- r:
				continue
			default:
			}
			select {
			case out <- r:
			case <-ctx.Done():
				left = true
			}
		}
		if closed && len(items) == 0 {
			return
		}
		if closed {
			continue // drain whatever arrived meanwhile, then return
		}
		<-o.wake
	}
}
