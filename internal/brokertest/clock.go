package brokertest

import (
	"sort"
	"sync"
	"time"

	"github.com/backchannel-io/backchannel/broker"
)

// Clock is a broker.Clock for tests over the wire: it runs with the real time, so audio is
// played and heard at its pace, and Advance moves it forward at once — a timer whose moment
// that passes fires then — so a scenario waits for the floor's grace, a re-ask or a narration
// timeout by moving the clock, not by sleeping. Tickers tick in real time (playout).
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
	timers map[*clockTimer]struct{}
}

// NewClock returns a Clock showing the real time.
func NewClock() *Clock { return &Clock{timers: make(map[*clockTimer]struct{})} }

type clockTimer struct {
	c   *Clock
	due time.Time // on the clock
	fn  func()
	t   *time.Timer
}

// Now is the real time plus what Advance added.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// AfterFunc implements broker.Clock.
func (c *Clock) AfterFunc(d time.Duration, fn func()) broker.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := &clockTimer{c: c, due: time.Now().Add(c.offset + d), fn: fn}
	c.timers[ct] = struct{}{}
	ct.t = time.AfterFunc(d, func() {
		c.mu.Lock()
		delete(c.timers, ct)
		c.mu.Unlock()
		fn()
	})
	return ct
}

// Stop implements broker.Timer.
func (ct *clockTimer) Stop() bool {
	ct.c.mu.Lock()
	defer ct.c.mu.Unlock()
	delete(ct.c.timers, ct)
	return ct.t.Stop()
}

// NewTicker implements broker.Clock: real time.
func (c *Clock) NewTicker(d time.Duration) broker.Ticker { return broker.SystemClock{}.NewTicker(d) }

// Advance moves the clock forward by d: timers due by then fire at once, in the order of their
// moments, before Advance returns; the others are moved closer.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	now := time.Now().Add(c.offset)
	var due []*clockTimer
	for ct := range c.timers {
		if !ct.t.Stop() {
			continue // firing now
		}
		if ct.due.After(now) {
			ct.t.Reset(ct.due.Sub(now))
			continue
		}
		delete(c.timers, ct)
		due = append(due, ct)
	}
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].due.Before(due[j].due) })
	for _, ct := range due {
		ct.fn()
	}
}
