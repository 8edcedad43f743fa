package wiretest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// waitDisconnect waits until the broker has noticed that a connection dropped: the timeline's
// disconnect entry for it.
func (s *session) waitDisconnect(c *Conn) {
	s.t.Helper()
	conn := c.Welcome.Str("connection_id")
	s.waitTimeline("disconnect of "+c.Name, func(es []Entry) bool {
		for _, e := range find(es, "disconnect", "") {
			if e.Detail["connection_id"] == conn {
				return true
			}
		}
		return false
	})
}

// resume dials and sends a resuming hello for the slot of the welcome w.
func (s *session) resume(name, token string, lastSeq int64, extra map[string]any) (*Conn, Frame) {
	s.t.Helper()
	c := Dial(s.t, s.b.WSURL, name)
	m := map[string]any{"id": nextID("resume-"), "role": "host", "session_id": s.sid, "resume_token": token, "last_seq": lastSeq}
	for k, v := range extra {
		m[k] = v
	}
	id, _ := m["id"].(string)
	w := c.Hello(m)
	if w.Str("ref") != id {
		s.t.Errorf("%s: the resuming hello was answered %s, without ref %q (SPEC 2: every answer carries ref)", name, w, id)
	}
	return c, w
}

// TestResumeReplay covers SPEC 10 and 11: a host that drops mid-job (TCP cut) and resumes within
// the window gets every frame it missed, in order under consecutive seqs from last_seq+1 — a
// tool_cancel, a tool_call made while it was away, and in the place of a tool_call cancelled while
// still in the outbox its tool_cancel (the call is never delivered) — then tool_deferred_resume
// with its open deferred job. The token rotates; the old one answers resume_invalid; a second
// resume closes the first resumed connection with 1008.
func TestResumeReplay(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))
		tokens := []string{h.Welcome.Str("resume_token")}

		// An open deferred job and a pending one.
		c1 := s.call(h, "a1", "job")
		id1 := c1.Str("call_id")
		ack := deferCall(t, h, id1, "resume-h1", "Crunching numbers")
		wantAck(t, ack, true, "")
		id2 := s.call(h, "a2", "job").Str("call_id")
		h.Absent(100*time.Millisecond, Any)
		last := h.LastSeq()
		h.Cut()
		s.waitDisconnect(h)

		// While it is away: a2 is cancelled; a3 is called; a4 is called and cancelled.
		cancelFor := func(target string) {
			id := nextID("cx-")
			s.agentCall(id, "cancel", map[string]any{"tool_call_id": target})
			if r := s.agentResult(id); r.Str("content") != "Tool cancellation requested" {
				t.Fatalf("cancel %s: %s", target, r)
			}
		}
		cancelFor("a2")
		s.agentCall("a3", "job", map[string]any{"n": "a3"})
		s.agentCall("a4", "job", map[string]any{"n": "a4"})
		s.waitTimeline("call a4", func(es []Entry) bool { return len(find(es, "call", "")) == 4 })
		cancelFor("a4")
		es := s.timeline()
		if n := len(find(es, "cancel", "")); n != 2 {
			t.Fatalf("%d cancel entries, want 2:\n%s", n, dumpEntries(es))
		}

		// Resume with the token and last_seq.
		h2, w := s.resume("host-resumed", tokens[0], last, nil)
		if w.Type != "welcome" || w.Str("session_id") != s.sid {
			t.Fatalf("resume answered %s", w)
		}
		tokens = append(tokens, w.Str("resume_token"))
		if len(tokens[1]) < 22 || tokens[1] == tokens[0] {
			t.Errorf("resume_token did not rotate: %q then %q", tokens[0], tokens[1])
		}
		f1 := h2.Next()
		f2 := h2.Next()
		f3 := h2.Next()
		f4 := h2.Next()
		for i, f := range []Frame{f1, f2, f3, f4} {
			if f.Int("seq") != last+1+int64(i) {
				t.Errorf("replayed frame %d has seq %d, want %d: %s", i, f.Int("seq"), last+1+int64(i), f)
			}
		}
		if f1.Type != "tool_cancel" || f1.Str("call_id") != id2 || f1.Str("reason") != "agent_request" {
			t.Errorf("first replayed frame %s, want tool_cancel of a2 (agent_request)", f1)
		}
		if f2.Type != "tool_call" || f2.Obj("arguments")["n"] != "a3" || f2.Str("name") != "job" {
			t.Errorf("second replayed frame %s, want the tool_call of a3", f2)
		}
		id3 := f2.Str("call_id")
		if f3.Type != "tool_cancel" || f3.Str("reason") != "agent_request" || f3.Str("call_id") == id3 || f3.Str("call_id") == id2 {
			t.Errorf("third replayed frame %s, want the tool_cancel of a4 in place of its tool_call", f3)
		}
		id4 := f3.Str("call_id")
		if f4.Type != "tool_deferred_resume" {
			t.Fatalf("fourth frame %s, want tool_deferred_resume", f4)
		}
		jobs := f4.Arr("jobs")
		if len(jobs) != 1 {
			t.Fatalf("tool_deferred_resume lists %d jobs, want the one deferred job: %s", len(jobs), f4)
		}
		j, _ := jobs[0].(map[string]any)
		dl := fmt.Sprint(j["deadline_ms"])
		if j["call_id"] != id1 || j["handle"] != "resume-h1" || j["name"] != "job" || j["status_label"] != "Crunching numbers" ||
			j["state"] != "deferred" || dl != fmt.Sprint(ack.Int("deadline_ms")) {
			t.Errorf("resumed job %v, want call_id %s, handle resume-h1, name job, status_label, state deferred, deadline_ms %d", j, id1, ack.Int("deadline_ms"))
		}
		if args, _ := j["arguments"].(map[string]any); args["n"] != "a1" {
			t.Errorf("resumed job arguments %v, want {n: a1}", j["arguments"])
		}
		// a4's tool_call was never delivered, not even after the replay.
		h2.Absent(200*time.Millisecond, callFor("a4"))
		for _, f := range h2.History() {
			if f.Type == "tool_call" && f.Str("call_id") == id4 {
				t.Errorf("the cancelled call was delivered: %s", f)
			}
		}

		// The old token is spent.
		old, e := s.resume("host-old-token", tokens[0], last, nil)
		if e.Type != "error" || e.Str("code") != "resume_invalid" {
			t.Errorf("resume with a used token answered %s, want resume_invalid", e)
		}
		old.ExpectClosed(websocket.StatusPolicyViolation)

		// The resumed connection serves the jobs: by handle and by call id.
		result(h2, "", "resume-h1", `"numbers crunched"`)
		result(h2, id3, "", `"three"`)
		h2.Absent(200*time.Millisecond, Type("error"))
		if r := s.waitResult("a1"); r.Str("content") != "numbers crunched" {
			t.Errorf("wait a1: %s", r)
		}
		// a3 and a4 were never backgrounded (background_after is 30 s): answered directly.
		if r := s.agentResult("a3"); r.Str("kind") != "result" || r.Str("content") != "three" {
			t.Errorf("a3: %s", r)
		}
		if r := s.agentResult("a4"); r.Str("kind") != "error" || r.Str("content") != "error: Tool call canceled" {
			t.Errorf("a4: %s", r)
		}

		// A second resume takes the slot over: the open connection is closed with 1008, the new
		// one gets what came after its last_seq (nothing) and tool_deferred_resume with no jobs.
		// Tools in the resuming hello are declared after tool_deferred_resume.
		last2 := h2.LastSeq()
		h3, w3 := s.resume("host-resumed-2", tokens[1], last2, map[string]any{"id": "resume-decl",
			"tools": []map[string]any{decl("job", "deferred", true, "timeout", "30s"), decl("extra")}})
		if w3.Type != "welcome" {
			t.Fatalf("second resume answered %s", w3)
		}
		h2.ExpectClosed(websocket.StatusPolicyViolation)
		if r := h2.CloseReason(); r != "resumed" {
			t.Errorf("the connection taken over closed with reason %q, want resumed", r)
		}
		r := h3.Next()
		if r.Type != "tool_deferred_resume" || r.Int("seq") != last2+1 || len(r.Arr("jobs")) != 0 || r.Arr("jobs") == nil {
			t.Errorf("after a resume with nothing missed: %s, want tool_deferred_resume {jobs: []} with seq %d", r, last2+1)
		}
		if d := h3.Next(); d.Type != "tools.declared" || d.Str("ref") != "resume-decl" || d.Compact("names") != `["job","extra"]` {
			t.Errorf("after tool_deferred_resume: %s, want tools.declared for the hello's tools", d)
		}
		// New calls go to the resumed slot.
		tc := s.call(h3, "a5", "job")
		if tc.Int("seq") != last2+3 {
			t.Errorf("next tool_call has seq %d, want %d", tc.Int("seq"), last2+3)
		}
		es = s.timeline()
		if n := len(find(es, "resume", "")); n != 2 {
			t.Errorf("%d resume entries on the timeline, want 2", n)
		}
	})
}

