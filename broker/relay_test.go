package broker

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/relay"
	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/jobs/memstore"
)

// The relay between nodes (SPEC 15), driven from the other end: the test plays the other node
// through the store's directory — it listens on an inbox of its own and sends to the node's —
// so it can send what a real node would only send when pub/sub loses a message.

// relayNode starts a node on a memory store (which is a directory too) and waits until its
// inbox listens.
func relayNode(t *testing.T) (*Node, *memstore.Store) {
	t.Helper()
	store := memstore.New(nil)
	cfg := Config{APIKeys: map[string]string{testKey: "tenant-t"}, BackgroundAfter: 30 * time.Second, ResumeWindow: 30 * time.Second}
	n := NewNode(cfg, store)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	t.Cleanup(func() { n.Halt(); cancel(); <-done })
	for deadline := time.Now().Add(5 * time.Second); !n.Relaying(); {
		if time.Now().After(deadline) {
			t.Fatal("the node's inbox never listened")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return n, store
}

// peer is the other node: what reaches its inbox, and how it sends.
type peer struct {
	t     *testing.T
	addr  string
	to    string // the node under test
	store *memstore.Store
	got   chan relay.Message
}

func newPeer(t *testing.T, store *memstore.Store, addr, to string) *peer {
	t.Helper()
	p := &peer{t: t, addr: addr, to: to, store: store, got: make(chan relay.Message, 256)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := store.NodeInbox(ctx, addr, func(b []byte) {
		var m relay.Message
		if json.Unmarshal(b, &m) == nil {
			p.got <- m
		}
	}, func() {}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *peer) send(m relay.Message) {
	p.t.Helper()
	m.From = p.addr
	b, _ := json.Marshal(m)
	if err := p.store.SendToNode(context.Background(), p.to, b); err != nil {
		p.t.Fatal(err)
	}
}

// next is the next message for connection conn (pings skipped).
func (p *peer) next(conn string) relay.Message {
	p.t.Helper()
	for {
		select {
		case m := <-p.got:
			if m.Op != relay.OpPing && (conn == "" || m.Conn == conn) {
				return m
			}
		case <-time.After(10 * time.Second):
			p.t.Fatal("nothing reached the other node within 10 s")
		}
	}
}

// frame decodes the frame a relay.Message carries.
func frame(t *testing.T, m relay.Message) map[string]any {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal(m.Data, &f); err != nil {
		t.Fatalf("relayed %s carries %q: %v", m.Op, m.Data, err)
	}
	return f
}

func helloData(f map[string]any) []byte {
	f["type"], f["protocol"] = "hello", "backchannel.v1"
	b, _ := json.Marshal(f)
	return b
}

// TestRelayGapOnTheHolder: a message of a relayed connection that comes after a lost one (its
// number skips) breaks the link on the holder: the edge is told to close the client with 1012,
// and the holder's messages to the edge are numbered 1, 2, … without a gap.
func TestRelayGapOnTheHolder(t *testing.T) {
	n, store := relayNode(t)
	s, err := n.CreateSession("tenant-t", ModelConfig{})
	if err != nil {
		t.Fatal(err)
	}
	edge := newPeer(t, store, "edge-x", n.addr)
	edge.send(relay.Message{Op: relay.OpHello, Conn: "c1", N: 1, Data: helloData(map[string]any{"role": "host", "session_id": s.ID(), "join_token": s.JoinToken()})})
	w := edge.next("c1")
	if w.Op != relay.OpSend || w.N != 1 || frame(t, w)["type"] != "welcome" {
		t.Fatalf("the holder's first message to the edge: %+v, want the welcome as message 1", w)
	}
	ping, _ := json.Marshal(map[string]any{"type": "job.cancel", "id": "b1", "call_id": "call_00000000000000000000"})
	edge.send(relay.Message{Op: relay.OpFrame, Conn: "c1", N: 2, Data: ping})
	if m := edge.next("c1"); m.Op != relay.OpSend || m.N != 2 || frame(t, m)["ref"] != "b1" {
		t.Fatalf("the answer to message 2: %+v, want it as message 2", m)
	}
	edge.send(relay.Message{Op: relay.OpFrame, Conn: "c1", N: 4, Data: ping}) // message 3 was lost
	m := edge.next("c1")
	if m.Op != relay.OpClose || m.Code != StatusServiceRestart || m.N != 3 {
		t.Fatalf("after a gap in the edge's messages the holder sent %+v, want close 1012 as message 3", m)
	}
}

// edgeOfElsewhere makes a node the edge of a host's connection to sess_elsewhere, which the
// test's peer holder-x holds: it returns the peer, the client's connection, the relayed hello
// (message 1) and the welcome the peer sent back as its message 1, once the client has it.
func edgeOfElsewhere(t *testing.T) (holder *peer, tc *closingConn, hello relay.Message, welcome []byte) {
	t.Helper()
	n, store := relayNode(t)
	holder = newPeer(t, store, "holder-x", n.addr)
	ctx := context.Background()
	if err := store.NodeAlive(ctx, "holder-x", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := store.HoldSessions(ctx, "holder-x", []cluster.HeldSession{{ID: "sess_elsewhere", Tenant: "tenant-t"}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	tc = &closingConn{testConn: testConn{t: t, frames: make(chan map[string]any, 64)}, closed: make(chan int, 1)}
	if c := n.Hello(tc, helloData(map[string]any{"role": "host", "session_id": "sess_elsewhere", "join_token": "jt_x"})); c == nil || !isRelayed(c) {
		t.Fatal("a hello for a session another live node holds was not relayed")
	}
	hello = holder.next("")
	if hello.Op != relay.OpHello || hello.N != 1 {
		t.Fatalf("the edge's first message: %+v, want the hello as message 1", hello)
	}
	welcome, _ = json.Marshal(map[string]any{"type": "welcome"})
	holder.send(relay.Message{Op: relay.OpSend, Conn: hello.Conn, N: 1, Data: welcome})
	if f := tc.next(); f["type"] != "welcome" {
		t.Fatalf("the client got %v, want the relayed welcome", f)
	}
	return holder, tc, hello, welcome
}

// TestRelayGapOnTheEdge: a message from the holder that comes after a lost one breaks the link
// on the edge: its client is closed with 1012 (it resumes, and replay gives it what it missed),
// and the holder is told the connection dropped.
func TestRelayGapOnTheEdge(t *testing.T) {
	holder, tc, h, welcome := edgeOfElsewhere(t)
	if a := holder.next(h.Conn); a.Op != relay.OpAck || a.N != 2 {
		t.Fatalf("after the welcome the holder was told %+v, want ack as message 2", a)
	}
	holder.send(relay.Message{Op: relay.OpSend, Conn: h.Conn, N: 3, Data: welcome}) // message 2 was lost
	select {
	case code := <-tc.closed:
		if code != StatusServiceRestart {
			t.Errorf("the client was closed with %d, want 1012", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not closed after a gap in the holder's messages")
	}
	if d := holder.next(h.Conn); d.Op != relay.OpDrop {
		t.Errorf("the holder was told %+v, want the drop", d)
	}
}

// TestRelayedWelcomeKeepsTheTokenUntilAcked covers SPEC 10's rotation where the relay between
// nodes may lose a welcome (a Redis restart): a resume through an edge rotates the slot's
// token, and until the edge confirms it got the welcome for its client, the token the hello
// used stays valid for a resume — also one that arrives before the node heard that the relayed
// connection broke (the edge closed it, its drop is still on the way): the resume takes the
// slot from it. Once confirmed it is spent.
func TestRelayedWelcomeKeepsTheTokenUntilAcked(t *testing.T) {
	for _, c := range []struct{ acked, dropped bool }{{false, true}, {false, false}, {true, true}, {true, false}} {
		acked := c.acked
		n, store := relayNode(t)
		s, err := n.CreateSession("tenant-t", ModelConfig{})
		if err != nil {
			t.Fatal(err)
		}
		host, w := connect(t, n, map[string]any{"session_id": s.ID(), "join_token": s.JoinToken()})
		host.c.Dropped()
		token := w["resume_token"].(string)
		edge := newPeer(t, store, "edge-x", n.addr)
		edge.send(relay.Message{Op: relay.OpHello, Conn: "c1", N: 1, Data: helloData(map[string]any{"role": "host", "session_id": s.ID(), "resume_token": token, "last_seq": 0})})
		if m := edge.next("c1"); frame(t, m)["type"] != "welcome" {
			t.Fatalf("the relayed resume: %+v", m)
		}
		if acked {
			edge.send(relay.Message{Op: relay.OpAck, Conn: "c1", N: 2})
		}
		if c.dropped {
			edge.send(relay.Message{Op: relay.OpDrop, Conn: "c1"})
			waitDetached(t, s, host.c.slot)
		} else if acked {
			waitAcked(t, s, host.c.slot)
		}
		tc := &testConn{t: t, frames: make(chan map[string]any, 64)}
		tc.c = localHello(n, tc, helloData(map[string]any{"role": "host", "session_id": s.ID(), "resume_token": token, "last_seq": 0}))
		f := tc.next()
		switch {
		case !acked && f["type"] != "welcome":
			t.Errorf("%+v: a resume with the token whose relayed welcome was never confirmed: %v, want a welcome", c, f)
		case acked && (f["type"] != "error" || f["code"] != string(frames.CodeResumeInvalid)):
			t.Errorf("%+v: a resume with a token whose relayed welcome was confirmed: %v, want resume_invalid", c, f)
		}
		if !acked && !c.dropped {
			if m := edge.next("c1"); m.Op != relay.OpClose {
				t.Errorf("the relayed connection the resume took the slot from got %+v, want it closed", m)
			}
		}
	}
}

// TestReconcileFindsALostChange: a job ends in the store through another node whose change
// never reaches the session's node (pub/sub lost it). When the node learns its subscription
// dropped it reconciles: the host gets the job's tool_cancel, once.
func TestReconcileFindsALostChange(t *testing.T) {
	n, store := relayNode(t)
	s, host, _, call := hostAndAgentCall(t, n, nil)
	j := &jobs.Job{CallID: call["call_id"].(string)}
	other := jobs.NewEngine(store, jobs.Options{}) // another node's engine, whose change is lost
	if res, _, err := other.Cancel(context.Background(), s.addr(j.CallID), frames.CancelHostRequest); err != nil || res != frames.CancelResultCancelled {
		t.Fatalf("the cancel through the other engine: %v, %v", res, err)
	}
	n.relayLost()
	f := host.next()
	if f["type"] != "tool_cancel" || f["call_id"] != j.CallID {
		t.Fatalf("after reconciling the host got %v, want the job's tool_cancel", f)
	}
	n.reconcileAll()
	s.post(func() { s.send(host.c.slot, &frames.Error{Code: frames.CodeInternal, Message: "marker"}) })
	if f := host.next(); f["message"] != "marker" {
		t.Errorf("reconciling again sent %v, want nothing more", f)
	}
}

// isRelayed reports whether c is the edge of a relayed connection.
func isRelayed(c Connection) bool { _, ok := c.(*relay.Edge); return ok }

// waitDetached waits until the session has handled the drop of sl's connection (it looks on
// the session's loop, where the drop is handled).
func waitDetached(t *testing.T, s *Session, sl *Slot) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		gone := make(chan bool, 1)
		s.post(func() { gone <- sl.client == nil })
		if <-gone {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the session never handled the relayed connection's drop")
		}
	}
}

// waitAcked waits until the session has handled the edge's confirmation of sl's welcome.
func waitAcked(t *testing.T, s *Session, sl *Slot) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		done := make(chan bool, 1)
		s.post(func() { done <- !sl.prevOK })
		if <-done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the session never handled the edge's ack of the welcome")
		}
	}
}

// closingConn is a testConn that reports its close code.
type closingConn struct {
	testConn
	closed chan int
}

func (c *closingConn) Close(code int, _ string) {
	select {
	case c.closed <- code:
	default:
	}
}

// failingSends is a memory store whose messages to one node fail (the store refuses them, as a
// Redis restart would).
type failingSends struct {
	*memstore.Store
	to string
}

func (f failingSends) SendToNode(ctx context.Context, node string, msg []byte) error {
	if node == f.to {
		return errors.New("the store refused the send")
	}
	return f.Store.SendToNode(ctx, node, msg)
}

// TestRelayedHelloTheHolderCannotGet: a hello for a session another live node holds, which
// the store will not carry to that node, is answered once — a retryable internal error — and
// not also handled here.
func TestRelayedHelloTheHolderCannotGet(t *testing.T) {
	mem := memstore.New(nil)
	store := failingSends{Store: mem, to: "holder-x"}
	n := NewNode(Config{APIKeys: map[string]string{testKey: "tenant-t"}}, store)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	t.Cleanup(func() { n.Halt(); cancel(); <-done })
	if err := mem.NodeAlive(ctx, "holder-x", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := mem.HoldSessions(ctx, "holder-x", []cluster.HeldSession{{ID: "sess_elsewhere", Tenant: "tenant-t"}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	tc := &testConn{t: t, frames: make(chan map[string]any, 8)}
	if c := n.Hello(tc, helloData(map[string]any{"id": "h1", "role": "host", "session_id": "sess_elsewhere", "join_token": "jt_x"})); c != nil {
		t.Fatalf("the hello attached %T, want it refused", c)
	}
	if f := tc.next(); f["type"] != "error" || f["code"] != string(frames.CodeInternal) || f["retryable"] != true || f["ref"] != "h1" {
		t.Fatalf("the answer: %v, want a retryable internal error", f)
	}
	select {
	case f := <-tc.frames:
		t.Errorf("a second answer to one hello: %v", f)
	default:
	}
}
