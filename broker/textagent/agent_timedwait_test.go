package textagent

import (
	"fmt"
	"testing"
	"time"
)

// timedOut runs one `wait {timeout_minutes:5}` to its deadline and returns its content.
func (h *agHarness) timedOut(id string) string {
	h.t.Helper()
	h.call(RootConversation, id, "wait", `{"timeout_minutes":5}`)
	h.expectNone()
	h.advance(5 * time.Minute)
	r := h.result(id)
	if r.Kind != "result" {
		h.t.Fatalf("timed wait %s: %+v", id, r)
	}
	return r.Content
}

// SPEC 13: N must be a JSON integer ≥ 1, otherwise `error: timeout_minutes must be a positive
// integer`; nothing is waited for.
func TestAgentTimedWaitValidation(t *testing.T) {
	for _, arg := range []string{`0`, `-3`, `2.5`, `"5"`, `true`, `null`, `[]`, `{}`, `""`, `-1`, `1.5e1`} {
		t.Run(arg, func(t *testing.T) {
			h := newAg(t, Options{})
			h.call(RootConversation, "w", "wait", `{"timeout_minutes":`+arg+`}`)
			h.expect(agErr("w", specBadTimeout))
			if n := h.liveTimers(); n != 0 {
				t.Errorf("%d timers armed", n)
			}
			h.advance(48 * time.Hour)
			h.expectNone()
		})
	}
}

// N is silently clamped to [5, 1440] minutes (or the configured bounds); the deadline is exact.
func TestAgentTimedWaitClamping(t *testing.T) {
	tests := []struct {
		n        string
		min, max int
		want     time.Duration
	}{
		{"1", 0, 0, 5 * time.Minute},
		{"4", 0, 0, 5 * time.Minute},
		{"5", 0, 0, 5 * time.Minute},
		{"7", 0, 0, 7 * time.Minute},
		{"1440", 0, 0, 1440 * time.Minute},
		{"1441", 0, 0, 1440 * time.Minute},
		{"100000", 0, 0, 1440 * time.Minute},
		{"99999999999999999999999", 0, 0, 1440 * time.Minute},
		{"1", 1, 10, time.Minute},
		{"3", 2, 10, 3 * time.Minute},
		{"60", 1, 10, 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s in [%d,%d]", tt.n, tt.min, tt.max), func(t *testing.T) {
			h := newAg(t, Options{MinWaitMinutes: tt.min, MaxWaitMinutes: tt.max})
			h.call(RootConversation, "w", "wait", `{"timeout_minutes":`+tt.n+`}`)
			h.advance(tt.want - time.Nanosecond)
			h.expectNone()
			h.advance(time.Nanosecond)
			h.expect(agOK("w", specTimedOut))
			h.advance(48 * time.Hour)
			h.expectNone()
		})
	}
}

// The timed wait returns input_available when activating input arrives first, or is pending
// when it starts; it consumes neither the input nor results.
func TestAgentTimedWaitInputAvailable(t *testing.T) {
	for _, act := range activations {
		t.Run(act.name+"/arriving", func(t *testing.T) {
			h := newAg(t, Options{})
			child := h.create(RootConversation, "")
			h.bg(RootConversation, "c1", "other")
			h.turnStart(RootConversation)
			h.call(RootConversation, "w", "wait", `{"timeout_minutes":10}`)
			h.advance(9 * time.Minute)
			h.expectNone()
			act.fire(h, child)
			var got []string
			for _, f := range agDescribe(h.take()) {
				if f == agOK("w", specInputAvail) {
					got = append(got, f)
				}
			}
			if len(got) != 1 {
				t.Fatalf("input_available results: %q", got)
			}
			h.advance(time.Hour)
			h.expectNone()
			h.turnEnd(RootConversation)
			h.expect(act.prompt(h, child))
		})
		t.Run(act.name+"/pending at start", func(t *testing.T) {
			h := newAg(t, Options{})
			child := h.create(RootConversation, "")
			h.bg(RootConversation, "c1", "other")
			h.turnStart(RootConversation)
			act.fire(h, child)
			h.skip()
			h.call(RootConversation, "w", "wait", `{"timeout_minutes":10}`)
			h.expect(agOK("w", specInputAvail))
			h.turnEnd(RootConversation)
			h.expect(act.prompt(h, child))
		})
	}
	t.Run("a completion stays queued for wait", func(t *testing.T) {
		h := newAg(t, Options{})
		h.bg(RootConversation, "c1")
		h.turnStart(RootConversation)
		h.call(RootConversation, "w", "wait", `{"timeout_minutes":5}`)
		h.complete(RootConversation, "c1", `"r"`)
		h.expect(agOK("w", specInputAvail))
		h.call(RootConversation, "w2", "wait", `{}`)
		h.expect(agOK("w2", "original_tool_call_id: c1\n\nr"))
		h.turnEnd(RootConversation)
		h.expectNone()
	})
	t.Run("the reminder is not input", func(t *testing.T) {
		h := newAgRaw(t, Options{})
		h.turnStart(RootConversation)
		h.call(RootConversation, "w", "wait", `{"timeout_minutes":5}`)
		h.call(RootConversation, "c1", "lookup", `{}`) // queues the reminder
		h.complete(RootConversation, "c1", `1`)
		h.expect(agOK("c1", "1"))
		h.advance(5 * time.Minute)
		h.expect(agOK("w", specTimedOut))
	})
}