// TestResumeWindowExpiry covers an expired slot (SPEC 10): its jobs are cancelled with reason
// discard, its tools are withdrawn (a new call gets `Tool NAME is not available`), and its
// token answers resume_expired.
func TestResumeWindowExpiry(t *testing.T) {
	t.Parallel()
	window := time.Second
	eachStore(t, broker.Config{ResumeWindow: window, BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("gone", "deferred", true, "timeout", "30s"))
		keep := s.host("keeper", decl("kept"))
		id1 := s.deferJob(h, "a1", "gone", "expiring", "")
		id2 := s.call(h, "a2", "gone").Str("call_id")
		token, last := h.Welcome.Str("resume_token"), h.LastSeq()
		h.Cut()
		s.waitDisconnect(h)
		dropped := time.Now()

		// Within the window, a call still goes to the absent slot (it is resumable).
		s.agentCall("a3", "gone", map[string]any{"n": "a3"})
		s.waitTimeline("call a3", func(es []Entry) bool { return len(find(es, "call", "")) == 3 })

		es := s.waitTimeline("discard of the slot's jobs", func(es []Entry) bool {
			return len(find(es, "cancel", "")) == 3
		})
		if el := time.Since(dropped); el < window-200*time.Millisecond {
			t.Errorf("jobs discarded %v after the drop, before the %v window", el, window)
		}
		for _, e := range find(es, "cancel", "") {
			if e.Detail["reason"] != "discard" {
				t.Errorf("cancel entry %v, want reason discard", e)
			}
		}
		for _, id := range []string{id1, id2} {
			if len(find(es, "cancel", id)) != 1 {
				t.Errorf("no cancel entry for %s", id)
			}
		}
		// The tool is withdrawn: a new call fails at once; the other host's tool still works.
		s.agentCall("a4", "gone", map[string]any{"n": "a4"})
		if r := s.agentResult("a4"); r.Str("kind") != "error" || r.Str("content") != "error: Tool gone is not available" {
			t.Errorf("call of a withdrawn tool: %s", r)
		}
		tc := s.call(keep, "k1", "kept")
		result(keep, tc.Str("call_id"), "", `"still here"`)
		if r := s.agentResult("k1"); r.Str("content") != "still here" {
			t.Errorf("other host's tool: %s", r)
		}
		if r := s.agentResult("a2"); r.Str("content") != "error: Tool call canceled" {
			t.Errorf("agent's answer for a discarded pending call: %s", r)
		}
		// Its token answers resume_expired.
		c, e := s.resume("late-resume", token, last, nil)
		if e.Type != "error" || e.Str("code") != "resume_expired" {
			t.Errorf("resume after the window answered %s, want resume_expired", e)
		}
		c.ExpectClosed(websocket.StatusPolicyViolation)
		// Nobody got a tool_cancel for the expired slot's jobs (its connection is gone), and the
		// keeper got nothing of them.
		keep.Absent(100*time.Millisecond, Type("tool_cancel"))
	})
}

