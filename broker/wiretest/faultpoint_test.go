package wiretest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	"github.com/backchannel-io/backchannel/internal/redistest"
	"github.com/backchannel-io/backchannel/jobs"
)

// faultNodes starts two nodes on one private Redis; node A stops at the first point named
// point that one of its sessions reaches once arm is called: the returned channel is closed
// then, and the session stays there until A is killed.
func faultNodes(t *testing.T, point string) (a, b *brokertest.Broker, opts brokertest.Options, arm func(), hit <-chan struct{}) {
	t.Helper()
	var (
		mu      sync.Mutex
		armed   bool
		reached = make(chan struct{})
		release = make(chan struct{})
	)
	t.Cleanup(func() { close(release) })
	cfg := broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: 20 * time.Second, HoldTTL: 900 * time.Millisecond}
	opts = brokertest.SharedRedis(t)
	opts.Config = cfg
	opts.Config.FaultPoint = func(p string) {
		mu.Lock()
		stop := armed && p == point
		if stop {
			armed = false
		}
		mu.Unlock()
		if stop {
			close(reached)
			<-release // as a process that died here: it never goes on
		}
	}
	a = brokertest.Start(t, opts)
	opts.Config = cfg
	b = brokertest.Start(t, opts)
	waitRelaying(t, a, b)
	return a, b, opts, func() { mu.Lock(); armed = true; mu.Unlock() }, reached
}

// crash is what a fault-point test has once node A died at its point: the session as seen
// through node B, its agent and host resumed there, the last seq the host had seen on A, and
// the options that start another node on the same store.
type crash struct {
	onB      *session
	ag, h    *Conn
	hostSeen int64
	opts     brokertest.Options
}

// crashAt starts a session on node A with a host of the deferred tool export (prepared further
// by before), then runs act, which makes A reach point; A is killed there, and the agent and
// the host resume on node B once B has taken the session over.
func crashAt(t *testing.T, point string, before, act func(s *session, h *Conn)) crash {
	t.Helper()
	return crashWith(t, point, "30s", before, act, func(*session) {})
}

// crashWith is crashAt with the timeout of the tool export, and dead, run once A is killed and
// before any client resumes on B (the session is not taken over before).
func crashWith(t *testing.T, point, timeout string, before, act func(s *session, h *Conn), dead func(onB *session)) crash {
	t.Helper()
	a, b, opts, arm, hit := faultNodes(t, point)
	s := newSession(t, a, brokertest.KeyA)
	h := s.host("host", decl("export", "deferred", true, "timeout", timeout))
	before(s, h)
	arm()
	act(s, h)
	<-hit
	a.Kill()
	agentToken, agentSeen := s.agent.Welcome.Str("resume_token"), s.agent.LastSeq()
	hostToken, hostSeen := h.Welcome.Str("resume_token"), h.LastSeq()
	onB := s.on(b)
	dead(onB)
	ag, _, _ := onB.resumeMoving("agent on B", "agent", agentToken, agentSeen, 15*time.Second)
	onB.agent = ag
	h2, _, _ := onB.resumeMoving("host on B", "host", hostToken, hostSeen, 15*time.Second)
	return crash{onB: onB, ag: ag, h: h2, hostSeen: hostSeen, opts: opts}
}

// deferred makes the agent call export as a1 and the host defer it under handle; it returns
// the job's call id once the agent has the background placeholder.
func deferred(s *session, h *Conn, handle string) string {
	s.t.Helper()
	id := s.deferJob(h, "a1", "export", handle, "exporting")
	s.agent.Expect(TypeWith("agent.tool_result", "call_id", "a1", "kind", "background_placeholder"))
	return id
}

