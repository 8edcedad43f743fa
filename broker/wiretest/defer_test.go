package wiretest

import (
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// deferTools are the tools of the defer tests: bg may be deferred (1 h job clock), plain may not,
// short may be deferred but times out 1 s after dispatch while pending.
func deferTools() []map[string]any {
	return []map[string]any{
		decl("bg", "deferred", true, "deferred_timeout", "1h", "timeout", "30s"),
		decl("plain", "timeout", "30s"),
		decl("short", "deferred", true, "timeout", 1000),
	}
}

// A handle of the form of a broker call id is reserved; these look alike but are not.
const (
	reservedHandle = "call_abcdefghijklmnopqrst"  // call_ + 20 of [a-z2-7]
	lookAlike1     = "call_abcdefghijklmnopqrs1"  // '1' is not in [a-z2-7]
	lookAlike2     = "call_abcdefghijklmnopqrstu" // 21 characters
	lookAlike3     = "CALL_ABCDEFGHIJKLMNOPQRST"
)

// TestDeferAckRows drives every row of the defer-ack table of SPEC 6 over the wire, with its
// exact reason, and the order of the rows: each situation that matches two rows is answered by
// the earlier one.
func TestDeferAckRows(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", deferTools()...)
		rej := func(callID, handle, reason string) {
			t.Helper()
			wantAck(t, deferCall(t, h, callID, handle, ""), false, reason)
		}

		c1 := s.call(h, "a1", "bg")
		id1 := c1.Str("call_id")
		// Row 1: invalid handles — empty, over 128 bytes, control characters — even for an
		// unknown call (row 1 before row 2).
		for _, bad := range []string{"", strings.Repeat("h", 129), "tab\there", "nl\nhere", "nul\x00here", "esc\x1bhere", "del\x7fhere", "c1\u0085here"} {
			rej(id1, bad, "invalid_handle")
			rej(missingCallID, bad, "invalid_handle")
		}
		// Row 2: unknown call, whatever the handle (before reserved / in use).
		rej(missingCallID, "fresh-handle", "unknown_call")
		rej("not-a-call-id", "fresh-handle", "unknown_call")
		rej(missingCallID, reservedHandle, "unknown_call")
		// Row 6: a handle of the form of a broker call id is reserved; its look-alikes are not
		// (they are used and accepted below).
		rej(id1, reservedHandle, "handle_reserved")
		rej(id1, id1, "handle_reserved") // its own call id

		// Row 9: a fresh handle is accepted with deadline now + deferred_timeout (1 h).
		before := time.Now()
		ack := deferCall(t, h, id1, "h-one", "Working on one")
		after := time.Now()
		wantAck(t, ack, true, "")
		dl := ack.Int("deadline_ms")
		if lo, hi := before.Add(time.Hour).UnixMilli()-1000, after.Add(time.Hour).UnixMilli()+1000; dl < lo || dl > hi {
			t.Errorf("deadline_ms %d, want now + 1h (%d..%d)", dl, lo, hi)
		}
		// The agent gets its hand-off at once (background_after is 30 s here).
		ph := s.agent.ExpectWithin(5*time.Second, TypeWith("agent.tool_result", "call_id", "a1"))
		if ph.Str("kind") != "background_placeholder" || ph.Str("content") != "internal: true\n\nTool call `a1` is running in the background." {
			t.Errorf("agent's answer to a deferred call: %s, want the background placeholder", ph)
		}

		// Row 3 before row 4: a repeat of the accepted defer is accepted again, same deadline.
		rep := deferCall(t, h, id1, "h-one", "Working on one")
		wantAck(t, rep, true, "")
		if rep.Int("deadline_ms") != dl {
			t.Errorf("repeat ack deadline_ms %d, want the same %d", rep.Int("deadline_ms"), dl)
		}
		// Row 4: the job is no longer pending: another handle, or a reserved one (row 4 before 6).
		rej(id1, "h-two", "call_not_pending")
		rej(id1, reservedHandle, "call_not_pending")
		rej(id1, "", "invalid_handle")

		// Row 5: a tool not declared deferred — before reserved (6) and in use (7).
		c2 := s.call(h, "a2", "plain")
		id2 := c2.Str("call_id")
		rej(id2, "h-plain", "not_deferrable")
		rej(id2, reservedHandle, "not_deferrable")
		rej(id2, "h-one", "not_deferrable")
		// The rejected defers left it pending: it still completes.
		result(h, id2, "", `"plain done"`)
		if r := s.agentResult("a2"); r.Str("kind") != "result" || r.Str("content") != "plain done" {
			t.Errorf("plain call answered %s", r)
		}
		// Finished, not deferrable: row 4 comes first.
		rej(id2, "h-plain-2", "call_not_pending")

		// Row 7: handle held by a live job; row 6 before it for a reserved handle.
		c3 := s.call(h, "a3", "bg")
		id3 := c3.Str("call_id")
		rej(id3, "h-one", "handle_in_use")
		rej(id3, reservedHandle, "handle_reserved")
		// Row 8: once its job has ended, the handle is burned for good.
		result(h, "", "h-one", `{"done":1}`)
		s.waitTimeline("result of a1", has("result", id1))
		rej(id3, "h-one", "handle_burned")
		rej(id3, "h-one", "handle_burned")
		// Every rejection left a3 pending: a look-alike of a call id is a fresh handle.
		wantAck(t, deferCall(t, h, id3, lookAlike1, ""), true, "")

		c4 := s.call(h, "a4", "bg")
		id4 := c4.Str("call_id")
		rej(id4, lookAlike1, "handle_in_use")
		wantAck(t, deferCall(t, h, id4, lookAlike2, ""), true, "")
		c5 := s.call(h, "a5", "bg")
		wantAck(t, deferCall(t, h, c5.Str("call_id"), lookAlike3, ""), true, "")
		c6 := s.call(h, "a6", "bg")
		wantAck(t, deferCall(t, h, c6.Str("call_id"), strings.Repeat("é", 64), ""), true, "") // 128 bytes

		// The repeat made no second transition: one deferred entry for a1; every rejection is
		// on the timeline as defer_rejected with its reason.
		es := s.timeline()
		if n := len(find(es, "deferred", id1)); n != 1 {
			t.Errorf("%d deferred entries for a1, want 1 (a repeat is no transition):\n%s", n, dumpEntries(es))
		}
		reasons := map[string]bool{}
		for _, e := range find(es, "defer_rejected", "") {
			r, _ := e.Detail["reason"].(string)
			reasons[r] = true
		}
		for _, r := range []string{"invalid_handle", "unknown_call", "call_not_pending", "not_deferrable", "handle_reserved", "handle_in_use", "handle_burned"} {
			if !reasons[r] {
				t.Errorf("no defer_rejected entry with reason %s on the timeline", r)
			}
		}
	})
}