// TestSessionIdleEnd covers SPEC 10 and 3.6: a session with no attached connection for the
// resume window — from its creation, or after everything dropped — ends with reason
// resume_expired; later hellos get session_ended, its resume tokens resume_expired, and its
// timeline stays readable with session_end.
func TestSessionIdleEnd(t *testing.T) {
	t.Parallel()
	window := time.Second
	eachStore(t, broker.Config{ResumeWindow: window}, func(t *testing.T, b *brokertest.Broker) {
		refused := func(sid string, m map[string]any, code string) {
			t.Helper()
			c := Dial(t, b.WSURL, "late-"+code)
			m["session_id"] = sid
			if e := c.Hello(m); e.Type != "error" || e.Str("code") != code {
				t.Errorf("hello %v to an ended session answered %s, want %s", m, e, code)
			}
			c.ExpectClosed(websocket.StatusPolicyViolation)
		}
		endedWith := func(sid string) {
			t.Helper()
			es := waitTimeline(t, b, sid, brokertest.KeyA, "session_end", has("session_end", ""))
			if e := find(es, "session_end", ""); len(e) != 1 || e[0].Detail["reason"] != "resume_expired" {
				t.Errorf("session_end entries %v, want one with reason resume_expired", e)
			}
		}

		// Never attached.
		never, jt := createSession(t, b, brokertest.KeyA)
		// Attached: stays alive while attached.
		alive, jt2 := createSession(t, b, brokertest.KeyA)
		created := time.Now()
		s2 := &session{t: t, b: b, key: brokertest.KeyA, sid: alive, jt: jt2}
		hAlive := s2.host("alive")
		// All dropped.
		dropSid, jt3 := createSession(t, b, brokertest.KeyA)
		s3 := &session{t: t, b: b, key: brokertest.KeyA, sid: dropSid, jt: jt3}
		hDrop := s3.host("dropping", decl("x"))
		token, last := hDrop.Welcome.Str("resume_token"), hDrop.LastSeq()
		hDrop.Cut()

		endedWith(never)
		if el := time.Since(created); el < window-200*time.Millisecond {
			t.Errorf("idle session ended %v after creation, before its %v window", el, window)
		}
		refused(never, map[string]any{"role": "host", "join_token": jt}, "session_ended")
		refused(never, map[string]any{"role": "agent", "api_key": brokertest.KeyA}, "session_ended")

		endedWith(dropSid)
		refused(dropSid, map[string]any{"role": "host", "join_token": jt3}, "session_ended")
		refused(dropSid, map[string]any{"role": "host", "resume_token": token, "last_seq": last}, "resume_expired")

		// The attached session is still there after the window (the idle sessions have ended).
		s2.host("alive-2")
		if hAlive.IsClosed() {
			t.Errorf("an attached session was closed")
		}
		if len(find(s2.timeline(), "session_end", "")) != 0 {
			t.Errorf("an attached session ended")
		}
		// Another tenant still sees nothing of the ended session.
		status, _, body := HTTPDo(t, "GET", b.URL+"/v1/sessions/"+never+"/timeline", brokertest.KeyB, "", "")
		checkHTTPError(t, "timeline of an ended session of another tenant", status, body, 404, "not_found")
		if strings.Contains(string(body), "session_end") {
			t.Errorf("another tenant read the timeline")
		}
	})
}

