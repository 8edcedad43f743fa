package wiretest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// resultTools: instant (default 10 s timeout), t1 (1 s timeout), job (deferrable).
func resultTools() []map[string]any {
	return []map[string]any{
		decl("instant"),
		decl("t1", "timeout", "1s"),
		decl("job", "deferred", true, "timeout", "30s"),
	}
}

// TestToolCallAndResults covers dispatch and results (SPEC 5, 13): the tool_call a host gets,
// a string output passed as it is, other JSON compact, an error result, and a result by handle.
func TestToolCallAndResults(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", resultTools()...)

		// The tool_call of SPEC 5.
		s.agentCall("a1", "instant", json.RawMessage(`{"n": "a1", "q": {"deep": [1, 2.5, "x"]}}`))
		tc := h.Expect(callFor("a1"))
		if !callIDPattern.MatchString(tc.Str("call_id")) {
			t.Errorf("call_id %q is not call_ + 20 of [a-z2-7]", tc.Str("call_id"))
		}
		if tc.Str("name") != "instant" || tc.Bool("deferred") || tc.Int("timeout_ms") != 10000 || tc.Str("session_id") != s.sid {
			t.Errorf("tool_call %s: want name instant, deferred false, timeout_ms 10000, session_id %s", tc, s.sid)
		}
		if _, ok := tc.M["deferred"].(bool); !ok {
			t.Errorf("tool_call %s: deferred must be present", tc)
		}
		if got := tc.Compact("arguments"); got != `{"n":"a1","q":{"deep":[1,2.5,"x"]}}` {
			t.Errorf("tool_call arguments %s", got)
		}
		if tc.Str("call_id") == "a1" {
			t.Errorf("the host got the agent's call id, not a broker call id")
		}

		cases := []struct{ output, content string }{
			{`"plain text\nsecond line"`, "plain text\nsecond line"},
			{`{ "b" : [1, 2, {"c": null}],  "a": "x y" }`, `{"b":[1,2,{"c":null}],"a":"x y"}`},
			{`[ ]`, `[]`},
			{`42`, `42`},
			{`true`, `true`},
		}
		for i, c := range cases {
			id := fmt.Sprintf("r%d", i)
			tc := s.call(h, id, "instant")
			result(h, tc.Str("call_id"), "", c.output)
			r := s.agentResult(id)
			if r.Str("kind") != "result" || r.Str("content") != c.content {
				t.Errorf("output %s reached the agent as %s, want kind result, content %q", c.output, r, c.content)
			}
		}
		h.Absent(100*time.Millisecond, Type("error"))

		// An error result.
		tc = s.call(h, "e1", "instant")
		h.Send(map[string]any{"type": "tool_result", "id": "err-1", "call_id": tc.Str("call_id"), "error": "disk on fire"})
		if r := s.agentResult("e1"); r.Str("kind") != "error" || r.Str("content") != "error: disk on fire" {
			t.Errorf("error result reached the agent as %s", r)
		}
		// Exactly one of output and error; exactly one of call_id and handle.
		for i, bad := range []map[string]any{
			{"call_id": tc.Str("call_id")},
			{"call_id": tc.Str("call_id"), "output": 1, "error": "x"},
			{"output": 1},
			{"call_id": tc.Str("call_id"), "handle": "h", "output": 1},
		} {
			bad["type"], bad["id"] = "tool_result", fmt.Sprintf("bad-%d", i)
			h.Send(bad)
			if e := h.Expect("error"); e.Str("code") != "bad_frame" || e.Str("ref") != bad["id"] {
				t.Errorf("tool_result %v answered %s, want bad_frame", bad, e)
			}
		}

		// A result by handle after a defer; the agent consumes it with wait.
		tc = s.call(h, "d1", "job")
		wantAck(t, deferCall(t, h, tc.Str("call_id"), "res-handle", "Resolving"), true, "")
		result(h, "", "res-handle", `{"rows": 3}`)
		p := s.agent.Expect(Type("agent.prompt"))
		for strings.Contains(p.Str("text"), "Reminder") {
			p = s.agent.Expect(Type("agent.prompt"))
		}
		if p.Str("text") != "[internal] Tool call `d1` completed. Its result is queued; use `wait` to consume it." {
			t.Errorf("completion prompt %s", p)
		}
		if r := s.waitResult("d1"); r.Str("kind") != "result" || r.Str("content") != `{"rows":3}` {
			t.Errorf("wait for d1: %s", r)
		}
		es := s.timeline()
		if r := find(es, "result", tc.Str("call_id")); len(r) != 1 || r[0].Handle != "res-handle" {
			t.Errorf("timeline result entries for d1: %v", r)
		}
	})
}

