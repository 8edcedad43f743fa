package mcp

import (
	"runtime"
	"testing"
	"time"
	"weak"
)

// TestStoppedIdleTimerLetsGo: an MCP session's stopped idle timer does not keep its binding
// (and through it the port and the Backchannel session) alive, even while the timer itself is
// kept — as Go keeps a stopped timer, with its function, until the moment it was due.
func TestStoppedIdleTimerLetsGo(t *testing.T) {
	var kept []func()
	keep := func(_ time.Duration, fn func()) *time.Timer {
		kept = append(kept, fn)
		return time.NewTimer(time.Hour)
	}
	w := armedAndStopped(keep)
	for i := 0; i < 20 && w.Value() != nil; i++ {
		runtime.GC()
	}
	if w.Value() != nil {
		t.Error("a stopped idle timer keeps its MCP session's binding alive")
	}
	if len(kept) != 1 {
		t.Fatalf("%d timers started, want 1", len(kept))
	}
	kept[0]() // a timer that fires after its binding is gone does nothing
}

// armedAndStopped makes a binding, arms its idle timer (with after) and stops it, as the first
// request of an idle MCP session does; it returns the binding weakly.
func armedAndStopped(after func(time.Duration, func()) *time.Timer) weak.Pointer[binding] {
	b := &binding{idleFor: time.Minute, onIdle: func() {}, afterFunc: after}
	b.mu.Lock()
	b.armLocked()
	b.stopTimerLocked()
	b.mu.Unlock()
	return weak.Make(b)
}
