package relay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/frames"
)

// Edge is, on the node a client connected to, a connection whose session another node
// holds (remote.go): its messages go to the holder, and what the holder sends is written to
// it. It is the broker.Connection the node gives the client's transport.
type Edge struct {
	n       *Relay
	holder  string
	conn    string
	session string
	tr      Transport
	gone    atomic.Bool  // dropped, or closed by the holder, or its link broke
	mu      sync.Mutex   // one message to the holder at a time, in order
	sent    int64        // the number of the last message to the holder (Message.N)
	done    atomic.Int64 // the number of the last message to the holder the store took
	got     atomic.Int64 // the number of the last message from the holder
	// While the welcome's ack is on its way (welcoming), the holder's later messages wait.
	wmu       sync.Mutex
	welcoming bool
	waiting   []Message
}

// Dial makes tr the edge of a connection to session, which the live node holder holds, and
// forwards its hello (data) there. An error means the hello did not reach the holder, and the
// edge is gone: cluster.ErrNotListening when the holder's inbox does not listen (it died
// holding the session), else the store could not take it.
func (n *Relay) Dial(tr Transport, holder, session string, data []byte) (*Edge, error) {
	e := &Edge{n: n, holder: holder, conn: "rl_" + randomID(), session: session, tr: tr}
	n.mu.Lock()
	n.edges[e.conn] = e
	n.mu.Unlock()
	e.sent = 1
	if err := n.sendTo(holder, Message{Op: OpHello, Conn: e.conn, N: 1, Data: data}); err != nil {
		e.forget()
		return nil, err
	}
	e.done.Store(1)
	return e, nil
}

// SessionID implements broker.Connection.
func (e *Edge) SessionID() string { return e.session }

// Receive implements broker.Connection: the frame goes to the holder as it is.
func (e *Edge) Receive(data []byte) { e.forward(Message{Op: OpFrame, Data: data}) }

// ReceiveAudio implements broker.Connection.
func (e *Edge) ReceiveAudio(data []byte) { e.forward(Message{Op: OpAudio, Data: data}) }

// Oversized implements broker.Connection.
func (e *Edge) Oversized(size int, ref string) {
	e.forward(Message{Op: OpOversized, Size: size, Ref: ref})
}

// forward sends one of the connection's messages to the holder. One that cannot be sent breaks
// the link: the client is closed with 1012 and resumes (SPEC 10), and what it sent without an
// answer it sends again.
func (e *Edge) forward(m Message) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone.Load() {
		return
	}
	e.sent++
	m.Conn, m.N = e.conn, e.sent
	if err := e.n.sendTo(e.holder, m); err != nil {
		e.n.log.Warn("relay: relaying to the session's node failed; the client resumes", "session", e.session, "node", e.holder, "err", err)
		e.broken("relay to the session's node failed")
		return
	}
	e.done.Store(m.N)
}

// broken closes the client's connection with 1012 (it resumes, on this node or another) and
// tells the holder it dropped, if it can.
func (e *Edge) broken(reason string) {
	if e.gone.Swap(true) {
		return
	}
	e.forget()
	e.tr.Close(frames.CloseServiceRestart, reason)
	go e.tellDropped() // not on the inbox's goroutine: the store may be slow to refuse it
}

// tellDropped tells the holder the connection dropped, trying again for a while while the
// store does not take it (a Redis restart broke the link): a holder that never hears of it
// would keep the slot attached to a connection that is gone.
func (e *Edge) tellDropped() {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxElapsedTime = 100*time.Millisecond, 30*time.Second
	err := backoff.Retry(func() error {
		err := e.n.sendTo(e.holder, Message{Op: OpDrop, Conn: e.conn})
		if errors.Is(err, cluster.ErrNotListening) {
			return backoff.Permanent(err) // the holder is gone: its drops do not matter
		}
		return err
	}, backoff.WithContext(b, e.n.ctx))
	if err != nil {
		e.n.log.Debug("relay: telling the session's node of a broken relay", "session", e.session, "err", err)
	}
}