// The third consecutive timeout carries the advice, exactly once per run.
func TestAgentTimedWaitAdvice(t *testing.T) {
	h := newAg(t, Options{})
	want := []string{specTimedOut, specTimedOut, specTimedOut + "\nadvice: " + specAdvice, specTimedOut, specTimedOut, specTimedOut}
	for i, w := range want {
		if got := h.timedOut(fmt.Sprintf("w%d", i)); got != w {
			t.Errorf("timeout %d = %q, want %q", i+1, got, w)
		}
	}
}

// A status call or a substantive call starts a new run; other waits do not.
func TestAgentTimedWaitAdviceReset(t *testing.T) {
	tests := []struct {
		name    string
		between func(h *agHarness)
		reset   bool
	}{
		{"accepted status", func(h *agHarness) {
			h.call(RootConversation, "x", "status", `{"state":"working","title":"again"}`)
		}, true},
		{"rejected status", func(h *agHarness) { h.call(RootConversation, "x", "status", `{"state":"idle","title":"t"}`) }, true},
		{"host call", func(h *agHarness) { h.call(RootConversation, "x", "lookup", `{}`) }, true},
		{"host call refused", func(h *agHarness) {
			h.startErr["gone"] = "Tool gone is not available"
			h.call(RootConversation, "x", "gone", `{}`)
		}, true},
		{"local call", func(h *agHarness) { h.local(RootConversation, "x", "sub", `{}`) }, true},
		{"cancel", func(h *agHarness) { h.call(RootConversation, "x", "cancel", `{"tool_call_id":"nope"}`) }, true},
		// A timed wait that returns input_available breaks the run of consecutive timeouts.
		{"input_available", func(h *agHarness) {
			h.call(RootConversation, "x", "wait", `{"timeout_minutes":5}`)
			h.message("m", RootConversation, RootConversation, "hi")
		}, true},
		{"bare wait", func(h *agHarness) { h.call(RootConversation, "x", "wait", `{}`) }, false},
		{"exact wait", func(h *agHarness) { h.call(RootConversation, "x", "wait", `{"tool_call_id":"nope"}`) }, false},
		{"invalid timed wait", func(h *agHarness) { h.call(RootConversation, "x", "wait", `{"timeout_minutes":0}`) }, false},
		{"a child's status", func(h *agHarness) {
			c := h.create(RootConversation, "")
			h.call(c, "x", "status", `{"state":"working","title":"t"}`)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newAg(t, Options{})
			h.timedOut("w1")
			h.timedOut("w2")
			tt.between(h)
			h.skip()
			got3 := h.timedOut("w3")
			got4 := h.timedOut("w4")
			got5 := h.timedOut("w5")
			advice := specTimedOut + "\nadvice: " + specAdvice
			if tt.reset {
				if got3 != specTimedOut || got4 != specTimedOut || got5 != advice {
					t.Errorf("after a reset: %q, %q, %q; want the advice on the third only", got3, got4, got5)
				}
			} else if got3 != advice || got4 != specTimedOut || got5 != specTimedOut {
				t.Errorf("without a reset: %q, %q, %q; want the advice on the first only", got3, got4, got5)
			}
		})
	}
}

// The advice is never given while the status is `waiting`; it is given for every other status.
func TestAgentTimedWaitNoAdviceWhileWaiting(t *testing.T) {
	for _, state := range []string{"waiting", "working", "blocked", "done"} {
		t.Run(state, func(t *testing.T) {
			h := newAg(t, Options{})
			h.call(RootConversation, "s", "status", `{"state":"`+state+`","title":"t"}`)
			h.skip()
			var got []string
			for i := range 5 {
				got = append(got, h.timedOut(fmt.Sprintf("w%d", i)))
			}
			for i, c := range got {
				want := specTimedOut
				if i == 2 && state != "waiting" {
					want += "\nadvice: " + specAdvice
				}
				if c != want {
					t.Errorf("timeout %d = %q, want %q", i+1, c, want)
				}
			}
		})
	}
	t.Run("never set", func(t *testing.T) {
		h := newAgRaw(t, Options{})
		var got []string
		for i := range 3 {
			got = append(got, h.timedOut(fmt.Sprintf("w%d", i)))
		}
		if got[2] != specTimedOut+"\nadvice: "+specAdvice {
			t.Errorf("third timeout = %q", got[2])
		}
	})
}
