package wiretest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestPartialResults covers tool_partial_result over the wire (SPEC 7): it is answered with
// nothing on success, by call id and by handle; it re-arms the ordinary timeout of a pending job
// (only a fully silent window expires); on a finished job it is answered with call_finished
// (with its ref and the call id), by an unknown handle with unknown_call; every accepted one is
// on the timeline as partial.
func TestPartialResults(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("t1", "timeout", "1s"), decl("bg", "deferred", true, "timeout", "30s"))

		kept := s.call(h, "p1", "t1")
		id := kept.Str("call_id")
		var last time.Time
		for i := 0; i < 5; i++ {
			h.Absent(450*time.Millisecond, TypeWith("tool_cancel", "call_id", id))
			h.Send(map[string]any{"type": "tool_partial_result", "id": fmt.Sprintf("part-%d", i), "call_id": id,
				"segment": map[string]any{"row": i}})
			last = time.Now()
		}
		c := h.Expect(TypeWith("tool_cancel", "call_id", id))
		if el := time.Since(last); c.Str("reason") != "timeout" || el < 850*time.Millisecond {
			t.Errorf("SPEC 5: %s %v after the last partial result, want reason timeout after a silent 1 s", c, el)
		}
		if el := c.At.Sub(kept.At); el < 2500*time.Millisecond {
			t.Errorf("SPEC 7: timed out %v after dispatch: tool_partial_result did not re-arm the 1 s timeout", el)
		}
		if r := s.agentResult("p1"); r.Str("kind") != "error" {
			t.Errorf("agent's answer to the timed-out call: %s", r)
		}
		h.Absent(0, func(f Frame) bool { return strings.HasPrefix(f.Str("ref"), "part-") })

		// A finished job: call_finished.
		h.Send(map[string]any{"type": "tool_partial_result", "id": "late-part", "call_id": id, "segment": "late"})
		if e := h.Expect("error"); e.Str("code") != "call_finished" || e.Str("ref") != "late-part" || e.Str("call_id") != id {
			t.Errorf("SPEC 7: a partial result of a finished job answered %s, want call_finished with ref late-part and call_id %s", e, id)
		}

		// By handle: nothing on success; an unknown handle is unknown_call.
		d := s.deferJob(h, "d1", "bg", "part-handle", "")
		h.Send(map[string]any{"type": "tool_partial_result", "id": "hp", "handle": "part-handle", "segment": "half", "phase": "scan"})
		h.Send(map[string]any{"type": "tool_partial_result", "id": "hx", "handle": "no-such-part-handle", "segment": 1})
		if e := h.Expect("error"); e.Str("code") != "unknown_call" || e.Str("ref") != "hx" {
			t.Errorf("a partial result by an unknown handle answered %s, want unknown_call with ref hx", e)
		}
		h.Absent(0, TypeWith("error", "ref", "hp")) // the frame before it was answered with nothing
		es := s.waitTimeline("partial of d1", has("partial", d))
		if n := len(find(es, "partial", id)); n != 5 {
			t.Errorf("%d partial entries for p1, want 5:\n%s", n, dumpEntries(es))
		}
	})
}

// TestDeclarationDefaults covers the defaults of SPEC 4 as the wire shows them: a tool declared
// without timeout announces timeout_ms 10000; a deferred tool declared without deferred_timeout
// runs its job clock for 2 h (deadline_ms of the accepted defer), one with deferred_timeout in
// milliseconds for exactly that long.
func TestDeclarationDefaults(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("bg", "deferred", true), decl("bg90", "deferred", true, "deferred_timeout", 90*60*1000))
		for i, c := range []struct {
			tool string
			want time.Duration
		}{{"bg", 2 * time.Hour}, {"bg90", 90 * time.Minute}} {
			agentID := fmt.Sprintf("dd%d", i)
			tc := s.call(h, agentID, c.tool)
			if tc.Int("timeout_ms") != 10000 || !tc.Bool("deferred") {
				t.Errorf("SPEC 4: tool_call %s, want timeout_ms 10000 (the default) and deferred true", tc)
			}
			before := time.Now()
			ack := deferCall(t, h, tc.Str("call_id"), "defaults-"+c.tool, "")
			after := time.Now()
			wantAck(t, ack, true, "")
			if dl, lo, hi := ack.Int("deadline_ms"), before.Add(c.want).UnixMilli()-1000, after.Add(c.want).UnixMilli()+1000; dl < lo || dl > hi {
				t.Errorf("SPEC 4, 6: %s: deadline_ms %d, want now + %v (%d..%d)", c.tool, dl, c.want, lo, hi)
			}
		}
	})
}

