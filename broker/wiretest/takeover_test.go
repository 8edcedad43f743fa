package wiretest

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	"github.com/backchannel-io/backchannel/jobs"
)

// twoNodes starts two broker nodes on one private Redis (one client, one key prefix).
func twoNodes(t *testing.T, cfg broker.Config) (a, b *brokertest.Broker) {
	t.Helper()
	opts := brokertest.SharedRedis(t)
	opts.Config = cfg
	return brokertest.Start(t, opts), brokertest.Start(t, opts)
}

// TestSessionMovesToAnotherNode covers SPEC 10 (resume works on any node that shares the store)
// and SPEC 18 (a Redis-store node that shuts down closes its connections with 1012 and its
// sessions live on): node A shuts down with a deferred job and a pending call open; the host
// resumes on node B with a last_seq behind what it had seen and gets, in order under consecutive
// seqs, every frame after it, then tool_deferred_resume with the deferred job; its result and the
// pending call's result land on B; the token rotated on the move (the used one answers
// resume_invalid on B); B's timeline shows the move.
func TestSessionMovesToAnotherNode(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: 20 * time.Second})
	s := newSession(t, a, brokertest.KeyA)
	h := s.host("host", decl("export", "deferred", true, "timeout", "30s"))
	handle := nextID("h-move-")
	deferred := s.deferJob(h, "a1", "export", handle, "exporting")
	pending := s.call(h, "a2", "export").Str("call_id")
	h.Absent(100*time.Millisecond, Any)
	token, seen := h.Welcome.Str("resume_token"), h.LastSeq()
	if seen != 4 {
		t.Fatalf("the host saw up to seq %d, want 4 (tools.declared, tool_call, ack, tool_call)", seen)
	}

	a.Close(false) // SIGTERM with the Redis store
	h.ExpectClosed(broker.StatusServiceRestart)

	onB := s.on(b)
	h2, w := onB.resume("host on B", token, 1, nil)
	if w.Type != "welcome" || w.Str("session_id") != s.sid {
		t.Fatalf("SPEC 10: resume on node B answered %s", w)
	}
	if w.Str("resume_token") == "" || w.Str("resume_token") == token {
		t.Errorf("SPEC 10: the resume token did not rotate on node B: %s", w)
	}
	var replay []Frame
	for range 3 {
		replay = append(replay, h2.Next())
	}
	want := []struct {
		typ, callID string
	}{{"tool_call", deferred}, {"tool_deferred_ack", deferred}, {"tool_call", pending}}
	for i, f := range replay {
		if f.Type != want[i].typ || f.Str("call_id") != want[i].callID || f.Int("seq") != int64(i+2) {
			t.Fatalf("SPEC 10: replay on node B:\n%s\nwant %v with seqs 2, 3, 4", framesOf(replay), want)
		}
	}
	dr := h2.Next()
	jobs := dr.Arr("jobs")
	if dr.Type != "tool_deferred_resume" || len(jobs) != 1 {
		t.Fatalf("SPEC 10: after the replay %s, want tool_deferred_resume with the deferred job", dr)
	}
	if j, _ := jobs[0].(map[string]any); j["call_id"] != deferred || j["handle"] != handle || j["status_label"] != "exporting" {
		t.Errorf("SPEC 10: tool_deferred_resume on node B lists %v, want %s under %s", jobs[0], deferred, handle)
	}

	result(h2, "", handle, `{"rows":3}`)
	result(h2, pending, "", `"done"`)
	h2.Absent(200*time.Millisecond, TypeWith("error"))
	es := onB.waitTimeline("both results on node B", func(es []Entry) bool {
		return len(find(es, "result", deferred)) == 1 && len(find(es, "result", pending)) == 1
	})
	onB.checkMoved(es, "session taken back by this node", token, seen)
}

// checkMoved checks, on the node a session moved to, that its timeline es has a notice whose
// text starts with notice, and that the token used for the move is spent (resume_invalid).
func (s *session) checkMoved(es []Entry, notice, token string, seen int64) {
	s.t.Helper()
	moved := false
	for _, e := range find(es, "notice", "") {
		if text, _ := e.Detail["text"].(string); strings.HasPrefix(text, notice) {
			moved = true
		}
	}
	if !moved {
		s.t.Errorf("the timeline does not show the move (%q):\n%s", notice, dumpEntries(es))
	}
	c, w := s.resume("old token", token, seen, nil)
	if w.Type != "error" || w.Str("code") != "resume_invalid" {
		s.t.Errorf("SPEC 10: the token used for the move answered %s, want resume_invalid", w)
	}
	c.ExpectClosed(broker.StatusPolicy)
}