// TestKillBetweenTransitionAndFrames covers SPEC 15 at its sharpest point: node A applies a
// host's result — the job is completed in the store — and dies before the journal has the
// frames that follow (the agent's completion prompt). No client saw them. Node B takes the
// session over from the journal and works out what the clients were not told from the job's
// state: the agent gets the completion prompt once, its wait gets the result once, a second
// wait is told it was consumed; the host, whose result got no answer, sends it again and is
// told the call is finished.
func TestKillBetweenTransitionAndFrames(t *testing.T) {
	t.Parallel()
	handle := nextID("h-tj-")
	c := crashAt(t, broker.FaultBeforeJournal, func(s *session, h *Conn) { deferred(s, h, handle) }, func(s *session, h *Conn) {
		h.Send(map[string]any{"type": "tool_result", "id": "r-1", "handle": handle, "output": "done"})
	})
	c.h.Expect("tool_deferred_resume")
	completion := func(f Frame) bool {
		return f.Type == "agent.prompt" && strings.Contains(f.Str("text"), "`a1` completed")
	}
	c.ag.Expect(completion)
	c.ag.Absent(500*time.Millisecond, completion)
	if r := c.onB.waitResult("a1"); r.Str("kind") != "result" || !strings.HasSuffix(r.Str("content"), "done") {
		t.Errorf("SPEC 13, 15: the wait on B: %s, want the result done", r)
	}
	if r := c.onB.waitResult("a1"); !strings.Contains(r.Str("content"), "error: Tool call result already consumed") {
		t.Errorf("SPEC 13: a second wait on B: %s, want already consumed", r)
	}
	c.h.Send(map[string]any{"type": "tool_result", "id": "r-2", "handle": handle, "output": "done"})
	if e := c.h.Expect(TypeWith("error", "ref", "r-2")); e.Str("code") != "call_finished" {
		t.Errorf("SPEC 5: the host's result sent again on B: %s, want call_finished", e)
	}
}

// TestKillBetweenJournalAndSend: node A cancels a job for the agent — the journal has the
// host's tool_cancel and the agent's answer — and dies before any connection saw them. On node
// B the clients' resumes replay them exactly as journaled, once: the host gets one tool_cancel,
// the agent one answer to its cancel and one result; nothing is made twice.
func TestKillBetweenJournalAndSend(t *testing.T) {
	t.Parallel()
	var callID string
	c := crashAt(t, broker.FaultBeforeSend, func(s *session, h *Conn) { callID = deferred(s, h, nextID("h-js-")) }, func(s *session, h *Conn) {
		s.agentCall("c1", "cancel", map[string]any{"tool_call_id": "a1"})
	})
	cancel := TypeWith("tool_cancel", "call_id", callID)
	if tc := c.h.Expect(cancel); tc.Int("seq") != c.hostSeen+1 {
		t.Errorf("SPEC 10, 15: the journaled tool_cancel replayed as %s, want seq %d", tc, c.hostSeen+1)
	}
	c.h.Absent(time.Second, cancel)
	answer := TypeWith("agent.tool_result", "call_id", "c1")
	if r := c.ag.Expect(answer); r.Str("content") != "Tool cancellation requested" {
		t.Errorf("SPEC 13: the cancel's answer replayed: %s", r)
	}
	if r := c.onB.waitResult("a1"); !strings.Contains(r.Str("content"), "error: Tool call canceled") {
		t.Errorf("SPEC 13: the wait on B: %s, want the cancelled result", r)
	}
	c.ag.Absent(500*time.Millisecond, answer)
}