// TestAgentJobCancelAndSessionEnd covers two frames from a text agent's connection: job.cancel
// cancels a host's job, by call id or handle, with reason agent_request (SPEC 11: the reason
// follows the sender's role) and is answered by job.cancel_result with its ref; session.end from
// the agent (any role, SPEC 3.6) ends the session — tool_cancel discard for the open job, then
// session.ended reason ended as the last frame of every connection, closed with 1000.
func TestAgentJobCancelAndSessionEnd(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))
		cancel := func(target map[string]any, wantCallID string) {
			t.Helper()
			id := nextID("acancel-")
			m := map[string]any{"type": "job.cancel", "id": id}
			for k, v := range target {
				m[k] = v
			}
			s.agent.Send(m)
			r := s.agent.Expect(func(f Frame) bool { return f.Str("ref") == id })
			if r.Type != "job.cancel_result" || r.Str("result") != "cancelled" || r.Str("call_id") != wantCallID {
				t.Fatalf("job.cancel %v from the agent answered %s, want job.cancel_result cancelled for %s", target, r, wantCallID)
			}
		}

		id1 := s.call(h, "a1", "job").Str("call_id")
		cancel(map[string]any{"call_id": id1}, id1)
		if c := h.Expect(TypeWith("tool_cancel", "call_id", id1)); c.Str("reason") != "agent_request" {
			t.Errorf("SPEC 11: tool_cancel %s after the agent's job.cancel, want reason agent_request", c)
		}
		if r := s.agentResult("a1"); r.Str("content") != "error: Tool call canceled" {
			t.Errorf("agent's answer to its cancelled call: %s", r)
		}
		id2 := s.deferJob(h, "a2", "job", "agent-cancel-handle", "")
		cancel(map[string]any{"handle": "agent-cancel-handle"}, id2)
		if c := h.Expect(TypeWith("tool_cancel", "call_id", id2)); c.Str("reason") != "agent_request" || c.Str("handle") != "agent-cancel-handle" {
			t.Errorf("SPEC 11: tool_cancel %s, want reason agent_request with the handle", c)
		}

		open := s.call(h, "a3", "job").Str("call_id")
		s.agent.Send(map[string]any{"type": "session.end", "id": "agent-bye"})
		for _, c := range []*Conn{h, s.agent} {
			c.ExpectClosed(websocket.StatusNormalClosure)
			hist := c.History()
			if last := hist[len(hist)-1]; last.Type != "session.ended" || last.Str("reason") != "ended" {
				t.Errorf("SPEC 3.6: %s: last frame %s, want session.ended reason ended", c.Name, last)
			}
		}
		n := 0
		for _, f := range h.History() {
			if f.Type == "tool_cancel" && f.Str("call_id") == open {
				n++
				if f.Str("reason") != "discard" {
					t.Errorf("SPEC 3.6: %s, want reason discard", f)
				}
			}
		}
		if n != 1 {
			t.Errorf("SPEC 3.6: %d tool_cancel for the open job, want 1", n)
		}
		if e := find(s.timeline(), "session_end", ""); len(e) != 1 || e[0].Detail["reason"] != "ended" {
			t.Errorf("session_end entries %v, want one with reason ended", e)
		}
	})
}

// TestOneCallerSlot covers SPEC 10: a session has at most one caller slot and never both a text
// agent and a caller. A second caller is forbidden (error with the hello's ref, close 1008), and
// so is a text agent beside the caller — also while the caller's connection has only dropped
// (its slot is resumable); once the slot's resume window has run out, a caller may attach again.
func TestOneCallerSlot(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{}, func(t *testing.T, b *brokertest.Broker) {
		sid, jt := createSession(t, b, brokertest.KeyA)
		s := &session{t: t, b: b, key: brokertest.KeyA, sid: sid, jt: jt}
		keeper := s.host("keeper") // keeps the session alive through the caller's absence
		caller := s.attach("caller", "caller", nil)
		refused := func(name, role string) {
			t.Helper()
			c := Dial(t, b.WSURL, name)
			e := c.Hello(map[string]any{"id": name, "role": role, "session_id": sid, "join_token": jt})
			if e.Type != "error" || e.Str("code") != "forbidden" || e.Str("ref") != name {
				t.Errorf("SPEC 10: %s hello answered %s, want error forbidden with ref %s", name, e, name)
			}
			c.ExpectClosed(websocket.StatusPolicyViolation)
		}
		refused("second-caller", "caller")
		refused("agent-beside-caller", "agent")
		if caller.IsClosed() || keeper.IsClosed() {
			t.Fatalf("a refused hello closed the session's connections")
		}

		caller.Cut()
		s.waitDisconnect(caller)
		refused("caller-while-dropped", "caller")
		refused("agent-while-dropped", "agent")

		s.waitTimeline("the caller slot's expiry", func(es []Entry) bool {
			for _, e := range find(es, "notice", "") {
				if e.Detail["text"] == "slot expired" && e.Detail["role"] == "caller" {
					return true
				}
			}
			return false
		})
		s.attach("new-caller", "caller", nil)
	})
}

