package resumable

import (
	"sync"
	"time"
)

// Clock tells the time and ticks; the store's expiry and garbage collection read it, so tests
// can move time by hand.
type Clock interface {
	Now() time.Time
	// Ticker delivers the time every d on the channel until stop is called.
	Ticker(d time.Duration) (ticks <-chan time.Time, stop func())
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// Ticker is a time.Ticker.
func (SystemClock) Ticker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// ManualClock is a Clock that moves only when told to. Its tickers' channels are unbuffered and
// Advance hands each due tick over before it returns, so once Advance returns the receiver has
// taken the tick; a later Advance that delivers a tick to the same receiver returns only after
// the receiver has finished handling the earlier one and come back for more.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*manualTicker
}

type manualTicker struct {
	every   time.Duration
	next    time.Time
	c       chan time.Time
	stopped chan struct{}
}

// NewManualClock returns a clock standing at now.
func NewManualClock(now time.Time) *ManualClock { return &ManualClock{now: now} }

// Now is the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Ticker returns a ticker whose first tick is due d from now.
func (c *ManualClock) Ticker(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTicker{every: d, next: c.now.Add(d), c: make(chan time.Time), stopped: make(chan struct{})}
	c.tickers = append(c.tickers, t)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			close(t.stopped)
			c.mu.Lock()
			defer c.mu.Unlock()
			for i, x := range c.tickers {
				if x == t {
					c.tickers = append(c.tickers[:i], c.tickers[i+1:]...)
					break
				}
			}
		})
	}
	return t.c, stop
}

// Advance moves the clock forward by d, delivering every tick that falls due on the way (each
// at its own time, the clock standing there while it is delivered). A stopped ticker gets none.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var due *manualTicker
		for _, t := range c.tickers {
			if !t.next.After(target) && (due == nil || t.next.Before(due.next)) {
				due = t
			}
		}
		if due == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		at := due.next
		c.now = at
		due.next = at.Add(due.every)
		c.mu.Unlock()
		select {
		case due.c <- at:
		case <-due.stopped:
		}
	}
}
