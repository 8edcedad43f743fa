package relay

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs/memstore"
)

// The relay on its own, between two nodes' inboxes of a memory store (a real cluster directory):
// the test plays the other node and the transports.

// fakeTransport records what the relay wrote to a client's connection.
type fakeTransport struct {
	mu     sync.Mutex
	sent   [][]byte
	closed int
	reason string
}

func (f *fakeTransport) Send(b []byte)    { f.mu.Lock(); f.sent = append(f.sent, b); f.mu.Unlock() }
func (f *fakeTransport) SendAudio([]byte) {}
func (f *fakeTransport) Close(code int, reason string) {
	f.mu.Lock()
	f.closed, f.reason = code, reason
	f.mu.Unlock()
}
func (f *fakeTransport) Abort() {}

// conn is the holder node's side of a relayed connection.
type conn struct{ got chan []byte }

func (c *conn) Receive(b []byte)      { c.got <- b }
func (c *conn) ReceiveAudio([]byte)   {}
func (c *conn) Oversized(int, string) {}
func (c *conn) Dropped()              {}
func (c *conn) WelcomeConfirmed()     {}

// node attaches every relayed hello and hands its transport to the test (attached).
type node struct {
	attached chan Transport
	c        *conn
}

func (n *node) Hello(tr Transport, _ []byte) Conn {
	if n.attached != nil {
		n.attached <- tr
	}
	return n.c
}

// other is the other node: its inbox's messages.
func other(t *testing.T, store *memstore.Store, addr string) chan Message {
	got := make(chan Message, 64)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := store.NodeInbox(ctx, addr, func(b []byte) {
		var m Message
		if json.Unmarshal(b, &m) == nil && m.Op != OpPing {
			got <- m
		}
	}, func() {}); err != nil {
		t.Fatal(err)
	}
	return got
}

func next(t *testing.T, ch chan Message) Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message reached the other node")
	}
	return Message{}
}