// TestResumeFramesLost covers a last_seq older than the bounded outbox still holds (SPEC 10,
// outbox lowered to 4 frames here): resume_invalid saying frames were lost, close 1008.
func TestResumeFramesLost(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second, Limits: broker.Limits{OutboxFrames: 4}}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "timeout", "30s"))
		token, last := h.Welcome.Str("resume_token"), h.LastSeq()
		h.Cut()
		s.waitDisconnect(h)
		for i := 0; i < 6; i++ {
			s.agentCall(fmt.Sprintf("a%d", i), "job", map[string]any{"n": fmt.Sprintf("a%d", i)})
		}
		s.waitTimeline("6 calls", func(es []Entry) bool { return len(find(es, "call", "")) == 6 })
		c, e := s.resume("too-old", token, last, nil)
		if e.Type != "error" || e.Str("code") != "resume_invalid" || !strings.Contains(e.Str("message"), "lost") {
			t.Fatalf("resume from last_seq %d with 7 frames since and an outbox of 4: %s, want resume_invalid (frames lost)", last, e)
		}
		c.ExpectClosed(websocket.StatusPolicyViolation)
		// The session lives on: its agent is still attached and calls still reach a host.
		h2 := s.host("fresh", decl("job", "timeout", "30s"))
		tc := s.call(h2, "after", "job")
		result(h2, tc.Str("call_id"), "", `"ok"`)
		if r := s.agentResult("after"); r.Str("content") != "ok" {
			t.Errorf("call after a refused resume: %s", r)
		}
	})
}

