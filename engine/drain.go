package engine

// Draining: the first step of a graceful shutdown.

// Drain stops the engine taking work: the requests queued or waiting for a slot, and any
// submitted from now on, fail at once with ErrClosed (the server answers 503), while those
// running in slots go on to their end. Close still ends everything.
func (e *Engine) Drain() {
	e.drainOnce.Do(func() { close(e.drain) })
}

// draining reports whether Drain was called.
func (e *Engine) draining() bool {
	select {
	case <-e.drain:
		return true
	default:
		return false
	}
}

// rejectQueued fails every request queued or waiting for a slot with ErrClosed.
func (e *Engine) rejectQueued() {
	for _, r := range e.waiting {
		r.fail(ErrClosed)
	}
	clear(e.waiting)
	e.waiting = e.waiting[:0]
	e.nWait.Store(0)
	for {
		select {
		case r := <-e.queue:
			r.fail(ErrClosed)
		default:
			return
		}
	}
}