// TestKillBetweenTokenAndWelcome covers SPEC 10 and 15 at a resume: the host's connection
// drops and it resumes on node A, which journals the slot's new token and dies before the
// welcome carrying it is written. The host has only the token its hello used; node B, taking
// the session over, must take it — the host is not left with a spent token and its deferred
// job orphaned — and then spends it (the resume rotated it again).
func TestKillBetweenTokenAndWelcome(t *testing.T) {
	t.Parallel()
	var callID string
	var used string
	c := crashAt(t, broker.FaultBeforeWelcome, func(s *session, h *Conn) { callID = deferred(s, h, nextID("h-tw-")) }, func(s *session, h *Conn) {
		used = h.Welcome.Str("resume_token")
		h.Close()
		again := Dial(t, s.b.WSURL, "host again on A")
		again.SendHello(map[string]any{"id": nextID("resume-"), "role": "host", "session_id": s.sid,
			"resume_token": h.Welcome.Str("resume_token"), "last_seq": h.LastSeq()})
	})
	if r := c.h.Expect("tool_deferred_resume"); len(r.Arr("jobs")) != 1 || r.Arr("jobs")[0].(map[string]any)["call_id"] != callID {
		t.Errorf("SPEC 10: the host resumed on B with the token its last hello used: %s, want its deferred job", r)
	}
	// A frame from the host shows it has B's welcome: the token it used is spent, in the
	// journal too — node C, taking the session over once B dies, refuses it and takes B's.
	c.h.Send(map[string]any{"type": "tools.declare", "id": "d-tw", "tools": []any{decl("export", "deferred", true, "timeout", "30s")}})
	c.h.Expect(TypeWith("tools.declared", "ref", "d-tw"))
	c.onB.b.Kill()
	opts := c.opts
	opts.Config.FaultPoint = nil
	onC := c.onB.on(brokertest.Start(t, opts))
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		old := Dial(t, onC.b.WSURL, "host with the used token on C")
		old.SendHello(map[string]any{"id": nextID("resume-"), "role": "host", "session_id": onC.sid,
			"resume_token": used, "last_seq": 0})
		w := old.ExpectWelcome()
		if w.Type == "welcome" || (w.Str("code") != "resume_invalid" && !strings.Contains(w.Str("message"), "moving")) || time.Now().After(deadline) {
			t.Fatalf("SPEC 10: the token the host used on A, after it sent a frame on B, resumed on C: %s, want resume_invalid", w)
		}
		old.ExpectClosed(broker.StatusPolicy) // a refused hello's connection is closed
		if w.Str("code") == "resume_invalid" {
			break
		}
	}
	h3, _, _ := onC.resumeMoving("host on C", "host", c.h.Welcome.Str("resume_token"), c.h.LastSeq(), 10*time.Second)
	h3.Expect("tool_deferred_resume")
}

// TestKillInTheEventThatStartsACall: node A makes the job of an agent call — its tool_call is
// journaled with the job's transition — and dies before the journal has the text agent's state
// that knows the call. Node B adopts the open job as the agent's call:
// the host's result reaches the agent as the call's answer, and the agent sending the call
// again (it never got an answer) is told the id is used, so no second job is made.
func TestKillInTheEventThatStartsACall(t *testing.T) {
	t.Parallel()
	c := crashAt(t, broker.FaultBeforeJournal, func(*session, *Conn) {}, func(s *session, h *Conn) {
		s.agentCall("a1", "export", map[string]any{"n": "a1"})
	})
	callID := c.h.Expect(callFor("a1")).Str("call_id") // on B: in the journal since the job's transition
	c.onB.agentCall("a1", "export", map[string]any{"n": "a1"})
	if e := c.ag.Expect("error"); e.Str("code") != "bad_frame" || !strings.Contains(e.Str("message"), `"a1" is already used`) {
		t.Errorf("SPEC 13: the agent's call sent again on B: %s, want bad_frame (its id is used)", e)
	}
	c.h.Send(map[string]any{"type": "tool_result", "id": "r-1", "call_id": callID, "output": "done"})
	if r := c.onB.agentResult("a1"); r.Str("kind") != "result" || !strings.HasSuffix(r.Str("content"), "done") {
		t.Errorf("SPEC 13, 15: the adopted call's answer on B: %s, want the result done", r)
	}
	c.h.Absent(500*time.Millisecond, callFor("a1"))
}

// TestKillInTheEventThatStartsACallThatEnds: as above, but the job ends — its timeout runs
// out — while node A is dead and before node B takes the session over, so B finds no open job
// to adopt. The agent's call sent again names the job made on A (a WebSocket agent's broker
// call id is derived from its call), never a second one: the host saw one tool_call and gets
// its tool_cancel, and the agent gets the timeout as the call's answer.
func TestKillInTheEventThatStartsACallThatEnds(t *testing.T) {
	t.Parallel()
	c := crashWith(t, broker.FaultBeforeJournal, "300ms", func(*session, *Conn) {}, func(s *session, h *Conn) {
		s.agentCall("a1", "export", map[string]any{"n": "a1"})
	}, func(onB *session) {
		// Read from the store: the timeline endpoint asks the (dead) holder.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			es, err := onB.b.Store.Timeline(context.Background(), brokertest.TenantA, onB.sid, 0)
			if err == nil && slices.ContainsFunc(es, func(e jobs.Entry) bool { return e.Kind == jobs.KindToolDeadlineTimeout }) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the job did not time out while its node was dead (%v)", err)
			}
		}
	})
	callID := c.h.Expect(callFor("a1")).Str("call_id")
	if tc := c.h.Expect(TypeWith("tool_cancel", "call_id", callID)); tc.Str("reason") != "timeout" {
		t.Errorf("SPEC 11: the host's tool_cancel on B: %s, want reason timeout", tc)
	}
	c.onB.agentCall("a1", "export", map[string]any{"n": "a1"})
	if r := c.onB.agentResult("a1"); r.Str("kind") != "error" || !strings.Contains(r.Str("content"), "Tool call timed out") {
		t.Errorf("SPEC 13, 15: the call sent again on B: %s, want the first job's timeout", r)
	}
	c.h.Absent(500*time.Millisecond, callFor("a1"))
	calls := 0
	for _, e := range c.onB.timeline() {
		if e.Kind == "call" {
			calls++
		}
	}
	if calls != 1 {
		t.Errorf("SPEC 15: %d call entries on the timeline, want 1 (one job for one agent call)", calls)
	}
}

