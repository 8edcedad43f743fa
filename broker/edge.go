package broker

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

// edgeConn is, on the node a client connected to, a connection whose session another node
// holds (remote.go): its messages go to the holder, and what the holder sends is written to it.
type edgeConn struct {
	n       *Node
	holder  string
	conn    string
	session string
	tr      Transport
	gone    atomic.Bool  // dropped, or closed by the holder, or its link broke
	mu      sync.Mutex   // one message to the holder at a time, in order
	sent    int64        // the number of the last message to the holder (relayMsg.N)
	done    atomic.Int64 // the number of the last message to the holder the store took
	got     atomic.Int64 // the number of the last message from the holder
}

// relayHello makes tr the edge of a connection to a session another live node holds (loc, as
// locate found it), and forwards its hello there. It returns nil when this node should answer
// the hello itself (the holder's inbox does not listen: it died holding the session), and
// refused when it answered it already (the holder could not be reached: a retryable error).
func (n *Node) relayHello(tr Transport, h *frames.Hello, data []byte, loc location) (e *edgeConn, refused bool) {
	holder := loc.holder
	e = &edgeConn{n: n, holder: holder, conn: "rl_" + randomID(16), session: h.SessionID, tr: tr}
	n.relayMu.Lock()
	n.edges[e.conn] = e
	n.relayMu.Unlock()
	e.sent = 1
	if err := n.sendTo(holder, relayMsg{Op: opHello, Conn: e.conn, N: 1, Data: data}); err != nil {
		if errors.Is(err, cluster.ErrNotListening) {
			e.forget()
			return nil, false // it died holding the session: its lease runs out, and this node takes it
		}
		n.log.Warn("broker: relaying a hello to the session's node", "session", h.SessionID, "node", holder, "err", err)
		e.forget()
		refusal := frames.Errorf(frames.CodeInternal, "the node that holds session %s cannot be reached; try again", h.SessionID)
		refusal.Ref, refusal.Retryable = h.ID, true
		n.refuse(tr, refusal)
		return nil, true
	}
	e.done.Store(1)
	return e, false
}

// SessionID implements Connection.
func (e *edgeConn) SessionID() string { return e.session }

// Receive implements Connection: the frame goes to the holder as it is.
func (e *edgeConn) Receive(data []byte) { e.forward(relayMsg{Op: opFrame, Data: data}) }

// ReceiveAudio implements Connection.
func (e *edgeConn) ReceiveAudio(data []byte) { e.forward(relayMsg{Op: opAudio, Data: data}) }

// Oversized implements Connection.
func (e *edgeConn) Oversized(size int, ref string) {
	e.forward(relayMsg{Op: opOversized, Size: size, Ref: ref})
}

// forward sends one of the connection's messages to the holder. One that cannot be sent breaks
// the link: the client is closed with 1012 and resumes (SPEC 10), and what it sent without an
// answer it sends again.
func (e *edgeConn) forward(m relayMsg) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone.Load() {
		return
	}
	e.sent++
	m.Conn, m.N = e.conn, e.sent
	if err := e.n.sendTo(e.holder, m); err != nil {
		e.n.log.Warn("broker: relaying to the session's node failed; the client resumes", "session", e.session, "node", e.holder, "err", err)
		e.broken("relay to the session's node failed")
		return
	}
	e.done.Store(m.N)
}

// broken closes the client's connection with 1012 (it resumes, on this node or another) and
// tells the holder it dropped, if it can.
func (e *edgeConn) broken(reason string) {
	if e.gone.Swap(true) {
		return
	}
	e.forget()
	e.tr.Close(StatusServiceRestart, reason)
	go e.tellDropped() // not on the inbox's goroutine: the store may be slow to refuse it
}

// tellDropped tells the holder the connection dropped, trying again for a while while the
// store does not take it (a Redis restart broke the link): a holder that never hears of it
// would keep the slot attached to a connection that is gone.
func (e *edgeConn) tellDropped() {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxElapsedTime = 100*time.Millisecond, 30*time.Second
	err := backoff.Retry(func() error {
		err := e.n.sendTo(e.holder, relayMsg{Op: opDrop, Conn: e.conn})
		if errors.Is(err, cluster.ErrNotListening) {
			return backoff.Permanent(err) // the holder is gone: its drops do not matter
		}
		return err
	}, backoff.WithContext(b, e.n.ctx))
	if err != nil {
		e.n.log.Debug("broker: telling the session's node of a broken relay", "session", e.session, "err", err)
	}
}

// Dropped implements Connection: the client's connection is gone.
func (e *edgeConn) Dropped() {
	if e.gone.Swap(true) {
		return
	}
	e.forget()
	m := relayMsg{Op: opDrop, Conn: e.conn}
	if err := e.n.sendTo(e.holder, m); err != nil {
		e.n.log.Warn("broker: relaying a drop to the session's node", "session", e.session, "err", err)
	}
}

func (e *edgeConn) forget() {
	e.n.relayMu.Lock()
	delete(e.n.edges, e.conn)
	e.n.relayMu.Unlock()
}

// toEdge writes what a holder sent for one of this node's relayed connections.
func (n *Node) toEdge(m relayMsg) {
	n.relayMu.Lock()
	e := n.edges[m.Conn]
	n.relayMu.Unlock()
	if e == nil || e.holder != m.From {
		return
	}
	if m.N != e.got.Load()+1 {
		// A message of the holder's was lost (the store dropped it): what the client was sent
		// is not known, so it resumes, and replay gives it every frame after its last seq.
		n.log.Warn("broker: a relayed connection lost messages from the session's node; the client resumes",
			"session", e.session, "node", e.holder, "got", m.N, "want", e.got.Load()+1)
		e.broken("relay lost frames")
		return
	}
	e.got.Store(m.N)
	if m.N == 1 && m.Op == opSend {
		defer func() { go e.forward(relayMsg{Op: opAck}) }() // once the welcome is written
	}
	switch m.Op {
	case opSend:
		e.tr.Send(m.Data)
	case opSendAudio:
		e.tr.SendAudio(m.Data)
	case opClose:
		e.gone.Store(true)
		e.forget()
		e.tr.Close(m.Code, m.Reason)
	case opAbort:
		e.gone.Store(true)
		e.forget()
		e.tr.Abort()
	}
}

// closeDeadHolders closes, with 1012, the relayed connections whose holder is no longer alive
// (it crashed): their clients reconnect, and a session that was parked is taken back.
func (n *Node) closeDeadHolders(ctx context.Context) {
	forDead(ctx, n, n.edgesByHolder(), func(e *edgeConn) { e.broken("session node gone") })
}

// edgesByHolder groups the node's relayed connections by the node that holds their session.
func (n *Node) edgesByHolder() map[string][]*edgeConn {
	n.relayMu.Lock()
	defer n.relayMu.Unlock()
	holders := map[string][]*edgeConn{}
	for _, e := range n.edges {
		holders[e.holder] = append(holders[e.holder], e)
	}
	return holders
}

// closeEdges closes every relayed connection of this node with 1012 and tells the holders
// (shutdown).
func (n *Node) closeEdges() {
	n.relayMu.Lock()
	es := make([]*edgeConn, 0, len(n.edges))
	for _, e := range n.edges {
		es = append(es, e)
	}
	n.relayMu.Unlock()
	for _, e := range es {
		e.tr.Close(StatusServiceRestart, "service restart")
		e.Dropped()
	}
}