// TestParkedSessionExpires covers SPEC 10's resume window for a session whose node shut down:
// nobody resumes it, so when the window has passed another node that shares the store ends it
// with resume_expired — its open job cancelled with reason discard, session_end on the timeline —
// and the slot's token answers resume_expired there.
func TestParkedSessionExpires(t *testing.T) {
	t.Parallel()
	const window = 1500 * time.Millisecond
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: window})
	s := newSession(t, a, brokertest.KeyA)
	h := s.host("host", decl("export", "deferred", true, "timeout", "30s"))
	deferred := s.deferJob(h, "a1", "export", nextID("h-expire-"), "exporting")
	token, seen := h.Welcome.Str("resume_token"), h.LastSeq()
	parked := time.Now()
	a.Close(false)
	h.ExpectClosed(broker.StatusServiceRestart)

	onB := s.on(b)
	// Waited for in the store: a timeline request would take the session back (see
	// storeTimeline), and the sweep, not a node holding it, must end it.
	storeTimeline(t, b, s.sid, "session_end", "")
	es := timeline(t, b, s.sid, brokertest.KeyA)
	end := find(es, "session_end", "")[0]
	if end.Detail["reason"] != "resume_expired" {
		t.Errorf("SPEC 10: session_end %s, want reason resume_expired", end)
	}
	if at := time.UnixMilli(end.AtMS); at.Before(parked.Add(window - 100*time.Millisecond)) {
		t.Errorf("SPEC 10: the parked session ended %v after its node shut down, before its resume window of %v", at.Sub(parked), window)
	}
	cancels := find(es, "cancel", deferred)
	if len(cancels) != 1 || cancels[0].Detail["reason"] != "discard" {
		t.Errorf("SPEC 10: the open job's cancel entries %v, want one with reason discard:\n%s", cancels, dumpEntries(es))
	}
	c, w := onB.resume("late host", token, seen, nil)
	if w.Type != "error" || w.Str("code") != "resume_expired" {
		t.Errorf("SPEC 10: a resume after the window answered %s on node B, want resume_expired", w)
	}
	c.ExpectClosed(broker.StatusPolicy)
}

// TestTimelineTakesBackAParkedSession: a timeline request is an entry point like a hello
// (SPEC 15, 16). Asked of node B for a session node A parked, B takes the session back — an
// explicit step after it located the session, not a side effect of the authorization — and
// answers with its entries; the move is on the timeline before any client came back, and the
// host's resume then finds the session live on B.
func TestTimelineTakesBackAParkedSession(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: 20 * time.Second})
	s := newSession(t, a, brokertest.KeyA)
	h := s.host("host", decl("export", "deferred", true, "timeout", "30s"))
	deferred := s.deferJob(h, "a1", "export", nextID("h-timeline-"), "exporting")
	token, seen := h.Welcome.Str("resume_token"), h.LastSeq()
	a.Close(false)
	h.ExpectClosed(broker.StatusServiceRestart)

	onB := s.on(b)
	es := onB.waitTimeline("the move, asked of node B", func(es []Entry) bool {
		for _, e := range find(es, "notice", "") {
			if text, _ := e.Detail["text"].(string); strings.HasPrefix(text, "session taken back by this node") {
				return true
			}
		}
		return false
	})
	if len(find(es, "deferred", deferred)) != 1 {
		t.Errorf("SPEC 16: node B's timeline lacks the deferred job:\n%s", dumpEntries(es))
	}
	_, w := onB.resume("host on B", token, seen, nil)
	if w.Type != "welcome" || w.Str("session_id") != s.sid {
		t.Fatalf("SPEC 10: resume on node B, which took the session back, answered %s", w)
	}
}