// TestKillInTheEventThatCancelsACall: node A applies the agent's cancel of a deferred call and
// dies before the journal has its frames (the host's tool_cancel, the cancel's answer). On B
// the host gets the tool_cancel once, and the agent's cancel, sent again since it got no
// answer, is answered as the first would have been: the cancel it asked for is in effect.
func TestKillInTheEventThatCancelsACall(t *testing.T) {
	t.Parallel()
	var callID string
	c := crashAt(t, broker.FaultBeforeJournal, func(s *session, h *Conn) { callID = deferred(s, h, nextID("h-kc-")) }, func(s *session, h *Conn) {
		s.agentCall("c1", "cancel", map[string]any{"tool_call_id": "a1"})
	})
	cancel := TypeWith("tool_cancel", "call_id", callID)
	if tc := c.h.Expect(cancel); tc.Str("reason") != "agent_request" {
		t.Errorf("SPEC 11: the host's tool_cancel on B: %s, want reason agent_request", tc)
	}
	c.onB.agentCall("c1", "cancel", map[string]any{"tool_call_id": "a1"})
	if r := c.onB.agentResult("c1"); r.Str("content") != "Tool cancellation requested" {
		t.Errorf("SPEC 13, 15: the cancel sent again on B: %s, want Tool cancellation requested", r)
	}
	if r := c.onB.waitResult("a1"); !strings.Contains(r.Str("content"), "error: Tool call canceled") {
		t.Errorf("SPEC 13: the wait on B: %s, want the cancelled result", r)
	}
	c.h.Absent(500*time.Millisecond, cancel)
}

// TestRelayNoticesDeadHolder covers SPEC 15's relay when the holder dies: a host connected to
// node B for a session node A holds is relayed there; A is killed. B notices at its next ping
// of A (SPUBLISH reaches no inbox) — long before A's liveness of 30 s runs out — and closes the
// host with 1012, so it resumes instead of talking to nothing.
func TestRelayNoticesDeadHolder(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: 60 * time.Second, HoldTTL: 30 * time.Second})
	waitRelaying(t, a, b)
	s := newSession(t, a, brokertest.KeyA)
	h := s.on(b).host("host on B", decl("export", "deferred", true))
	s.call(h, "a1", "export")
	a.Kill()
	if st, err := h.WaitClosed(10 * time.Second); err != nil || st != broker.StatusServiceRestart {
		t.Fatalf("SPEC 15: the relayed host after its session's node died: close %v, %v; want 1012 at B's next ping of it", st, err)
	}
}

