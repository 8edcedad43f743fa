package broker

import "time"

// Clock tells a node's sessions the time and runs their timers: the floor and the narration
// queue, playout, re-asks, the resume window, the text agent's waits (SPEC 8, 9, 10, 13).
// Every time a session's logic reads or waits for comes from it, so a test can move time
// instead of sleeping. The job engine keeps its own clock (jobs.Options.Clock): job deadlines
// are compared with the store's time.
type Clock interface {
	// Now is the time.
	Now() time.Time
	// AfterFunc runs fn on a goroutine of its own after d.
	AfterFunc(d time.Duration, fn func()) Timer
	// NewTicker ticks every d until stopped (the playout of agent audio, SPEC 8).
	NewTicker(d time.Duration) Ticker
}

// Ticker is a ticker of a Clock.
type Ticker interface {
	// C delivers the ticks.
	C() <-chan time.Time
	// Stop stops the ticks.
	Stop()
}

// Timer is a timer of a Clock.
type Timer interface {
	// Stop prevents the timer from firing; false when it already fired or was stopped.
	Stop() bool
}

// SystemClock is the real time.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, fn func()) Timer { return time.AfterFunc(d, fn) }

// NewTicker is time.NewTicker.
func (SystemClock) NewTicker(d time.Duration) Ticker { return systemTicker{time.NewTicker(d)} }

type systemTicker struct{ t *time.Ticker }

func (t systemTicker) C() <-chan time.Time { return t.t.C }
func (t systemTicker) Stop()               { t.t.Stop() }