// TestHandlesPerTenant checks that handles are unique per tenant (SPEC 6): another session of the
// same tenant cannot take a live or burned handle, a session of another tenant can.
func TestHandlesPerTenant(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s1 := newSession(t, b, brokertest.KeyA)
		h1 := s1.host("host-1", deferTools()...)
		live := s1.deferJob(h1, "a1", "bg", "shared-live", "")
		done := s1.deferJob(h1, "a2", "bg", "shared-burned", "")
		result(h1, "", "shared-burned", `"ok"`)
		s1.waitTimeline("result", has("result", done))

		s2 := newSession(t, b, brokertest.KeyA)
		h2 := s2.host("host-2", deferTools()...)
		c := s2.call(h2, "b1", "bg").Str("call_id")
		wantAck(t, deferCall(t, h2, c, "shared-live", ""), false, "handle_in_use")
		wantAck(t, deferCall(t, h2, c, "shared-burned", ""), false, "handle_burned")
		wantAck(t, deferCall(t, h2, c, "own-handle", ""), true, "")

		sb := newSession(t, b, brokertest.KeyB)
		hb := sb.host("host-b", deferTools()...)
		x := sb.deferJob(hb, "c1", "bg", "shared-live", "")
		sb.deferJob(hb, "c2", "bg", "shared-burned", "")
		// Each tenant's job is addressed by its own handle: a result in tenant B leaves A's live.
		result(hb, "", "shared-live", `"b done"`)
		sb.waitTimeline("result", has("result", x))
		h1.Send(map[string]any{"type": "tool_progress", "id": "p1", "handle": "shared-live", "note": "still mine"})
		h1.Absent(300*time.Millisecond, Type("error"))
		result(h1, "", "shared-live", `"a done"`)
		es := s1.waitTimeline("result", has("result", live))
		if p := find(es, "progress", live); len(p) != 1 || p[0].Detail["note"] != "still mine" {
			t.Errorf("progress by handle in tenant A: %v", p)
		}
	})
}

// TestRejectedDeferStaysPending checks that a rejected defer is no deferral (SPEC 6): the job can
// still be deferred, and a job whose defers were all rejected times out on its ordinary timeout.
func TestRejectedDeferStaysPending(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", deferTools()...)
		burned := s.deferJob(h, "a0", "bg", "burned", "")
		result(h, "", "burned", `"x"`)
		s.waitTimeline("result", has("result", burned))

		tc := s.call(h, "a1", "short")
		dispatched := time.Now()
		id := tc.Str("call_id")
		if tc.Int("timeout_ms") != 1000 || !tc.Bool("deferred") {
			t.Errorf("tool_call %s: want timeout_ms 1000, deferred true", tc)
		}
		wantAck(t, deferCall(t, h, id, reservedHandle, ""), false, "handle_reserved")
		wantAck(t, deferCall(t, h, id, "burned", ""), false, "handle_burned")
		wantAck(t, deferCall(t, h, id, "", ""), false, "invalid_handle")
		cancel := h.Expect(TypeWith("tool_cancel", "call_id", id))
		if cancel.Str("reason") != "timeout" || cancel.Has("handle") {
			t.Errorf("tool_cancel %s: want reason timeout, no handle (never deferred)", cancel)
		}
		if el := time.Since(dispatched); el < 900*time.Millisecond {
			t.Errorf("timed out %v after dispatch, want its 1 s ordinary timeout", el)
		}
		if r := s.agentResult("a1"); r.Str("kind") != "error" || !strings.HasPrefix(r.Str("content"), "error: ") {
			t.Errorf("agent's answer to a timed-out call: %s, want an error", r)
		}
		wantAck(t, deferCall(t, h, id, "too-late", ""), false, "call_not_pending")
		s.waitTimeline("tool_deadline_timeout", has("tool_deadline_timeout", id))

		// A rejected job can be deferred afterwards, and then outlives the ordinary timeout.
		tc2 := s.call(h, "a2", "short")
		id2 := tc2.Str("call_id")
		wantAck(t, deferCall(t, h, id2, "burned", ""), false, "handle_burned")
		wantAck(t, deferCall(t, h, id2, "short-2", ""), true, "")
		h.Absent(1500*time.Millisecond, TypeWith("tool_cancel", "call_id", id2))
		result(h, "", "short-2", `"late but fine"`)
		if r := s.waitResult("a2"); r.Str("kind") != "result" || r.Str("content") != "late but fine" {
			t.Errorf("wait for the deferred call: %s", r)
		}
	})
}