// TestTimeoutsAndProgress covers the ordinary timeout (SPEC 5, 7): tool_cancel reason timeout
// and an error for the agent; progress every 500 ms keeps a 1 s timeout from firing; a late
// result gets call_finished and is recorded as late_result_dropped.
func TestTimeoutsAndProgress(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", resultTools()...)

		// Progress keeps it alive past several timeouts (the test runs both calls at once).
		kept := s.call(h, "p1", "t1")
		keptID := kept.Str("call_id")
		silent := s.call(h, "s1", "t1")
		silentAt := time.Now()
		silentID := silent.Str("call_id")
		var last time.Time
		for i := 0; i < 6; i++ {
			h.Absent(450*time.Millisecond, TypeWith("tool_cancel", "call_id", keptID))
			h.Send(map[string]any{"type": "tool_progress", "id": fmt.Sprintf("prog-%d", i), "call_id": keptID, "note": fmt.Sprintf("step %d", i)})
			last = time.Now()
		}
		// Meanwhile the silent call timed out after 1 s.
		c := h.Expect(TypeWith("tool_cancel", "call_id", silentID))
		if el := c.At.Sub(silentAt); c.Str("reason") != "timeout" || el < 900*time.Millisecond || el > 5*time.Second {
			t.Errorf("silent call: %s %v after dispatch, want reason timeout after its 1 s timeout", c, el)
		}
		if r := s.agentResult("s1"); r.Str("kind") != "error" || !strings.HasPrefix(r.Str("content"), "error: ") {
			t.Errorf("agent's answer to the timed-out call: %s", r)
		}
		// Progress is answered with nothing.
		h.Absent(0, func(f Frame) bool { return strings.HasPrefix(f.Str("ref"), "prog-") })
		// Once the progress stops, the kept call times out one silent second later.
		c = h.Expect(TypeWith("tool_cancel", "call_id", keptID))
		if el := time.Since(last); c.Str("reason") != "timeout" || el < 850*time.Millisecond {
			t.Errorf("kept call: %s %v after its last progress, want reason timeout after ~1 s", c, el)
		}
		if el := time.Since(kept.At); el < 3*time.Second {
			t.Errorf("kept call timed out %v after dispatch: progress did not re-arm it", el)
		}
		if r := s.agentResult("p1"); r.Str("kind") != "error" {
			t.Errorf("agent's answer to the timed-out call: %s", r)
		}
		h.Absent(200*time.Millisecond, Type("tool_cancel")) // once per job

		// A late result: call_finished, and the timeline records it.
		id := result(h, keptID, "", `"too late"`)
		e := h.Expect("error")
		if e.Str("code") != "call_finished" || e.Str("ref") != id || e.Str("call_id") != keptID {
			t.Errorf("late result answered %s, want call_finished with ref %s and call_id %s", e, id, keptID)
		}
		h.Send(map[string]any{"type": "tool_progress", "id": "late-prog", "call_id": keptID, "note": "x"})
		if e := h.Expect("error"); e.Str("code") != "call_finished" || e.Str("ref") != "late-prog" {
			t.Errorf("progress on a finished job answered %s, want call_finished", e)
		}
		es := s.waitTimeline("late_result_dropped", has("late_result_dropped", keptID))
		if n := len(find(es, "tool_deadline_timeout", keptID)); n != 1 {
			t.Errorf("%d tool_deadline_timeout entries for the kept call, want 1", n)
		}
		if n := len(find(es, "progress", keptID)); n != 6 {
			t.Errorf("%d progress entries, want 6", n)
		}
		if len(find(es, "result", keptID)) != 0 {
			t.Errorf("a late result was recorded as a result")
		}
	})
}

