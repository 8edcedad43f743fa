package broker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs/memstore"

	"github.com/backchannel-io/backchannel/internal/redistest"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/jobs/redisstore"
)

// redisNode starts a node named id on a Redis shared by the test's nodes, after prep; halt stops
// it as a crash would.
func redisNode(t *testing.T, id string, opts redisstore.Options, prep ...func(*Node)) (n *Node, halt func()) {
	t.Helper()
	store, err := redisstore.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{APIKeys: map[string]string{testKey: "tenant-t"}, NodeID: id, HoldTTL: 600 * time.Millisecond,
		BackgroundAfter: 30 * time.Second, ResumeWindow: 30 * time.Second}
	n = NewNode(cfg, store)
	for _, p := range prep {
		p(n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	halt = func() { n.Halt(); cancel(); <-done }
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			halt()
		}
	})
	return n, halt
}

// TestTakeoverSendsNoSecondToolCancel: node A sends a host the tool_cancel of a job the agent
// cancelled — it is in the journal — and dies. Node B takes the session over; whatever order
// its reconciling and its catching up come in (a dropped subscription has every session
// reconcile, maybe before a session just taken over caught up), and however often it
// reconciles afterwards, the host's outbox holds that job's tool_cancel once.
func TestTakeoverSendsNoSecondToolCancel(t *testing.T) {
	opts := redisstore.Options{Client: redistest.New(t), Prefix: redistest.Prefix(t)}
	a, haltA := redisNode(t, "a", opts)
	s, host, agent, call := hostAndAgentCall(t, a, nil)
	agent.send(map[string]any{"type": "agent.tool_call", "id": "tc2", "call_id": "c1", "conversation_id": "root", "name": "cancel", "arguments": map[string]any{"tool_call_id": "a1"}})
	if f := host.next(); f["type"] != "tool_cancel" {
		t.Fatalf("the host got %v, want the tool_cancel", f)
	}
	haltA()

	b, _ := redisNode(t, "b", opts)
	p, st := b.takeOverWhenFree(t, s.ID())
	onB := b.restore(p, st)
	b.mu.Lock()
	b.addSessionLocked(onB)
	b.mu.Unlock()
	onB.post(onB.reconcile) // before it caught up
	onB.post(func() { onB.takenBack(st) })
	onB.post(onB.reconcile) // and after
	cancels := make(chan int, 1)
	onB.post(func() {
		n := 0
		for _, sl := range onB.slots {
			for _, f := range sl.out.frames {
				if jf := jobFrame(f.data); jf.Type == typeToolCancel && jf.CallID == call["call_id"] {
					n++
				}
			}
		}
		cancels <- n
	})
	if n := <-cancels; n != 1 {
		t.Errorf("the host's outbox on B holds %d tool_cancels of the cancelled job, want 1", n)
	}
}

// takeOverWhenFree takes session id over once the dead holder's lease ran out.
func (n *Node) takeOverWhenFree(t *testing.T, id string) (p *cluster.ParkedSession, st *parkedState) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p, st, held := n.takeOver("tenant-t", id)
		if p != nil {
			return p, st
		}
		if !held || time.Now().After(deadline) {
			t.Fatalf("the session was not taken over (held %v)", held)
		}
	}
}

// TestSweepFindsAnOverdueJobsLostEnd: a job's deadline fires through another node's engine and
// its change never reaches the session's node — lost by a failed publish, with no subscription
// dropping, so nothing reconciles. Once the job is overdue by overdueGrace, the session's
// sweep reads its end from the store: the host gets its tool_cancel (timeout), once; before
// that the sweep asks nothing.
func TestSweepFindsAnOverdueJobsLostEnd(t *testing.T) {
	store := memstore.New(nil)
	var ahead atomic.Int64 // how far the node's sweeps run ahead of the real time
	n := NewNode(Config{APIKeys: map[string]string{testKey: "tenant-t"}, BackgroundAfter: 30 * time.Second, ResumeWindow: 30 * time.Second}, store)
	n.now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	t.Cleanup(func() { n.Halt(); cancel(); <-done })
	s, host, _, call := hostAndAgentCall(t, n, map[string]any{"name": "export", "description": "d", "parameters": map[string]any{"type": "object"}, "timeout": "120s"})
	later := time.Now().Add(time.Hour)
	other := jobs.NewEngine(store, jobs.Options{Clock: jobs.NewFakeClock(later), Tenants: []string{"tenant-t"}}) // its change is lost
	if fired, err := other.Tick(context.Background(), later); err != nil || fired != 1 {
		t.Fatalf("the other engine fired %d deadlines (%v), want the job's", fired, err)
	}
	marker := func(text string) {
		t.Helper()
		s.post(func() { s.send(host.c.slot, &frames.Error{Code: frames.CodeInternal, Message: text}) })
		if f := host.next(); f["message"] != text {
			t.Fatalf("the host got %v before the marker %q", f, text)
		}
	}
	s.post(s.sweepOverdue) // not overdue yet: nothing
	marker("not yet")
	ahead.Store(int64(time.Hour))
	s.post(s.sweepOverdue)
	if f := host.next(); f["type"] != "tool_cancel" || f["call_id"] != call["call_id"] || f["reason"] != "timeout" {
		t.Fatalf("after the sweep the host got %v, want the job's tool_cancel (timeout)", f)
	}
	s.post(s.sweepOverdue)
	marker("once")
}

// TestCancelAppliedElsewhereIsAnsweredAsSent: the agent's cancel of a call was applied by
// another node (cancelled, reason agent_request) whose change never reached this one, nor its
// answer the agent; the engine here still has the job open. The agent's cancel sent again is
// answered as the first would have been — the store's job decides, not this engine's view —
// and the call then ends cancelled.
func TestCancelAppliedElsewhereIsAnsweredAsSent(t *testing.T) {
	store := memstore.New(nil)
	n := NewNode(Config{APIKeys: map[string]string{testKey: "tenant-t"}, BackgroundAfter: 30 * time.Second, ResumeWindow: 30 * time.Second}, store)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	t.Cleanup(func() { n.Halt(); cancel(); <-done })
	s, _, agent, call := hostAndAgentCall(t, n, nil)
	other := jobs.NewEngine(store, jobs.Options{}) // its change is lost
	if res, _, err := other.Cancel(context.Background(), s.addr(call["call_id"].(string)), frames.CancelAgentRequest); err != nil || res != frames.CancelResultCancelled {
		t.Fatalf("the cancel through the other engine: %v, %v", res, err)
	}
	agent.send(map[string]any{"type": "agent.tool_call", "id": "tc2", "call_id": "c1", "conversation_id": "root", "name": "cancel", "arguments": map[string]any{"tool_call_id": "a1"}})
	for {
		f := agent.next()
		if f["type"] == "agent.tool_result" && f["call_id"] == "c1" {
			if f["content"] != "Tool cancellation requested" {
				t.Errorf("the cancel sent again: %v, want Tool cancellation requested", f)
			}
			break
		}
	}
}