// TestChangeRelayedToTheSessionsNode covers SPEC 15's relay: a job change made on a node that
// does not hold the job's session (here node B cancels a job of a session on node A, as its
// deadline sweep or its HTTP API would) reaches node A through the store, and A tells the host
// with tool_cancel, exactly once, and the text agent gets the cancellation.
func TestChangeRelayedToTheSessionsNode(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second})
	waitRelaying(t, a, b)
	s := newSession(t, a, brokertest.KeyA)
	h := s.host("host", decl("export", "timeout", "30s"))
	callID := s.call(h, "a1", "export").Str("call_id")

	res, _, err := b.Node.Engine().Cancel(context.Background(),
		jobs.Addr{Tenant: brokertest.TenantA, SessionID: s.sid, CallID: callID}, frames.CancelHostRequest)
	if err != nil || res != frames.CancelResultCancelled {
		t.Fatalf("cancel on node B: %s, %v", res, err)
	}
	tc := h.ExpectWithin(5*time.Second, TypeWith("tool_cancel", "call_id", callID))
	if tc.Str("reason") != "host_request" {
		t.Errorf("SPEC 11: %s, want reason host_request", tc)
	}
	r := s.agentResult("a1")
	if r.Str("kind") != "error" {
		t.Errorf("the agent's answer to the cancelled call: %s, want an error result", r)
	}
	h.Absent(300*time.Millisecond, TypeWith("tool_cancel"))
}

// TestJobEndsWhileParked: a job whose clock runs out while its session is parked (no node holds
// it, so the deadline's change reaches nobody) is caught up with when a node takes the session
// back: the resuming host gets its tool_cancel (reason timeout) once, after the replay.
func TestJobEndsWhileParked(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: 20 * time.Second})
	s := newSession(t, a, brokertest.KeyA)
	h := s.host("host", decl("export", "timeout", "1s"))
	callID := s.call(h, "a1", "export").Str("call_id")
	token, seen := h.Welcome.Str("resume_token"), h.LastSeq()
	a.Close(false)
	h.ExpectClosed(broker.StatusServiceRestart)

	onB := s.on(b)
	storeTimeline(t, b, s.sid, "tool_deadline_timeout", callID)
	h2, w := onB.resume("host on B", token, seen, nil)
	if w.Type != "welcome" {
		t.Fatalf("resume on node B: %s", w)
	}
	tc := h2.Expect(TypeWith("tool_cancel", "call_id", callID))
	if tc.Str("reason") != "timeout" || tc.Int("seq") != seen+1 {
		t.Errorf("SPEC 10, 11: %s, want reason timeout at seq %d", tc, seen+1)
	}
	h2.Absent(300*time.Millisecond, TypeWith("tool_cancel"))
}

// on is the session as seen through node n (the same session, its requests and dials to n).
func (s *session) on(n *brokertest.Broker) *session {
	c := *s
	c.b = n
	return &c
}

// waitRelaying waits until each node listens for what other nodes relay to it.
func waitRelaying(t *testing.T, nodes ...*brokertest.Broker) {
	t.Helper()
	for _, n := range nodes {
		n.WaitRelaying(t)
	}
}

// TestConnectionsOnTwoLiveNodes covers SPEC 15's relay of connections: a session lives on node A
// (its text agent is there) and a host connects to node B, which relays the connection to A.
// The host declares its tools, gets the agent's call, defers it and sends its result — every
// frame in order under consecutive seqs, as on A itself. The host drops and resumes on B again
// with its frames replayed; then node A shuts down, the relayed connection is closed with 1012,
// and the host's resume on B takes the parked session back there.
func TestConnectionsOnTwoLiveNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: 20 * time.Second})
	waitRelaying(t, a, b)
	s := newSession(t, a, brokertest.KeyA)
	onB := s.on(b)
	h := onB.host("host on B", decl("report", "deferred", true, "timeout", "30s")) // checks welcome, then tools.declared at seq 1
	handle := nextID("h-relay-")
	callID := s.deferJob(h, "a1", "report", handle, "reporting")
	result(h, "", handle, `"the report"`)
	if r := s.waitResult("a1"); r.Str("kind") != "result" {
		t.Fatalf("the agent on node A got %s for the job on node B's host", r)
	}
	seqs := []int64{}
	for _, f := range h.History() {
		if f.Has("seq") {
			seqs = append(seqs, f.Int("seq"))
		}
	}
	for i, q := range seqs {
		if q != int64(i+1) {
			t.Fatalf("SPEC 10: the relayed connection's seqs are %v, want 1, 2, 3, …", seqs)
		}
	}

	// A drop and a resume through node B: the holder sees the drop, the replay comes through.
	token := h.Welcome.Str("resume_token")
	h.Cut()
	onB.waitTimeline("the relayed connection's drop", has("disconnect", ""))
	h2, w := onB.resume("host on B again", token, 1, nil)
	if w.Type != "welcome" {
		t.Fatalf("SPEC 10: resume through node B: %s", w)
	}
	replay := []Frame{h2.Next(), h2.Next(), h2.Next()}
	if replay[0].Type != "tool_call" || replay[0].Str("call_id") != callID || replay[0].Int("seq") != 2 ||
		replay[1].Type != "tool_deferred_ack" || replay[1].Int("seq") != 3 || replay[2].Type != "tool_deferred_resume" {
		t.Fatalf("SPEC 10: the replay through node B:\n%s\nwant the tool_call (seq 2), its ack (seq 3), tool_deferred_resume", framesOf(replay))
	}

	// Node A shuts down: the relayed connection is closed with 1012, and the session moves to B.
	h2.Absent(200*time.Millisecond, Any)
	last := h2.LastSeq()
	token = h2.Welcome.Str("resume_token")
	a.Close(false)
	h2.ExpectClosed(broker.StatusServiceRestart)
	h3, w := onB.resume("host after the move", token, last, nil)
	if w.Type != "welcome" {
		t.Fatalf("SPEC 10: resume on node B after node A shut down: %s", w)
	}
	if dr := h3.Next(); dr.Type != "tool_deferred_resume" {
		t.Errorf("after the move: %s, want tool_deferred_resume", dr)
	}
}