// TestJobCancel covers job.cancel (SPEC 5, 11): cancelled, already_canceled, already_done,
// unknown_call, by call id and by handle, and exactly one tool_cancel reason host_request.
func TestJobCancel(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", resultTools()...)
		other := s.host("other-host") // a second host connection of the session, no tools
		cancel := func(on *Conn, target map[string]any, want, wantCallID string) {
			t.Helper()
			id := nextID("cancel-")
			m := map[string]any{"type": "job.cancel", "id": id}
			for k, v := range target {
				m[k] = v
			}
			on.Send(m)
			r := on.Expect(func(f Frame) bool { return f.Type == "job.cancel_result" || f.Type == "error" })
			if r.Type != "job.cancel_result" || r.Str("result") != want || r.Str("ref") != id || r.Str("call_id") != wantCallID {
				t.Fatalf("job.cancel %v answered %s, want job.cancel_result %s with ref %s, call_id %q", target, r, want, id, wantCallID)
			}
		}

		// A pending job, by call id.
		id1 := s.call(h, "c1", "job").Str("call_id")
		cancel(h, map[string]any{"call_id": id1}, "cancelled", id1)
		tcan := h.Expect(TypeWith("tool_cancel", "call_id", id1))
		if tcan.Str("reason") != "host_request" {
			t.Errorf("tool_cancel %s, want reason host_request", tcan)
		}
		if r := s.agentResult("c1"); r.Str("kind") != "error" || r.Str("content") != "error: Tool call canceled" {
			t.Errorf("agent's answer to a cancelled call: %s", r)
		}
		cancel(h, map[string]any{"call_id": id1}, "already_canceled", id1)
		cancel(other, map[string]any{"call_id": id1}, "already_canceled", id1)
		id := result(h, id1, "", `"after cancel"`)
		if e := h.Expect("error"); e.Str("code") != "call_finished" || e.Str("ref") != id {
			t.Errorf("result after cancel answered %s, want call_finished", e)
		}

		// A deferred job, by handle, from another host connection of the session.
		id2 := s.deferJob(h, "c2", "job", "cancel-me", "")
		cancel(other, map[string]any{"handle": "cancel-me"}, "cancelled", id2)
		tcan = h.Expect(TypeWith("tool_cancel", "call_id", id2))
		if tcan.Str("reason") != "host_request" || tcan.Str("handle") != "cancel-me" {
			t.Errorf("tool_cancel %s, want reason host_request with handle cancel-me", tcan)
		}
		cancel(h, map[string]any{"handle": "cancel-me"}, "already_canceled", id2)

		// A completed job.
		id3 := s.call(h, "c3", "instant").Str("call_id")
		result(h, id3, "", `"done"`)
		s.agentResult("c3")
		cancel(h, map[string]any{"call_id": id3}, "already_done", id3)

		// Unknown.
		cancel(h, map[string]any{"call_id": missingCallID}, "unknown_call", "")
		cancel(h, map[string]any{"handle": "no-such-handle"}, "unknown_call", "")

		// Exactly one tool_cancel per job, none for the completed one; nothing for the other host.
		h.Absent(300*time.Millisecond, Type("tool_cancel"))
		other.Absent(0, Type("tool_cancel"))
		es := s.timeline()
		if n := len(find(es, "cancel", id1)); n != 1 {
			t.Errorf("%d cancel entries for c1, want 1", n)
		}
		if n := len(find(es, "duplicate_cancel", id1)); n != 2 {
			t.Errorf("%d duplicate_cancel entries for c1, want 2", n)
		}
		if n := len(find(es, "late_result_dropped", id1)); n != 1 {
			t.Errorf("%d late_result_dropped entries for c1, want 1", n)
		}
		if c := find(es, "cancel", id2); len(c) != 1 || c[0].Detail["reason"] != "host_request" {
			t.Errorf("cancel entries for c2: %v", c)
		}
	})
}

