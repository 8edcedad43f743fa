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
// timeout by moving the clock, not by sleeping. Pause stops it from following the real time
// until Resume, for a check to the moment that real time passing (a loaded machine) must not
// spoil. Tickers tick in real time (playout).
type Clock struct {
	mu     sync.Mutex
	offset time.Duration // running: the clock is the real time plus offset
	paused bool
	at     time.Time // paused: the clock shows at
	timers map[*clockTimer]struct{}
}

// NewClock returns a Clock showing the real time.
func NewClock() *Clock { return &Clock{timers: make(map[*clockTimer]struct{})} }

type clockTimer struct {
	c   *Clock
	due time.Time // on the clock
	fn  func()
	t   *time.Timer // nil while the clock is paused
}

// nowLocked is the clock's time; c.mu is held.
func (c *Clock) nowLocked() time.Time {
	if c.paused {
		return c.at
	}
	return time.Now().Add(c.offset)
}

// Now is the real time plus what Advance added (or, paused, the time it was paused at plus what
// Advance added since).
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

// AfterFunc implements broker.Clock.
func (c *Clock) AfterFunc(d time.Duration, fn func()) broker.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := &clockTimer{c: c, due: c.nowLocked().Add(d), fn: fn}
	c.timers[ct] = struct{}{}
	if !c.paused {
		c.startLocked(ct, d)
	}
	return ct
}

// startLocked runs ct's real timer to fire after d; c.mu is held.
func (c *Clock) startLocked(ct *clockTimer, d time.Duration) {
	ct.t = time.AfterFunc(max(d, 0), func() {
		c.mu.Lock()
		_, pending := c.timers[ct]
		delete(c.timers, ct)
		c.mu.Unlock()
		if pending {
			ct.fn()
		}
	})
}

// Stop implements broker.Timer.
func (ct *clockTimer) Stop() bool {
	ct.c.mu.Lock()
	defer ct.c.mu.Unlock()
	_, pending := ct.c.timers[ct]
	delete(ct.c.timers, ct)
	if ct.t != nil {
		ct.t.Stop()
	}
	return pending
}

// NewTicker implements broker.Clock: real time.
func (c *Clock) NewTicker(d time.Duration) broker.Ticker { return broker.SystemClock{}.NewTicker(d) }

// Pause stops the clock from following the real time: it shows the same time, and its timers
// fire only when Advance passes them, until Resume.
func (c *Clock) Pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused {
		return
	}
	c.at = c.nowLocked()
	c.paused = true
	for ct := range c.timers {
		if ct.t != nil {
			ct.t.Stop()
			ct.t = nil
		}
	}
}

// Resume lets the clock follow the real time again, from the time it shows.
func (c *Clock) Resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.paused {
		return
	}
	c.paused = false
	c.offset = time.Until(c.at)
	now := c.nowLocked()
	for ct := range c.timers {
		c.startLocked(ct, ct.due.Sub(now))
	}
}

// Advance moves the clock forward by d: timers due by then fire at once, in the order of their
// moments, before Advance returns; the others are moved closer.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	if c.paused {
		c.at = c.at.Add(d)
	} else {
		c.offset += d
	}
	now := c.nowLocked()
	var due []*clockTimer
	for ct := range c.timers {
		if ct.t != nil {
			ct.t.Stop()
			ct.t = nil
		}
		if ct.due.After(now) {
			if !c.paused {
				c.startLocked(ct, ct.due.Sub(now))
			}
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
