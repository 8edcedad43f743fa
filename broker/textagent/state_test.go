package textagent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/frames"
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

// TestSettledCallsLeaveTheState: a call that is over for good (finished, its result given,
// nothing waiting on it) leaves the exported state for ExportJournal's settled calls, given
// once; so what an event journals does not grow with the session's history. An agent restored
// from the state and the settled calls still refuses their ids and answers a wait or cancel
// naming them as before.
func TestSettledCallsLeaveTheState(t *testing.T) {
	opts := Options{BackgroundAfter: 2 * time.Second}
	h := newAg(t, opts)
	for i := range 20 {
		id := fmt.Sprintf("c%d", i)
		h.call(RootConversation, id, "quick", `{}`)
		h.complete(RootConversation, id, `"done"`)
	}
	h.skip()
	h.bg(RootConversation, "b1", "b2")
	h.complete(RootConversation, "b1", `"one"`) // queued for wait: not settled
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"b1"}`)
	h.complete(RootConversation, "b2", `"two"`) // queued, announced: not settled
	h.skip()

	st, settled, reset := h.a.ExportJournal()
	if reset {
		t.Error("first ExportJournal: reset, want the settled calls appended")
	}
	if len(settled) != 23 { // the harness's status call, c0…c19, b1 and the wait that consumed it
		t.Errorf("settled calls: %d (%+v), want 23", len(settled), settled)
	}
	var live []string
	for _, k := range st.Conversations[0].Calls {
		live = append(live, k.ID)
	}
	if !slices.Equal(live, []string{"b2"}) {
		t.Errorf("calls left in the state: %v, want [b2] (its result is not consumed)", live)
	}
	first, _ := json.Marshal(st)
	st2, again, _ := h.a.ExportJournal()
	if second, _ := json.Marshal(st2); len(again) != 0 || !bytes.Equal(first, second) {
		t.Errorf("a second ExportJournal of the same state: %d settled calls, state changed %v; want none, the same bytes", len(again), !bytes.Equal(first, second))
	}
	full := h.a.Export()
	if len(full.Settled) != 23 || len(full.Conversations[0].Calls) != 1 {
		t.Errorf("Export: %d settled calls and %d others, want 23 and 1", len(full.Settled), len(full.Conversations[0].Calls))
	}

	// Through JSON, as the journal keeps them, to another node.
	var moved State
	if err := json.Unmarshal(first, &moved); err != nil {
		t.Fatal(err)
	}
	for _, sc := range settled {
		b, _ := json.Marshal(sc)
		var back SettledCall
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		moved.Settled = append(moved.Settled, back)
	}
	for _, tm := range h.timers {
		tm.stopped = true
	}
	h.a = Restore(h.agEnv, opts, moved)
	h.handle(&frames.AgentToolCall{Request: frames.Request{ID: "dup"}, ConversationID: RootConversation, CallID: "c7", Name: "quick", Arguments: json.RawMessage(`{}`)})
	h.expect(agE("dup", frames.CodeBadFrame))
	h.call(RootConversation, "w2", "wait", `{"tool_call_id":"c7"}`)
	h.expect(agErr("w2", "error: "+MsgResultAlreadyConsumed))
	h.call(RootConversation, "x", "cancel", `{"tool_call_id":"c3"}`)
	h.expect(agErr("x", "error: "+MsgToolCallAlreadyDone))
	h.call(RootConversation, "w3", "wait", `{"tool_call_id":"b2"}`)
	if r := h.result("w3"); !strings.Contains(r.Content, "two") {
		t.Errorf("the unconsumed result after the move: %q", r.Content)
	}
	// The restored agent's journal gets every settled call again (it may not have them).
	_, settled, reset = h.a.ExportJournal()
	if !reset || len(settled) < 23 {
		t.Errorf("first ExportJournal after a restore: reset %v with %d settled calls; want a reset with all of them", reset, len(settled))
	}
}

// TestSettledCallChangedIsJournaledAgain: a settled call can still change in one way — a cancel
// of it sent again after a takeover is taken as the cancel its job ended by (see cancelCall).
// The next ExportJournal then gives every settled call again, as a reset, with the change.
func TestSettledCallChangedIsJournaledAgain(t *testing.T) {
	h := newAg(t, Options{})
	h.bg(RootConversation, "c1")
	h.end(RootConversation, "c1", Outcome{State: jobs.Cancelled, CancelReason: frames.CancelAgentRequest})
	h.call(RootConversation, "w", "wait", `{"tool_call_id":"c1"}`)
	h.skip()
	if _, settled, _ := h.a.ExportJournal(); !slices.ContainsFunc(settled, func(sc SettledCall) bool { return sc.ID == "c1" }) {
		t.Fatalf("c1 (cancelled, its result waited for) is not settled: %+v", settled)
	}
	h.call(RootConversation, "x", "cancel", `{"tool_call_id":"c1"}`)
	h.expect(agOK("x", specCancelOK))
	_, settled, reset := h.a.ExportJournal()
	i := slices.IndexFunc(settled, func(sc SettledCall) bool { return sc.ID == "c1" })
	if !reset || i < 0 || !settled[i].CancelRequested {
		t.Errorf("after the cancel sent again: reset %v, settled %+v; want a reset with c1's cancel requested", reset, settled)
	}
	h.call(RootConversation, "x2", "cancel", `{"tool_call_id":"c1"}`)
	h.expect(agErr("x2", "error: Tool call already canceled"))
}