// TestExactlyOnce races results against cancels from two connections (SPEC 5): every job ends
// exactly once, and every side agrees on which won — a tool_cancel and call_finished for the
// result when the cancel won; already_done and no tool_cancel when the result won.
func TestExactlyOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "timeout", "30s"))
		canceller := s.host("canceller")
		const n = 20
		ids := make([]string, n)
		for i := range ids {
			ids[i] = s.call(h, fmt.Sprintf("x%d", i), "job").Str("call_id")
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i, id := range ids {
				_ = canceller.SendErr(map[string]any{"type": "job.cancel", "id": fmt.Sprintf("k%d", i), "call_id": id})
			}
		}()
		for i, id := range ids {
			h.Send(map[string]any{"type": "tool_result", "id": fmt.Sprintf("r%d", i), "call_id": id, "output": i})
		}
		<-done
		cancelled := 0
		for i, id := range ids {
			cr := canceller.Expect(TypeWith("job.cancel_result", "ref", fmt.Sprintf("k%d", i)))
			agent := s.agentResult(fmt.Sprintf("x%d", i))
			switch cr.Str("result") {
			case "cancelled":
				cancelled++
				h.Expect(TypeWith("tool_cancel", "call_id", id))
				if e := h.Expect(TypeWith("error", "ref", fmt.Sprintf("r%d", i))); e.Str("code") != "call_finished" {
					t.Errorf("result that lost to a cancel: %s", e)
				}
				if agent.Str("content") != "error: Tool call canceled" {
					t.Errorf("agent after a cancel won: %s", agent)
				}
			case "already_done":
				if agent.Str("content") != fmt.Sprint(i) {
					t.Errorf("agent after a result won: %s", agent)
				}
			default:
				t.Errorf("job.cancel_result %s", cr)
			}
		}
		// Nothing more: no second tool_cancel, no error for a result that won.
		h.Absent(300*time.Millisecond, Type("error"))
		tcs := 0
		for _, f := range h.History() {
			if f.Type == "tool_cancel" {
				tcs++
			}
		}
		if tcs != cancelled {
			t.Errorf("%d tool_cancel frames for %d cancelled jobs", tcs, cancelled)
		}
		es := s.timeline()
		for _, id := range ids {
			if n := len(find(es, "result", id)) + len(find(es, "cancel", id)); n != 1 {
				t.Errorf("job %s has %d terminal entries, want 1", id, n)
			}
		}
		t.Logf("%d of %d races won by the cancel", cancelled, n)
	})
}

// TestDeferredTimeout covers the deferred clock (SPEC 5, 6): nothing extends it — progress does
// not — and at deadline_ms the job times out with tool_cancel reason timeout (with its handle),
// timeline tool_deadline_timeout, and the agent's result is an error.
func TestDeferredTimeout(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("brief", "deferred", true, "deferred_timeout", 1200, "timeout", "30s"))
		id := s.call(h, "a1", "brief").Str("call_id")
		ack := deferCall(t, h, id, "brief-job", "")
		wantAck(t, ack, true, "")
		deadline := time.UnixMilli(ack.Int("deadline_ms"))
		for i := 0; i < 4; i++ {
			time.Sleep(250 * time.Millisecond)
			h.Send(map[string]any{"type": "tool_progress", "handle": "brief-job", "note": "keep me alive"})
		}
		c := h.Expect(TypeWith("tool_cancel", "call_id", id))
		if c.Str("reason") != "timeout" || c.Str("handle") != "brief-job" {
			t.Errorf("tool_cancel %s, want reason timeout with handle brief-job", c)
		}
		if d := c.At.Sub(deadline); d < -50*time.Millisecond || d > 3*time.Second {
			t.Errorf("timed out %v from its deadline_ms: progress extended it, or the deadline was missed", d)
		}
		if r := s.waitResult("a1"); r.Str("kind") != "error" {
			t.Errorf("wait for a timed-out deferred call: %s", r)
		}
		id2 := result(h, "", "brief-job", `"too late"`)
		if e := h.Expect("error"); e.Str("code") != "call_finished" || e.Str("ref") != id2 {
			t.Errorf("late result: %s", e)
		}
		es := s.waitTimeline("late_result_dropped", has("late_result_dropped", id))
		if len(find(es, "tool_deadline_timeout", id)) != 1 {
			t.Errorf("no tool_deadline_timeout entry:\n%s", dumpEntries(es))
		}
	})
}