// TestHolderNodeDies: a host connected through node B to a session node A holds; node A stops
// (its background work, its inbox and the renewal of its hold end). Node B closes the relayed
// connection with 1012 — at its next ping, since A's inbox no longer listens — and the host's
// resume on B is told the session is moving until A's hold ran out, then takes the session over
// from A's journal (SPEC 15; crash_test.go).
func TestHolderNodeDies(t *testing.T) {
	t.Parallel()
	const ttl = 900 * time.Millisecond
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second, HoldTTL: ttl})
	waitRelaying(t, a, b)
	s := newSession(t, a, brokertest.KeyA)
	onB := s.on(b)
	h := onB.host("host on B", decl("report", "deferred", true))
	a.Freeze()
	h.ExpectClosed(broker.StatusServiceRestart)
	h2, _, _ := onB.resumeMoving("host after the crash", "host", h.Welcome.Str("resume_token"), h.LastSeq(), 10*time.Second)
	if dr := h2.Next(); dr.Type != "tool_deferred_resume" || dr.Int("seq") != h.LastSeq()+1 {
		t.Errorf("after the takeover: %s, want tool_deferred_resume under seq %d", dr, h.LastSeq()+1)
	}
}

// TestEndedOnAnotherNode: node B answers for a session node A holds — its timeline, empty while
// nothing happened, to an API key of its tenant and not_found to another tenant's — and, once it
// ended on node A, knows it as ended: a hello with its join token gets session_ended, and its
// timeline is readable with the join token (SPEC 3.6, 10, 16).
func TestEndedOnAnotherNode(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, broker.Config{})
	s := newSession(t, a, brokertest.KeyA)
	if es := timeline(t, b, s.sid, brokertest.KeyA); len(es) != 0 {
		t.Errorf("a new session's timeline on node B: %s, want it empty", dumpEntries(es))
	}
	status, _, body := HTTPDo(t, "GET", b.URL+"/v1/sessions/"+s.sid+"/timeline", brokertest.KeyB, "", "")
	checkHTTPError(t, "node B, another tenant's key", status, body, http.StatusNotFound, "not_found")
	h := s.host("host", decl("report", "deferred", true))
	h.Send(map[string]any{"type": "session.end", "id": "end-1"})
	h.Expect("session.ended")

	c := Dial(t, b.WSURL, "late joiner on B")
	w := c.Hello(map[string]any{"id": nextID("hello-"), "role": "host", "session_id": s.sid, "join_token": s.jt})
	if w.Type != "error" || w.Str("code") != "session_ended" {
		t.Errorf("SPEC 3.6: a hello on node B to a session ended on node A: %s, want session_ended", w)
	}
	if es := timeline(t, b, s.sid, s.jt); len(find(es, "session_end", "")) != 1 {
		t.Errorf("SPEC 16: node B's timeline with the join token:\n%s", dumpEntries(es))
	}
}