// TestResumeWithoutTools covers who gets tool_deferred_resume (SPEC 10): every slot that has
// declared tools, even with jobs: [] — and so not a slot that never declared any.
func TestResumeWithoutTools(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("plain")
		token, last := h.Welcome.Str("resume_token"), h.LastSeq()
		h.Cut()
		s.waitDisconnect(h)
		h2, w := s.resume("plain-resumed", token, last, nil)
		if w.Type != "welcome" {
			t.Fatalf("resume answered %s", w)
		}
		h2.Absent(300*time.Millisecond, Type("tool_deferred_resume"))

		if d := declare(t, h2, decl("x")); d.Type != "tools.declared" {
			t.Fatalf("declare: %s", d)
		}
		token, last = w.Str("resume_token"), h2.LastSeq()
		h2.Cut()
		s.waitDisconnect(h2)
		h3, w3 := s.resume("declared-resumed", token, last, nil)
		if w3.Type != "welcome" {
			t.Fatalf("second resume answered %s", w3)
		}
		if r := h3.Next(); r.Type != "tool_deferred_resume" || r.Int("seq") != last+1 || r.Arr("jobs") == nil || len(r.Arr("jobs")) != 0 {
			t.Errorf("SPEC 10: after resuming a slot that declared tools: %s, want tool_deferred_resume {jobs: []} with seq %d", r, last+1)
		}
	})
}

// TestCallerAudioNotRateLimited covers SPEC 17's exception to the frame rate of SPEC 2: binary
// caller audio does not count toward it. A caller sends more audio messages than the burst of
// 200 frames, then text frames: every text frame is answered (unknown_frame with its ref), none
// with limit_exceeded. A binary message on a host connection is ignored.
func TestCallerAudioNotRateLimited(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.Options{})
	sid, jt := createSession(t, b, brokertest.KeyA)
	s := &session{t: t, b: b, key: brokertest.KeyA, sid: sid, jt: jt}
	host := s.host("host")
	caller := s.attach("caller", "caller", nil)
	silence := make([]byte, 160) // 20 ms of µ-law silence
	for i := range silence {
		silence[i] = 0xff
	}
	for i := 0; i < 300; i++ {
		if err := caller.SendBinary(silence); err != nil {
			t.Fatalf("caller audio %d: %v", i, err)
		}
	}
	for i := 0; i < 20; i++ {
		caller.Send(fmt.Sprintf(`{"type":"audio.probe","id":"ap%d"}`, i))
	}
	for i := 0; i < 20; i++ {
		ref := fmt.Sprintf("ap%d", i)
		if e := caller.Expect(TypeWith("error", "ref", ref)); e.Str("code") != "unknown_frame" {
			t.Errorf("SPEC 17: text frame %s after 300 audio messages answered %s, want unknown_frame (audio is not rate limited)", ref, e)
		}
	}
	caller.Absent(0, Error("limit_exceeded"))

	if err := host.SendBinary(silence); err != nil {
		t.Fatal(err)
	}
	host.Send(`{"type":"host.probe","id":"hp"}`)
	if e := host.Expect("error"); e.Str("code") != "unknown_frame" || e.Str("ref") != "hp" {
		t.Errorf("after a binary message on a host connection: %s, want just the answer to the next frame", e)
	}
	if host.IsClosed() || caller.IsClosed() {
		t.Errorf("binary messages closed a connection")
	}
}