// TestBackgroundAfter covers SPEC 13 with the broker's background_after (1 s here): a call not
// finished by then is answered with the background placeholder, its completion is announced with
// the internal prompt, and wait consumes the result once.
func TestBackgroundAfter(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("slowish", "timeout", "30s"))
		start := time.Now()
		tc := s.call(h, "a1", "slowish")
		ph := s.agent.Expect(TypeWith("agent.tool_result", "call_id", "a1"))
		if el := time.Since(start); ph.Str("kind") != "background_placeholder" || el < 900*time.Millisecond {
			t.Errorf("%v after the call: %s, want the placeholder after background_after (1 s)", el, ph)
		}
		if ph.Str("content") != "internal: true\n\nTool call `a1` is running in the background." {
			t.Errorf("placeholder content %q", ph.Str("content"))
		}
		result(h, tc.Str("call_id"), "", `{"late":true}`)
		p := s.agent.Expect(func(f Frame) bool { return f.Type == "agent.prompt" && strings.Contains(f.Str("text"), "`a1`") })
		if p.Str("text") != "[internal] Tool call `a1` completed. Its result is queued; use `wait` to consume it." || !p.Bool("internal") || p.Str("conversation_id") != "root" {
			t.Errorf("completion prompt %s", p)
		}
		if r := s.waitResult("a1"); r.Str("kind") != "result" || r.Str("content") != `{"late":true}` {
			t.Errorf("wait a1: %s", r)
		}
		if r := s.waitResult("a1"); r.Str("content") != "error: Tool call result already consumed" {
			t.Errorf("second wait a1: %s", r)
		}
	})
}

// TestParentCancel covers SPEC 11's parents and children: cancelling the call that stands for a
// sub-agent closes the open calls of its conversation with reason parent_cancelled, after the
// parent's own transition, exactly once; their late results are dropped.
func TestParentCancel(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))
		// The local call that stands for the sub-agent, and its conversation.
		s.agent.Send(map[string]any{"type": "agent.tool_call", "call_id": "sub", "conversation_id": "root", "name": "research", "arguments": map[string]any{}, "local": true})
		s.agent.Send(map[string]any{"type": "conversation.create", "id": "cc", "parent_conversation_id": "root", "parent_call_id": "sub"})
		child := s.agent.Expect(TypeWith("conversation.created", "ref", "cc")).Str("conversation_id")
		if child == "" || child == "root" {
			t.Fatalf("conversation.created without a new id")
		}
		call := func(agentID string) string {
			s.agent.Send(map[string]any{"type": "agent.tool_call", "call_id": agentID, "conversation_id": child, "name": "job", "arguments": map[string]any{"n": agentID}})
			return h.Expect(callFor(agentID)).Str("call_id")
		}
		pending := call("c1")
		deferred := call("c2")
		wantAck(t, deferCall(t, h, deferred, "child-job", ""), true, "")
		finished := call("c3")
		result(h, finished, "", `"before"`)
		s.agentResult("c3")

		s.agentCall("cx", "cancel", map[string]any{"tool_call_id": "sub"})
		if r := s.agentResult("cx"); r.Str("content") != "Tool cancellation requested" {
			t.Fatalf("cancel of the sub-agent's call: %s", r)
		}
		lc := s.agent.Expect(Type("agent.local_cancel"))
		if lc.Str("call_id") != "sub" || lc.Str("conversation_id") != "root" {
			t.Errorf("agent.local_cancel %s", lc)
		}
		for _, id := range []string{pending, deferred} {
			if c := h.Expect(TypeWith("tool_cancel", "call_id", id)); c.Str("reason") != "parent_cancelled" {
				t.Errorf("child call: %s, want reason parent_cancelled", c)
			}
		}
		h.Absent(300*time.Millisecond, Type("tool_cancel"))
		id := result(h, "", "child-job", `"orphan"`)
		if e := h.Expect("error"); e.Str("code") != "call_finished" || e.Str("ref") != id {
			t.Errorf("late result of a cancelled child: %s", e)
		}
		es := s.waitTimeline("late_result_dropped", has("late_result_dropped", deferred))
		var parentAt = -1
		for i, e := range es {
			if e.Kind == "cancel" && e.Detail["reason"] != "parent_cancelled" {
				parentAt = i
			}
		}
		for i, e := range es {
			if e.Kind == "cancel" && e.Detail["reason"] == "parent_cancelled" && (parentAt < 0 || i < parentAt) {
				t.Errorf("child cancelled before its parent's own transition:\n%s", dumpEntries(es))
			}
		}
		for _, id := range []string{pending, deferred} {
			if n := len(find(es, "cancel", id)); n != 1 {
				t.Errorf("%d cancel entries for %s, want 1", n, id)
			}
		}
		if len(find(es, "cancel", finished)) != 0 {
			t.Errorf("a finished child call was cancelled")
		}
	})
}
