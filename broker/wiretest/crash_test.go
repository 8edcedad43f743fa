package wiretest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	"github.com/backchannel-io/backchannel/jobs"
)

// resumeMoving resumes on s's node until the session's lease of the killed node has run out
// and the node took the session over, as an SDK's reconnect would: until then the hello is
// answered by a retryable internal error (the session is moving), or — relayed to the dead node
// while its liveness had not run out — its connection is closed with 1012 once it has. It
// returns the connection, its welcome and how many attempts were refused.
func (s *session) resumeMoving(name, role, token string, lastSeq int64, within time.Duration) (*Conn, Frame, int) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	refused := 0
	for {
		c := Dial(s.t, s.b.WSURL, name)
		c.SendHello(map[string]any{"id": nextID("resume-"), "role": role, "session_id": s.sid, "resume_token": token, "last_seq": lastSeq})
		w, err := c.Wait(within, func(f Frame) bool { return f.Type == "welcome" || f.Type == "error" })
		switch {
		case err != nil:
			if st, _ := c.WaitClosed(time.Second); st != broker.StatusServiceRestart {
				s.t.Fatalf("%s: a resume while the session's node is dead: %v (close status %v), want an answer or 1012", name, err, st)
			}
		case w.Type == "welcome":
			c.Welcome = w
			return c, w, refused
		case w.Str("code") != "internal" || !w.Bool("retryable") || !strings.Contains(w.Str("message"), "moving"):
			s.t.Fatalf("%s: a resume while the session's node is dead answered %s, want welcome or a retryable internal error (moving)", name, w)
		}
		c.Close()
		refused++
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: the session was not taken over within %v of its node's death", name, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKilledNodesSessionResumesElsewhere covers SPEC 15: "killing a node loses no job: its
// sessions resume on another node". Node A holds a session with a deferred job and two calls
// its host has not answered; it is killed (no shutdown: connections cut, nothing parked). One
// of the calls is cancelled through node B while nobody holds the session, and a new call is
// made there (as if A had died between a call's transition and its tool_call). The host
// resumes on node B: while A's lease runs it is told to try again; then B takes the session over
// from the journal and the host gets every frame after its last_seq exactly as A sent them, the
// tool_cancel of the call cancelled meanwhile, the new call's tool_call, and
// tool_deferred_resume with its deferred job; its results land on B. The timeline says the
// session was taken over; the used token is spent.
func TestKilledNodesSessionResumesElsewhere(t *testing.T) {
	t.Parallel()
	const ttl = 900 * time.Millisecond
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: 20 * time.Second, HoldTTL: ttl})
	s := newSession(t, a, brokertest.KeyA)
	h := s.host("host", decl("export", "deferred", true, "timeout", "30s"))
	handle := nextID("h-crash-")
	deferred := s.deferJob(h, "a1", "export", handle, "exporting")
	pending := s.call(h, "a2", "export").Str("call_id")
	cancelled := s.call(h, "a3", "export").Str("call_id")
	h.Absent(100*time.Millisecond, Any)
	token, seen := h.Welcome.Str("resume_token"), h.LastSeq()
	sent := h.History()[1:] // after the welcome
	if seen != 5 || len(sent) != 5 {
		t.Fatalf("the host saw up to seq %d (%d frames), want 5 (tools.declared, tool_call, ack, tool_call, tool_call)", seen, len(sent))
	}

	a.Kill()
	if _, _, err := b.Node.Engine().Cancel(context.Background(), jobs.Addr{Tenant: brokertest.TenantA, SessionID: s.sid, CallID: cancelled},
		frames.CancelAgentRequest); err != nil {
		t.Fatal(err)
	}
	slotID, _, _ := strings.Cut(token, "-")
	late, err := b.Node.Engine().Call(context.Background(), jobs.NewCall{Tenant: brokertest.TenantA, SessionID: s.sid, Slot: slotID,
		Tool: jobs.Tool{Name: "export", Timeout: 30 * time.Second, Deferred: true}, Arguments: []byte(`{"n":"a4"}`)})
	if err != nil {
		t.Fatal(err)
	}

	// Its timeline, asked of node B while node A's lease runs: try again — 502 while B still
	// forwards to A (A's liveness has not run out), 503 once it has and the session is moving.
	status, _, body := HTTPDo(t, "GET", b.URL+"/v1/sessions/"+s.sid+"/timeline", brokertest.KeyA, "", "")
	if status != http.StatusBadGateway && status != http.StatusServiceUnavailable {
		t.Errorf("the timeline of a session whose node just died: %d %s, want 502 or 503", status, body)
	}
	checkHTTPError(t, "the same", status, body, status, "internal")

	onB := s.on(b)
	h2, w, refused := onB.resumeMoving("host on B", "host", token, 1, 10*time.Second)
	t.Logf("the resume was refused %d times while node A's lease ran", refused)
	if w.Str("session_id") != s.sid || w.Str("resume_token") == "" || w.Str("resume_token") == token {
		t.Errorf("SPEC 10: the welcome on node B: %s, want the session with a new token", w)
	}
	for i := 1; i < len(sent); i++ { // after last_seq 1
		f := h2.Next()
		if string(f.Raw) != string(sent[i].Raw) {
			t.Fatalf("SPEC 10: replay on node B, frame %d:\n%s\nwant what node A sent:\n%s", i, f, sent[i])
		}
	}
	tc := h2.Next()
	if tc.Type != "tool_cancel" || tc.Str("call_id") != cancelled || tc.Str("reason") != "agent_request" || tc.Int("seq") != seen+1 {
		t.Fatalf("SPEC 11: after the replay %s, want the tool_cancel of %s (agent_request) under seq %d", tc, cancelled, seen+1)
	}
	if tc := h2.Next(); tc.Type != "tool_call" || tc.Str("call_id") != late.CallID || tc.Int("seq") != seen+2 {
		t.Fatalf("SPEC 15: after the tool_cancel %s, want the tool_call of %s, made while nobody held the session, under seq %d", tc, late.CallID, seen+2)
	}
	dr := h2.Next()
	js := dr.Arr("jobs")
	if dr.Type != "tool_deferred_resume" || len(js) != 1 {
		t.Fatalf("SPEC 10: after the replay %s, want tool_deferred_resume with the deferred job", dr)
	}
	if j, _ := js[0].(map[string]any); j["call_id"] != deferred || j["handle"] != handle {
		t.Errorf("SPEC 10: tool_deferred_resume on node B lists %v, want %s under %s", js[0], deferred, handle)
	}

	result(h2, "", handle, `{"rows":3}`)
	result(h2, pending, "", `"done"`)
	result(h2, late.CallID, "", `"late done"`)
	h2.Absent(200*time.Millisecond, TypeWith("error"))
	es := onB.waitTimeline("both results on node B", func(es []Entry) bool {
		return len(find(es, "result", deferred)) == 1 && len(find(es, "result", pending)) == 1 && len(find(es, "result", late.CallID)) == 1
	})
	if len(find(es, "cancel", cancelled)) != 1 {
		t.Errorf("the cancelled call's cancel entries:\n%s", dumpEntries(es))
	}
	onB.checkMoved(es, "session taken over by this node", token, seen)
}