// TestTextAgentMovesToAnotherNode covers SPEC 13 and 15 across a move: a text agent on node A
// has a background call whose result is queued (not consumed), and a second background call
// still running with an exact wait blocked on it. Node A shuts down; the agent and the host resume on node B. The queued result is still there
// for `wait`, and the running call's result, sent on B, answers the exact wait that was blocked
// on A — the conversation and its result queue moved with the session.
func TestTextAgentMovesToAnotherNode(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: 20 * time.Second})
	s := newSession(t, a, brokertest.KeyA)
	h := s.reportHost()
	running := s.queuedAndBlocked(h)
	s.agent.Absent(200*time.Millisecond, TypeWith("agent.tool_result", "call_id", "w1"))

	agentToken, agentSeen := s.agent.Welcome.Str("resume_token"), s.agent.LastSeq()
	hostToken, hostSeen := h.Welcome.Str("resume_token"), h.LastSeq()
	a.Close(false)
	s.agent.ExpectClosed(broker.StatusServiceRestart)

	onB := s.on(b)
	ag := Dial(t, b.WSURL, "agent on B")
	if w := ag.Hello(map[string]any{"id": nextID("resume-"), "role": "agent", "session_id": s.sid,
		"resume_token": agentToken, "last_seq": agentSeen}); w.Type != "welcome" {
		t.Fatalf("the agent's resume on node B: %s", w)
	}
	onB.agent = ag
	h2, w := onB.resume("host on B", hostToken, hostSeen, nil)
	if w.Type != "welcome" {
		t.Fatalf("the host's resume on node B: %s", w)
	}
	h2.Expect("tool_deferred_resume")

	onB.checkQueuedAndBlocked(h2, running)
}

// storeTimeline waits (10 s at most) until tenant A's session sid has a timeline entry of kind
// about callID ("": any), reading the store through node n's engine rather than over HTTP: a
// node that serves a request about a parked session takes it back, which a test of what
// happens while it is parked must not cause.
func storeTimeline(t *testing.T, n *brokertest.Broker, sid, kind, callID string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		es, err := n.Node.Engine().Timeline(context.Background(), brokertest.TenantA, sid, 0)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(es, func(e jobs.Entry) bool { return e.Kind == kind && (callID == "" || e.CallID == callID) }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s entry of %s %s in the store within 10 s", kind, sid, callID)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEdgeNodeDies: a host connected through node B to a session node A holds; node B stops
// renewing (it hangs or crashed), so nobody will report the connection's drop. Once B's
// liveness ran out, node A drops the relayed connection itself: the slot waits for a resume
// (a disconnect on the timeline), as for any dropped connection (SPEC 10).
func TestEdgeNodeDies(t *testing.T) {
	t.Parallel()
	const ttl = 900 * time.Millisecond
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second, HoldTTL: ttl})
	waitRelaying(t, a, b)
	s := newSession(t, a, brokertest.KeyA)
	onB := s.on(b)
	onB.host("host on B", decl("report", "deferred", true))
	if es := s.timeline(); len(find(es, "disconnect", "")) != 0 {
		t.Fatalf("a disconnect before node B stopped:\n%s", dumpEntries(es))
	}
	b.Freeze()
	s.waitTimeline("the relayed connection's drop", has("disconnect", ""))
}

// reportHost attaches a host declaring the deferred tool report.
func (s *session) reportHost() *Conn {
	s.t.Helper()
	return s.host("host", decl("report", "deferred", true, "timeout", "30s"))
}

// queuedAndBlocked gives the session's text agent, through host h (reportHost), a background
// call whose result is queued (not consumed) — a1 — and a second one still running — a2 — with
// an exact wait blocked on it — w1; it returns a2's call id.
func (s *session) queuedAndBlocked(h *Conn) string {
	s.t.Helper()
	done := s.deferJob(h, "a1", "report", nextID("h-done-"), "first") // a1 goes to the background
	result(h, done, "", `"first result"`)
	s.agent.Expect(func(f Frame) bool { // its completion prompt: the result is queued
		return f.Type == "agent.prompt" && strings.Contains(f.Str("text"), "`a1` completed")
	})
	running := s.deferJob(h, "a2", "report", nextID("h-run-"), "second")
	s.agentCall("w1", "wait", map[string]any{"tool_call_id": "a2"}) // blocks
	return running
}

// checkQueuedAndBlocked checks, on the node the session moved to, what queuedAndBlocked set up
// on another: the running call's result, sent by host h, answers the blocked wait, and the
// queued result is still there for wait (SPEC 13).
func (s *session) checkQueuedAndBlocked(h *Conn, running string) {
	s.t.Helper()
	result(h, running, "", `"second result"`)
	if r := s.agentResult("w1"); r.Str("kind") != "result" || !strings.Contains(r.Str("content"), "second result") {
		s.t.Errorf("SPEC 13: the wait blocked on the first node, answered on the second: %s", r)
	}
	if r := s.waitResult("a1"); !strings.Contains(r.Str("content"), "first result") {
		s.t.Errorf("SPEC 13: the result queued on the first node, waited for on the second: %s", r)
	}
}