func start(t *testing.T, store *memstore.Store, addr string, n Node, queue int) *Relay {
	ctx, cancel := context.WithCancel(context.Background())
	r := New(ctx, Config{Addr: addr, Directory: store, Node: n, SendQueueBytes: queue})
	t.Cleanup(func() { cancel(); r.Wait() })
	if err := store.NodeInbox(ctx, addr, r.Inbox, func() {}); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEdgeBreaksOnAGap: a holder's message after a lost one breaks the edge: its client is
// closed with 1012 (it resumes) and the holder hears of the drop.
func TestEdgeBreaksOnAGap(t *testing.T) {
	store := memstore.New(nil)
	holder := other(t, store, "holder")
	r := start(t, store, "edge", &node{}, 1<<20)
	tr := &fakeTransport{}
	e, err := r.Dial(tr, "holder", "s1", []byte(`{"type":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	if h := next(t, holder); h.Op != OpHello || h.N != 1 || h.Conn == "" {
		t.Fatalf("the holder got %+v, want the hello as message 1", h)
	}
	send := func(n int64) {
		b, _ := json.Marshal(Message{Op: OpSend, From: "holder", Conn: e.conn, N: n, Data: []byte(`{}`)})
		if err := store.SendToNode(context.Background(), "edge", b); err != nil {
			t.Fatal(err)
		}
	}
	send(1)
	if a := next(t, holder); a.Op != OpAck || a.N != 2 {
		t.Fatalf("after the welcome the holder got %+v, want the ack as message 2", a)
	}
	send(3) // message 2 was lost
	if d := next(t, holder); d.Op != OpDrop {
		t.Fatalf("after a gap the holder got %+v, want the drop", d)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.closed != frames.CloseServiceRestart || len(tr.sent) != 1 {
		t.Fatalf("the client's connection: closed %d, %d frames written; want 1012 after the one frame before the gap", tr.closed, len(tr.sent))
	}
}

// TestRemoteSlowConsumer: on the holder, frames for a relayed connection beyond SendQueueBytes
// while the store has not taken the earlier ones drop it as a slow consumer: the edge is told to
// close with 1013, and what was queued is not sent.
func TestRemoteSlowConsumer(t *testing.T) {
	store := memstore.New(nil)
	edge := other(t, store, "edge")
	n := &node{c: &conn{got: make(chan []byte, 8)}, attached: make(chan Transport, 1)}
	start(t, store, "holder", n, 100)
	b, _ := json.Marshal(Message{Op: OpHello, From: "edge", Conn: "c1", N: 1, Data: []byte(`{}`)})
	if err := store.SendToNode(context.Background(), "holder", b); err != nil {
		t.Fatal(err)
	}
	var tr Transport
	select {
	case tr = <-n.attached:
	case <-time.After(5 * time.Second):
		t.Fatal("the relayed hello never reached the node")
	}
	if !IsRemote(tr) {
		t.Fatal("a relayed connection's transport is not recognised as remote")
	}
	rc := tr.(*remote)
	rc.mu.Lock() // the writer is busy: nothing the queue holds leaves
	rc.writing = true
	rc.mu.Unlock()
	tr.Send(make([]byte, 60))
	tr.Send(make([]byte, 60)) // 120 bytes queued: over the 100
	rc.mu.Lock()
	rc.writing = false
	rc.mu.Unlock()
	tr.Send([]byte("after")) // ignored: the connection is closing
	rc.n.out.Add(1)
	go rc.write()
	m := next(t, edge)
	if m.Op != OpClose || m.Code != frames.CloseTryAgainLater || m.Reason != "slow consumer" || m.N != 1 {
		t.Fatalf("the edge got %+v, want close 1013 slow consumer as the only message", m)
	}
}

// orderLog records, in order, what the edge handed the store and the client.
type orderLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *orderLog) add(op string) { l.mu.Lock(); l.ops = append(l.ops, op); l.mu.Unlock() }

// loggedDirectory is the memory store's directory, noting each message's op as it is sent.
type loggedDirectory struct {
	*memstore.Store
	log *orderLog
}

func (d loggedDirectory) SendToNode(ctx context.Context, node string, msg []byte) error {
	var m Message
	_ = json.Unmarshal(msg, &m)
	err := d.Store.SendToNode(ctx, node, msg)
	d.log.add("store:" + m.Op)
	return err
}

// loggedTransport notes each frame written to the client.
type loggedTransport struct {
	fakeTransport
	log     *orderLog
	written chan struct{} // one per frame written
}

func (t *loggedTransport) Send(b []byte) {
	t.log.add("client:frame")
	t.fakeTransport.Send(b)
	t.written <- struct{}{}
}

// TestEdgeAcksTheWelcomeBeforeTheClientHasIt: the holder hears that the welcome reached the edge
// before the client can read it, so a hello the client sends after it never finds the replaced
// token still valid (SPEC 10).
func TestEdgeAcksTheWelcomeBeforeTheClientHasIt(t *testing.T) {
	store := memstore.New(nil)
	holder := other(t, store, "holder")
	log := &orderLog{}
	ctx, cancel := context.WithCancel(context.Background())
	r := New(ctx, Config{Addr: "edge", Directory: loggedDirectory{store, log}, Node: &node{}, SendQueueBytes: 1 << 20})
	t.Cleanup(func() { cancel(); r.Wait() })
	if err := store.NodeInbox(ctx, "edge", r.Inbox, func() {}); err != nil {
		t.Fatal(err)
	}
	tr := &loggedTransport{log: log, written: make(chan struct{}, 4)}
	e, err := r.Dial(tr, "holder", "s1", []byte(`{"type":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	next(t, holder) // the hello
	b, _ := json.Marshal(Message{Op: OpSend, From: "holder", Conn: e.conn, N: 1, Data: []byte(`{"type":"welcome"}`)})
	if err := store.SendToNode(context.Background(), "edge", b); err != nil {
		t.Fatal(err)
	}
	if a := next(t, holder); a.Op != OpAck {
		t.Fatalf("the holder got %+v, want the ack", a)
	}
	select {
	case <-tr.written:
	case <-time.After(5 * time.Second):
		t.Fatal("the welcome was never written to the client")
	}
	log.mu.Lock()
	ops := append([]string(nil), log.ops...)
	log.mu.Unlock()
	if len(ops) != 3 || ops[1] != "store:ack" || ops[2] != "client:frame" {
		t.Fatalf("the edge did %v, want the hello, then the ack in the store, then the welcome to the client", ops)
	}
}