// TestKilledNodesSessionExpires: a killed node's session that nobody resumes is taken over by
// another node's sweep once the node's lease ran out, and ends with resume_expired when its
// resume window — counted from the node's death — has passed: its open job cancelled with reason
// discard, session_end on the timeline (SPEC 10, 15).
func TestKilledNodesSessionExpires(t *testing.T) {
	t.Parallel()
	const ttl, window = 900 * time.Millisecond, 2 * time.Second
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: window, HoldTTL: ttl})
	s := newSession(t, a, brokertest.KeyA)
	h := s.host("host", decl("export", "deferred", true, "timeout", "30s"))
	deferred := s.deferJob(h, "a1", "export", nextID("h-crash-"), "exporting")
	killed := time.Now()
	a.Kill()

	storeTimeline(t, b, s.sid, "session_end", "")
	// The node that ended it drops its journal (nothing left to take over, nothing leaked) —
	// after the session_end entry: while it holds the lease, TakeOver is refused as held.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := b.Store.TakeOver(context.Background(), "another-node", "", s.sid, time.Second)
		if errors.Is(err, jobs.ErrNotFound) {
			break
		}
		if !errors.Is(err, cluster.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Errorf("the journal of a session that ended: TakeOver %v, want ErrNotFound", err)
			break
		}
	}
	es := timeline(t, b, s.sid, brokertest.KeyA)
	end := find(es, "session_end", "")[0]
	if end.Detail["reason"] != "resume_expired" {
		t.Errorf("SPEC 10: session_end %s, want reason resume_expired", end)
	}
	if at := time.UnixMilli(end.AtMS); at.Before(killed.Add(window - ttl)) {
		t.Errorf("SPEC 10: the session ended %v after its node was killed, before its resume window of %v", at.Sub(killed), window)
	}
	cancels := find(es, "cancel", deferred)
	if len(cancels) != 1 || cancels[0].Detail["reason"] != "discard" {
		t.Errorf("SPEC 10: the open job's cancel entries %v, want one with reason discard:\n%s", cancels, dumpEntries(es))
	}
	c, w := s.on(b).resume("late host", h.Welcome.Str("resume_token"), h.LastSeq(), nil)
	if w.Type != "error" || w.Str("code") != "resume_expired" {
		t.Errorf("SPEC 10: a resume after the window answered %s on node B, want resume_expired", w)
	}
	c.ExpectClosed(broker.StatusPolicy)
}