// Dropped implements broker.Connection: the client's connection is gone.
func (e *Edge) Dropped() {
	if e.gone.Swap(true) {
		return
	}
	e.forget()
	m := Message{Op: OpDrop, Conn: e.conn}
	if err := e.n.sendTo(e.holder, m); err != nil {
		e.n.log.Warn("relay: relaying a drop to the session's node", "session", e.session, "err", err)
	}
}

func (e *Edge) forget() {
	e.n.mu.Lock()
	delete(e.n.edges, e.conn)
	e.n.mu.Unlock()
}

// toEdge writes what a holder sent for one of this node's relayed connections.
func (n *Relay) toEdge(m Message) {
	n.mu.Lock()
	e := n.edges[m.Conn]
	n.mu.Unlock()
	if e == nil || e.holder != m.From {
		return
	}
	if m.N != e.got.Load()+1 {
		// A message of the holder's was lost (the store dropped it): what the client was sent
		// is not known, so it resumes, and replay gives it every frame after its last seq.
		n.log.Warn("relay: a relayed connection lost messages from the session's node; the client resumes",
			"session", e.session, "node", e.holder, "got", m.N, "want", e.got.Load()+1)
		e.broken("relay lost frames")
		return
	}
	e.got.Store(m.N)
	if m.N == 1 && m.Op == OpSend {
		// The welcome: the holder hears of it before the client can read it, so that no hello
		// the client sends after reading it finds the token it replaced still valid (SPEC 10).
		// The ack is sent off the inbox's goroutine (the store may be slow), and what the
		// holder sends meanwhile waits for the welcome, in order. A welcome lost between the
		// nodes is never acked: the replaced token then still resumes.
		e.wmu.Lock()
		e.welcoming = true
		e.wmu.Unlock()
		go e.welcome(m)
		return
	}
	e.wmu.Lock()
	if e.welcoming {
		e.waiting = append(e.waiting, m)
		e.wmu.Unlock()
		return
	}
	e.wmu.Unlock()
	e.write(m)
}

// welcome acks the welcome m to the holder, writes it to the client, then what the holder sent
// meanwhile.
func (e *Edge) welcome(m Message) {
	e.forward(Message{Op: OpAck})
	e.write(m)
	for {
		e.wmu.Lock()
		batch := e.waiting
		e.waiting = nil
		if len(batch) == 0 {
			e.welcoming = false
			e.wmu.Unlock()
			return
		}
		e.wmu.Unlock()
		for _, x := range batch {
			e.write(x)
		}
	}
}

// write writes one of the holder's messages to the client's connection.
func (e *Edge) write(m Message) {
	switch m.Op {
	case OpSend:
		e.tr.Send(m.Data)
	case OpSendAudio:
		e.tr.SendAudio(m.Data)
	case OpClose:
		e.gone.Store(true)
		e.forget()
		e.tr.Close(m.Code, m.Reason)
	case OpAbort:
		e.gone.Store(true)
		e.forget()
		e.tr.Abort()
	}
}

// closeDeadHolders closes, with 1012, the relayed connections whose holder is no longer alive
// (it crashed): their clients reconnect, and a session that was parked is taken back.
func (n *Relay) closeDeadHolders(ctx context.Context) {
	forDead(ctx, n, n.edgesByHolder(), func(e *Edge) { e.broken("session node gone") })
}

// edgesByHolder groups the node's relayed connections by the node that holds their session.
func (n *Relay) edgesByHolder() map[string][]*Edge {
	n.mu.Lock()
	defer n.mu.Unlock()
	holders := map[string][]*Edge{}
	for _, e := range n.edges {
		holders[e.holder] = append(holders[e.holder], e)
	}
	return holders
}

// CloseEdges closes every relayed connection of this node with 1012 and tells the holders
// (the node shuts down).
func (n *Relay) CloseEdges() {
	n.mu.Lock()
	es := make([]*Edge, 0, len(n.edges))
	for _, e := range n.edges {
		es = append(es, e)
	}
	n.mu.Unlock()
	for _, e := range es {
		e.tr.Close(frames.CloseServiceRestart, "service restart")
		e.Dropped()
	}
}