// TestAPIErrorBodies covers SPEC 3.1's "every HTTP error body is {code, message}" beyond the
// routes the API documents: an unknown resource under /v1/ — of a live session or of none — is
// 404 not_found, a known path with another method 405 with Allow, and a POST /v1/sessions body
// over the frame limit 413 limit_exceeded.
func TestAPIErrorBodies(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.Options{})
	sid, _ := createSession(t, b, brokertest.KeyA)
	for _, p := range []string{"/v1/sessions/" + sid + "/bogus", "/v1/sessions/" + sid, "/v1/nothing", "/v1/sessions/" + sid + "/timeline/x"} {
		st, _, body := HTTPDo(t, "GET", b.URL+p, brokertest.KeyA, "", "")
		checkHTTPError(t, "GET "+p, st, body, http.StatusNotFound, "not_found")
	}
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/v1/sessions", "POST"},
		{"DELETE", "/v1/sessions/" + sid + "/timeline", "GET"},
	} {
		st, hdr, body := HTTPDo(t, c.method, b.URL+c.path, brokertest.KeyA, "", "")
		checkHTTPError(t, c.method+" "+c.path, st, body, http.StatusMethodNotAllowed, "bad_frame")
		if !strings.Contains(hdr.Get("Allow"), c.allow) {
			t.Errorf("%s %s: Allow %q, want %s in it", c.method, c.path, hdr.Get("Allow"), c.allow)
		}
	}
	big := `{"metadata":{"blob":"` + strings.Repeat("b", 1<<20) + `"}}`
	st, _, body := HTTPDo(t, "POST", b.URL+"/v1/sessions", brokertest.KeyA, "application/json", big)
	checkHTTPError(t, "POST /v1/sessions over 1 MiB", st, body, http.StatusRequestEntityTooLarge, "limit_exceeded")
}

// TestSessionsLeaveNoGoroutines checks that what a session starts — its connections' readers,
// writers and pings, its mailbox, its resume and idle timers, a dropped and resumed slot, a
// refused hello, a connection closed before its hello, a voice session's model — is gone once
// the session has ended, while the broker itself keeps running. It does not run in parallel:
// it compares the whole process's goroutines before and after.
func TestSessionsLeaveNoGoroutines(t *testing.T) {
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			b := brokertest.Start(t, brokertest.Options{Store: store, Config: broker.Config{BackgroundAfter: 200 * time.Millisecond}})
			cycle := func(i int) {
				t.Helper()
				// A text session: a host with a deferred job and a backgrounded call, dropped and
				// resumed; a refused hello; a connection that leaves before its hello.
				s := newSession(t, b, brokertest.KeyA)
				h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))
				s.deferJob(h, "a1", "job", nextID("leak-"), "")
				s.call(h, "a2", "job")
				s.agent.Expect(TypeWith("agent.tool_result", "call_id", "a2", "kind", "background_placeholder"))
				token, last := h.Welcome.Str("resume_token"), h.LastSeq()
				h.Cut()
				s.waitDisconnect(h)
				h2, w := s.resume("host-resumed", token, last, nil)
				if w.Type != "welcome" {
					t.Fatalf("resume answered %s", w)
				}
				bad := Dial(t, b.WSURL, "bad")
				bad.Hello(map[string]any{"role": "host", "session_id": s.sid, "join_token": "nope"})
				bad.ExpectClosed(websocket.StatusPolicyViolation)
				early := Dial(t, b.WSURL, "early")
				early.Close()
				if _, err := early.WaitClosed(DefaultTimeout); err != nil {
					t.Fatal(err)
				}
				h2.Send(map[string]any{"type": "session.end"})
				for _, c := range []*Conn{h2, s.agent} {
					c.ExpectClosed(websocket.StatusNormalClosure)
				}

				// A voice session: a caller whose turn the scripted model answers, and a host.
				sid, jt := createSession(t, b, brokertest.KeyA)
				v := &session{t: t, b: b, key: brokertest.KeyA, sid: sid, jt: jt}
				vh := v.host("voice-host", decl("lookup"))
				caller := v.attach("caller", "caller", nil)
				caller.Send(map[string]any{"type": "caller.text", "text": fmt.Sprintf("say hello number %d", i)})
				caller.Expect(TypeWith("transcript", "role", "agent"))
				caller.Send(map[string]any{"type": "session.end"})
				for _, c := range []*Conn{caller, vh} {
					c.ExpectClosed(websocket.StatusNormalClosure)
				}
			}
			cycle(0) // whatever the node starts once (store connections, scheduler) starts here
			before := goleak.IgnoreCurrent()
			for i := 1; i <= 3; i++ {
				cycle(i)
			}
			goleak.VerifyNone(t, before)
		})
	}
}