// TestTextAgentSurvivesNodeKill covers SPEC 13 and 15 across a crash: a text agent on node A has
// a background call whose result is queued (not consumed), and a second one still running with
// an exact wait blocked on it. Node A is killed. The agent and the host resume on node B, which
// took the session over from the journal — the text agent's conversation and result queue
// included: the queued result is still there for wait, and the running call's result, sent on
// B, answers the wait that was blocked on A.
func TestTextAgentSurvivesNodeKill(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: 20 * time.Second, HoldTTL: 900 * time.Millisecond})
	s := newSession(t, a, brokertest.KeyA)
	h := s.reportHost()
	// A call that is over for good (its result was waited for): the journal keeps it apart
	// from the agent's state (textagent.SettledCall), and B must still know it. It settles
	// before w1 blocks: its completion prompt, delivered, no longer interrupts a wait (SPEC 13).
	settled := s.deferJob(h, "a0", "report", nextID("h-settled-"), "zeroth")
	result(h, settled, "", `"zeroth result"`)
	s.agent.Expect(func(f Frame) bool {
		return f.Type == "agent.prompt" && strings.Contains(f.Str("text"), "`a0` completed")
	})
	if r := s.waitResult("a0"); !strings.Contains(r.Str("content"), "zeroth result") {
		t.Fatalf("the wait for a0 on A: %s", r)
	}
	running := s.queuedAndBlocked(h)
	// Long enough for the text agent's state to be journaled (every second after events).
	s.agent.Absent(2500*time.Millisecond, TypeWith("agent.tool_result", "call_id", "w1"))

	agentToken, agentSeen := s.agent.Welcome.Str("resume_token"), s.agent.LastSeq()
	hostToken, hostSeen := h.Welcome.Str("resume_token"), h.LastSeq()
	a.Kill()

	onB := s.on(b)
	ag, _, _ := onB.resumeMoving("agent on B", "agent", agentToken, agentSeen, 10*time.Second)
	onB.agent = ag
	h2, _, _ := onB.resumeMoving("host on B", "host", hostToken, hostSeen, 10*time.Second)
	h2.Expect("tool_deferred_resume")

	onB.checkQueuedAndBlocked(h2, running)
	if r := onB.waitResult("a0"); !strings.Contains(r.Str("content"), "already consumed") {
		t.Errorf("SPEC 13: a wait on B for a result consumed on A: %s, want the already-consumed error", r)
	}
	onB.agent.Send(map[string]any{"type": "agent.tool_call", "id": "dup-a0", "call_id": "a0", "conversation_id": "root", "name": "report", "arguments": map[string]any{}})
	onB.agent.Expect(TypeWith("error", "ref", "dup-a0"))
	es := onB.timeline()
	for _, e := range find(es, "notice", "") {
		if e.Detail["text_agent"] == "restarted" {
			t.Errorf("the text agent's conversation was restarted, not taken over: %s", e)
		}
	}
}