// TestRelayAcrossRedisRestart covers SPEC 15's relay through a Redis restart: a host connected
// to node B for a session node A holds is relayed through Redis pub/sub, which loses what is
// published while it is down. Both nodes hear their inboxes drop; B closes the host with 1012.
// A resume while Redis is down is told to try again (whether the session exists cannot be
// told). The host resumes (retrying while Redis comes back) and finds every frame after its last_seq:
// nothing it was sent is lost, and a call made after the restart reaches it and its result
// reaches the agent.
func TestRelayAcrossRedisRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{AOF: true})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	opts := brokertest.Options{Store: "redis", Redis: client, Prefix: redistest.Prefix(t),
		Config: broker.Config{BackgroundAfter: 30 * time.Second, ResumeWindow: 60 * time.Second}}
	a := brokertest.Start(t, opts)
	b := brokertest.Start(t, opts)
	waitRelaying(t, a, b)
	s := newSession(t, a, brokertest.KeyA)
	onB := s.on(b)
	h := onB.host("host on B", decl("export"))
	call := s.call(h, "a1", "export")
	token := h.Welcome.Str("resume_token")

	srv.Kill()
	if st, err := h.WaitClosed(10 * time.Second); err != nil || st != broker.StatusServiceRestart {
		t.Fatalf("SPEC 15: the relayed host while Redis is down: close %v, %v; want 1012", st, err)
	}
	// Where the session is cannot be told while Redis is down: not not_found, but try again.
	down := Dial(t, b.WSURL, "host while Redis is down")
	down.SendHello(map[string]any{"id": nextID("resume-"), "role": "host", "session_id": s.sid, "resume_token": token, "last_seq": h.LastSeq()})
	if w := down.Expect(func(f Frame) bool { return f.Type == "welcome" || f.Type == "error" }); w.Type != "error" ||
		w.Str("code") != "internal" || !w.Bool("retryable") {
		t.Errorf("SPEC 2.1, 15: a resume while Redis is down: %s, want a retryable internal error", w)
	}
	srv.Restart()
	var h2 *Conn
	for deadline := time.Now().Add(20 * time.Second); h2 == nil; {
		c := Dial(t, b.WSURL, "host on B again")
		c.SendHello(map[string]any{"id": nextID("resume-"), "role": "host", "session_id": s.sid, "resume_token": token, "last_seq": h.LastSeq()})
		w, err := c.Wait(5*time.Second, func(f Frame) bool { return f.Type == "welcome" || f.Type == "error" })
		switch {
		case err == nil && w.Type == "welcome":
			c.Welcome, h2 = w, c
			continue
		case err == nil && !w.Bool("retryable"):
			t.Fatalf("SPEC 10, 15: the resume after the restart answered %s, want a welcome or a retryable error", w)
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("SPEC 15: the host could not resume within 20 s of the restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	h2.Send(map[string]any{"type": "tool_result", "id": "r-1", "call_id": call.Str("call_id"), "output": "one"})
	if r := s.agentResult("a1"); !strings.HasSuffix(r.Str("content"), "one") {
		t.Errorf("SPEC 13: the result after the restart: %s", r)
	}
	c2 := s.call(h2, "a2", "export")
	h2.Send(map[string]any{"type": "tool_result", "id": "r-2", "call_id": c2.Str("call_id"), "output": "two"})
	if r := s.agentResult("a2"); !strings.HasSuffix(r.Str("content"), "two") {
		t.Errorf("SPEC 13: a call made after the restart: %s", r)
	}
}

// TestKillInTheEventOfAHostsCancel: node A applies a host's job.cancel — the job is cancelled
// in the store — and dies before the journal has its answer. The host, which never got one,
// resumes on B and sends the cancel again: it is answered cancelled, as the first would have
// been (SPEC 11, 15), not already_canceled; a third cancel, after that answer, is
// already_canceled.
func TestKillInTheEventOfAHostsCancel(t *testing.T) {
	t.Parallel()
	var callID string
	c := crashAt(t, broker.FaultBeforeJournal, func(s *session, h *Conn) { callID = deferred(s, h, nextID("h-hc-")) }, func(s *session, h *Conn) {
		h.Send(map[string]any{"type": "job.cancel", "id": "hc1", "call_id": callID})
	})
	c.h.Send(map[string]any{"type": "job.cancel", "id": "hc1", "call_id": callID})
	if r := c.h.Expect(TypeWith("job.cancel_result", "ref", "hc1")); r.Str("result") != "cancelled" {
		t.Errorf("SPEC 11, 15: the host's cancel sent again on B: %s, want cancelled (the first was applied, never answered)", r)
	}
	c.h.Send(map[string]any{"type": "job.cancel", "id": "hc2", "call_id": callID})
	if r := c.h.Expect(TypeWith("job.cancel_result", "ref", "hc2")); r.Str("result") != "already_canceled" {
		t.Errorf("SPEC 11: a second cancel after the answered one: %s, want already_canceled", r)
	}
}
