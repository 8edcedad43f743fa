package textagent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/jobs"
)

// TestStateMovesWithTheSession: an agent's State, through JSON, restores an agent that goes on
// exactly where the first one stood (SPEC 15): a queued background result is still there for
// `wait`, a running call goes to the background when its BackgroundAfter has passed since it
// started (not since the restore), and a blocked timed wait returns at its own deadline.
func TestStateMovesWithTheSession(t *testing.T) {
	opts := Options{BackgroundAfter: 2 * time.Second}
	h := newAg(t, opts)
	h.call(RootConversation, "c1", "slow", `{}`)
	h.advance(2 * time.Second)
	h.end(RootConversation, "c1", Outcome{State: jobs.Completed, Output: json.RawMessage(`"one"`)})
	h.call(RootConversation, "c2", "slow", `{}`)
	h.advance(time.Second)
	h.call(RootConversation, "w", "wait", `{"timeout_minutes":5}`)
	h.skip()

	raw, err := json.Marshal(h.a.Export())
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	for _, tm := range h.timers {
		tm.stopped = true // the first node is gone: its clocks with it
	}
	h.a = Restore(h.agEnv, opts, st)

	h.advance(999 * time.Millisecond)
	h.expectNone()
	h.advance(time.Millisecond)
	h.expect(agPH("c2"))
	h.advance(5*time.Minute - time.Second - time.Millisecond)
	h.expectNone()
	h.advance(time.Millisecond)
	h.expect(agOK("w", specTimedOut))
	h.call(RootConversation, "w2", "wait", `{"tool_call_id":"c1"}`)
	if r := h.result("w2"); !strings.Contains(r.Content, "one") {
		t.Errorf("the queued result after the move: %q", r.Content)
	}
	h.end(RootConversation, "c2", Outcome{State: jobs.Completed, Output: json.RawMessage(`"two"`)})
	h.expect(agPI(RootConversation, specCompletion("c2")))
}