// TestResumeRacesCancel races a host's resume against the cancellation of its deferred job
// (SPEC 10, 11): the agent's cancel and the resuming hello reach the session in either order,
// a few milliseconds apart or at once. Whichever wins, the resumed host gets the job's
// tool_cancel exactly once, under consecutive seqs; tool_deferred_resume lists the job exactly
// when the cancel came after the resume, and then the tool_cancel follows it. (Both orders
// occur: the cancel comes first in about one round in four.)
func TestResumeRacesCancel(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		for round := range 12 {
			s := newSession(t, b, brokertest.KeyA)
			h := s.host("host", decl("job", "deferred", true))
			id := s.call(h, "a1", "job").Str("call_id")
			wantAck(t, deferCall(t, h, id, fmt.Sprintf("race-%d", round), ""), true, "")
			h.Absent(50*time.Millisecond, Any)
			last := h.LastSeq()
			h.Cut()
			s.waitDisconnect(h)

			h2 := Dial(t, b.WSURL, "host-resumed")
			cancel := map[string]any{"type": "agent.tool_call", "id": nextID("tc-"), "call_id": "cx", "conversation_id": "root",
				"name": "cancel", "arguments": map[string]any{"tool_call_id": "a1"}}
			hello := map[string]any{"id": nextID("resume-"), "role": "host", "session_id": s.sid,
				"resume_token": h.Welcome.Str("resume_token"), "last_seq": last}
			gap := time.Duration(round%4) * time.Millisecond
			var w Frame
			if round%2 == 0 {
				s.agent.Send(cancel)
				time.Sleep(gap)
				w = h2.Hello(hello)
			} else {
				h2.SendHello(hello)
				time.Sleep(gap)
				s.agent.Send(cancel)
				w = h2.ExpectWelcome()
			}
			if w.Type != "welcome" {
				t.Fatalf("round %d: resume answered %s", round, w)
			}
			if r := s.agentResult("cx"); r.Str("content") != "Tool cancellation requested" {
				t.Fatalf("round %d: cancel answered %s", round, r)
			}
			h2.Expect(TypeWith("tool_cancel", "call_id", id))
			h2.Absent(200*time.Millisecond, TypeWith("tool_cancel", "call_id", id)) // not twice
			cancelAt, resumeAt, listed := -1, -1, false
			for i, f := range h2.History() {
				switch f.Type {
				case "tool_cancel":
					if f.Str("call_id") == id {
						cancelAt = i
					}
				case "tool_deferred_resume":
					resumeAt = i
					for _, j := range f.Arr("jobs") {
						if m, _ := j.(map[string]any); m["call_id"] == id {
							listed = true
						}
					}
				}
			}
			if resumeAt < 0 {
				t.Fatalf("round %d: no tool_deferred_resume: %v", round, h2.History())
			}
			if listed && cancelAt < resumeAt {
				t.Errorf("round %d: tool_deferred_resume lists the job after its tool_cancel was replayed", round)
			}
			if !listed && cancelAt > resumeAt {
				t.Errorf("round %d: the job was open when the host resumed (its tool_cancel came later) but tool_deferred_resume did not list it", round)
			}
			h2.Send(map[string]any{"type": "session.end", "id": nextID("end-")})
			h2.Expect("session.ended")
		}
	})
}

// TestExpiredSlotRightAfterTheEnd: a resume of a slot whose window ran out, sent the moment the
// session ended (session.ended seen by another connection), answers resume_expired — also when
// it reaches the session while its end is still being written (SPEC 10; the Redis store's end
// takes a few round trips), never session_ended.
func TestExpiredSlotRightAfterTheEnd(t *testing.T) {
	t.Parallel()
	const window = 400 * time.Millisecond
	eachStore(t, broker.Config{ResumeWindow: window}, func(t *testing.T, b *brokertest.Broker) {
		for i := range 5 {
			s := newSession(t, b, brokertest.KeyA)
			h := s.host("host", decl("job"))
			token, seen := h.Welcome.Str("resume_token"), h.LastSeq()
			h.Cut()
			time.Sleep(window + 300*time.Millisecond)
			s.agent.Send(map[string]any{"type": "session.end", "id": nextID("end-")})
			s.agent.Expect("session.ended")
			c, w := s.resume("late host", token, seen, nil)
			if w.Type != "error" || w.Str("code") != "resume_expired" {
				t.Fatalf("round %d: the expired slot's resume right after the end answered %s, want resume_expired", i, w)
			}
			c.ExpectClosed(broker.StatusPolicy)
		}
	})
}