// TestNodeThatLostItsLeaseLetsGo: node A holds a session and keeps its lease while it lives
// (three lease lengths on, nobody can take the session over); the session's lease is then another
// node's (written into the journal's record as a takeover writes it — what happens when A hung
// longer than its lease). At its next renewal A lets the session go: its connections are closed
// with 1012, without session.ended and without cancelling its job, and A no longer answers for
// it; the host resumes on node B once the lease has run out, its deferred job still open.
func TestNodeThatLostItsLeaseLetsGo(t *testing.T) {
	t.Parallel()
	const ttl = 900 * time.Millisecond
	opts := brokertest.SharedRedis(t)
	opts.Config = broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: 20 * time.Second, HoldTTL: ttl}
	a, b := brokertest.Start(t, opts), brokertest.Start(t, opts)
	client, prefix := opts.Redis, opts.Prefix
	s := newSession(t, a, brokertest.KeyA)
	h := s.host("host", decl("export", "deferred", true, "timeout", "30s"))
	handle := nextID("h-lost-")
	deferred := s.deferJob(h, "a1", "export", handle, "exporting")
	// A live node renews its lease: three lease lengths later nobody has taken the session.
	time.Sleep(3 * ttl)
	if h.IsClosed() || s.agent.IsClosed() {
		t.Fatalf("node A lost its session while it was alive and renewing (host closed %v, agent closed %v)", h.IsClosed(), s.agent.IsClosed())
	}
	if _, err := b.Store.TakeOver(context.Background(), "another-node", brokertest.TenantA, s.sid, ttl); !errors.Is(err, cluster.ErrLeaseHeld) {
		t.Fatalf("a takeover while node A renews its lease: %v, want ErrLeaseHeld", err)
	}

	// The journal's record names its lease holder (jobs/redisstore: PREFIX{t:TENANT}:live:SESSION,
	// field n), and the lease's end is the session's score in PREFIX{t:TENANT}:live. The other
	// node's lease runs for a minute — however slow the machine, A cannot take the session back
	// while the test looks — and is ended below, before B is to take it over.
	leases := prefix + "{t:" + brokertest.TenantA + "}:live"
	lease := func(end time.Time) {
		t.Helper()
		if err := client.ZAdd(context.Background(), leases, redis.Z{Score: float64(end.UnixMilli()), Member: s.sid}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lease(time.Now().Add(time.Minute))
	if err := client.HSet(context.Background(), leases+":"+s.sid, "n", "another-node").Err(); err != nil {
		t.Fatal(err)
	}
	h.ExpectClosed(broker.StatusServiceRestart)
	s.agent.ExpectClosed(broker.StatusServiceRestart)
	noFrames := func(c *Conn, typ string) {
		for _, f := range c.History() {
			if f.Type == typ {
				t.Errorf("%s got %s from the node that lost the session", c.Name, f)
			}
		}
	}
	noFrames(h, "session.ended")
	noFrames(h, "tool_cancel")
	c, w := s.resume("host back on A", h.Welcome.Str("resume_token"), h.LastSeq(), nil)
	if w.Type == "welcome" {
		t.Errorf("node A, which let the session go, still resumed it: %s", w)
	}
	c.Close()

	lease(time.Now()) // the other node's lease runs out: the session is free to take
	h2, _, _ := s.on(b).resumeMoving("host on B", "host", h.Welcome.Str("resume_token"), h.LastSeq(), 10*time.Second)
	dr := h2.Next()
	if js := dr.Arr("jobs"); dr.Type != "tool_deferred_resume" || len(js) != 1 || js[0].(map[string]any)["call_id"] != deferred {
		t.Errorf("after the move: %s, want tool_deferred_resume with %s", dr, deferred)
	}
}

// TestEndedSessionIsNeverRevived: a journal that outlived its ended session (its node could not
// drop it) is never taken over: a hello naming the session gets session_ended (SPEC 3.6), and
// the stale journal is dropped.
func TestEndedSessionIsNeverRevived(t *testing.T) {
	t.Parallel()
	opts := brokertest.SharedRedis(t)
	opts.Config = broker.Config{HoldTTL: 900 * time.Millisecond, ResumeWindow: 20 * time.Second}
	a, b := brokertest.Start(t, opts), brokertest.Start(t, opts)
	s := newSession(t, a, brokertest.KeyA)
	ctx := context.Background()
	// The live session's record, as its journal keeps it (jobs/redisstore: PREFIX{t:TENANT}:live:SESSION, field r).
	record, err := opts.Redis.HGet(ctx, opts.Prefix+"{t:"+brokertest.TenantA+"}:live:"+s.sid, "r").Bytes()
	if err != nil {
		t.Fatal(err)
	}
	s.agent.Send(map[string]any{"type": "session.end", "id": nextID("end-")})
	s.agent.Expect("session.ended")
	j := b.Store
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) { // node A drops it after session.ended
		if _, err := j.TakeOver(ctx, "probe", brokertest.TenantA, s.sid, time.Millisecond); errors.Is(err, jobs.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node A did not drop the ended session's journal within 5 s")
		}
	}
	if err := j.SaveSession(ctx, "dead-node", brokertest.TenantA, s.sid, record, nil, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the stale lease has run out
	c := Dial(t, b.WSURL, "late joiner on B")
	if w := c.Hello(map[string]any{"id": nextID("hello-"), "role": "host", "session_id": s.sid, "join_token": s.jt}); w.Type != "error" || w.Str("code") != "session_ended" {
		t.Errorf("SPEC 3.6: a hello to an ended session whose journal outlived it: %s, want session_ended", w)
	}
	if _, err := j.TakeOver(ctx, "another-node", brokertest.TenantA, s.sid, time.Second); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("the stale journal after the hello: TakeOver %v, want ErrNotFound (dropped)", err)
	}
}
