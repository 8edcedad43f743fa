package brokertest

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestClockAdvanceFiresDueTimersInOrder: Advance fires, before it returns, exactly the timers
// whose moment it passed, earliest first; a stopped timer never fires.
func TestClockAdvanceFiresDueTimersInOrder(t *testing.T) {
	c := NewClock()
	var mu sync.Mutex
	var fired []string
	at := func(d time.Duration, name string) interface{ Stop() bool } {
		return c.AfterFunc(d, func() { mu.Lock(); fired = append(fired, name); mu.Unlock() })
	}
	at(time.Hour+2*time.Second, "b")
	at(time.Hour+time.Second, "a")
	stopped := at(time.Hour+1500*time.Millisecond, "stopped")
	at(3*time.Hour, "later")
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	c.Advance(time.Hour + 3*time.Second)
	mu.Lock()
	got := slices.Clone(fired)
	mu.Unlock()
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("fired %v, want [a b]", got)
	}
	if stopped.Stop() {
		t.Error("Stop of a stopped timer reported true")
	}
}

// TestClockPauseHoldsTime: a paused clock shows the same time however much real time passes,
// moves only by Advance, fires its timers only when Advance passes them, and runs on from the
// time it shows once resumed.
func TestClockPauseHoldsTime(t *testing.T) {
	c := NewClock()
	fired := make(chan struct{}, 1)
	c.AfterFunc(5*time.Millisecond, func() { fired <- struct{}{} })
	c.Pause()
	at := c.Now()
	time.Sleep(20 * time.Millisecond) // real time passes; the paused clock must not see it
	if got := c.Now(); !got.Equal(at) {
		t.Fatalf("paused clock moved by %v", got.Sub(at))
	}
	select {
	case <-fired:
		t.Fatal("a timer fired while the clock was paused")
	default:
	}
	c.Advance(10 * time.Millisecond)
	select {
	case <-fired:
	default:
		t.Fatal("Advance past the timer's moment did not fire it")
	}
	if got := c.Now(); !got.Equal(at.Add(10 * time.Millisecond)) {
		t.Fatalf("paused clock shows %v after Advance, want %v", got.Sub(at), 10*time.Millisecond)
	}
	c.Resume()
	if got := c.Now(); got.Before(at.Add(10*time.Millisecond)) || got.After(at.Add(time.Second)) {
		t.Fatalf("resumed clock shows %v from the pause, want just after 10ms", got.Sub(at))
	}
}
