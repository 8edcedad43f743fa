package broker

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Connections relayed between nodes (SPEC 15: other nodes relay a session's frames through
// Redis pub/sub). A node that gets a hello for a session another live node holds becomes the
// connection's edge (edge.go): it forwards the connection's messages, hello first, to the
// holder's inbox (cluster.Directory), and writes what the holder sends back. On the holder the
// connection is a remoteConn: a Transport whose frames go to the edge's inbox, and a Client fed
// by the forwarded messages — the session cannot tell it from a local connection.

// relayMsg is one message between an edge and a holder.
type relayMsg struct {
	Op     string `json:"op"`
	From   string `json:"from"` // the sender's node address
	Conn   string `json:"conn"` // the connection's id at its edge
	Data   []byte `json:"data,omitempty"`
	Code   int    `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
	Size   int    `json:"size,omitempty"`
	Ref    string `json:"ref,omitempty"` // opOversized: the id read from the frame's start
	// N numbers the messages of one connection in one direction, from 1 (the hello), so that
	// a message the store lost is noticed at the next one (opDrop and opPing carry none).
	N int64 `json:"n,omitempty"`
}

// The ops of relayMsg: edge → holder, then holder → edge.
const (
	opHello     = "hello"
	opFrame     = "frame"
	opAudio     = "audio"
	opOversized = "oversized"
	opDrop      = "drop"
	// opAck: the edge wrote the holder's first message — the welcome — to its client (until
	// then the token the hello used stays valid too: Session.welcomeConfirmed).
	opAck = "ack"

	opSend      = "send"
	opSendAudio = "send_audio"
	opClose     = "close"
	opAbort     = "abort"

	// opPing goes, every relayCheck, to each node this node relays connections with: one whose
	// inbox no longer listens (it died) is noticed at once, not when its liveness runs out. It
	// lists the links with that node, which checks them (relaycheck.go) and answers with
	// opPong when it lacks some.
	opPing = "ping"
	opPong = "pong"
)

// relayTimeout bounds one send to another node's inbox.
const relayTimeout = 5 * time.Second

// inbox takes one message sent to this node.
func (n *Node) inbox(b []byte) {
	if n.ctx.Err() != nil {
		return // halted (Halt), or shut down
	}
	var m relayMsg
	if err := json.Unmarshal(b, &m); err != nil {
		n.log.Warn("broker: an undecodable message from another node", "err", err)
		return
	}
	switch m.Op {
	case opHello, opFrame, opAudio, opOversized, opDrop, opAck:
		n.toRemote(m)
	case opSend, opSendAudio, opClose, opAbort:
		n.toEdge(m)
	case opPing:
		n.pinged(m)
	case opPong:
		n.ponged(m)
	}
}

// sendTo sends m to node's inbox.
func (n *Node) sendTo(node string, m relayMsg) error {
	m.From = n.addr
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), relayTimeout)
	defer cancel()
	return n.dir.SendToNode(ctx, node, b)
}

// remoteConn is, on the holder, a connection whose edge is another node.
type remoteConn struct {
	n    *Node
	edge string
	conn string
	in   chan relayMsg // from the edge, handled in order by run

	closing  atomic.Bool
	got      int64        // the number of the last message from the edge (the inbox's alone)
	sent     int64        // the number of the last message to the edge (the writer's alone)
	done     atomic.Int64 // the number of the last message to the edge the store took
	farewell atomic.Bool  // the store took its close (or abort)
	endedAt  time.Time    // when run ended (Node.endedRemotes; under relayMu)
	mu       sync.Mutex
	pending  []relayMsg // to the edge, sent in order by one writer at a time
	queued   int        // bytes in pending
	writing  bool
}

// remoteInboxSize bounds what waits for a relayed connection's turn; an edge that far ahead
// loses its connection (it resumes).
const remoteInboxSize = 1024

// toRemote hands a message from an edge to its relayed connection, opening it on hello.
func (n *Node) toRemote(m relayMsg) {
	key := m.From + "/" + m.Conn
	n.relayMu.Lock()
	rc := n.remotes[key]
	if rc == nil && m.Op == opHello {
		rc = &remoteConn{n: n, edge: m.From, conn: m.Conn, in: make(chan relayMsg, remoteInboxSize)}
		n.remotes[key] = rc
		go rc.run() // it ends with its connection, or with the node
	}
	n.relayMu.Unlock()
	if rc == nil {
		return
	}
	if m.Op != opDrop {
		if m.N != rc.got+1 {
			// A message of the edge's was lost (the store dropped it): the client's frames are
			// not known, so it resumes and sends again what got no answer.
			n.log.Warn("broker: a relayed connection lost messages from its edge; the client resumes",
				"edge", m.From, "got", m.N, "want", rc.got+1)
			rc.Close(StatusServiceRestart, "relay lost frames")
			return
		}
		rc.got = m.N
	}
	select {
	case rc.in <- m:
	default:
		n.log.Warn("broker: a relayed connection fell behind; dropping it", "edge", m.From)
		rc.Abort()
	}
}

// run handles the edge's messages in order: the hello attaches the connection, the rest go to
// its Client as a local connection's would.
func (rc *remoteConn) run() {
	n := rc.n
	defer func() {
		n.relayMu.Lock()
		delete(n.remotes, rc.edge+"/"+rc.conn)
		n.relayMu.Unlock()
		n.remoteEnded(rc)
	}()
	var c *Client
	for {
		var m relayMsg
		select {
		case m = <-rc.in:
		case <-n.ctx.Done():
			if c != nil {
				c.Dropped()
			}
			return
		}
		switch {
		case m.Op == opHello:
			if _, c = n.hello(rc, m.Data, false); c == nil {
				return
			}
		case c == nil:
			return
		case m.Op == opFrame:
			c.Receive(m.Data)
		case m.Op == opAudio:
			c.ReceiveAudio(m.Data)
		case m.Op == opOversized:
			c.Oversized(m.Size, m.Ref)
		case m.Op == opAck:
			s := c.session
			s.post(func() { s.welcomeConfirmed(c) })
		case m.Op == opDrop:
			c.Dropped()
			return
		}
	}
}

// Send implements Transport.
func (rc *remoteConn) Send(frame []byte) { rc.enqueue(relayMsg{Op: opSend, Data: frame}) }

// SendAudio implements Transport.
func (rc *remoteConn) SendAudio(chunk []byte) { rc.enqueue(relayMsg{Op: opSendAudio, Data: chunk}) }

// Close implements Transport: queued frames go first. The connection is done on this node
// too: its reader stops (the edge's drop that follows finds nothing).
func (rc *remoteConn) Close(code int, reason string) {
	rc.enqueue(relayMsg{Op: opClose, Code: code, Reason: reason})
	rc.closing.Store(true)
	rc.stop()
}

// stop ends run without waiting for the edge's drop.
func (rc *remoteConn) stop() {
	select {
	case rc.in <- relayMsg{Op: opDrop}:
	default:
	}
}

// Abort implements Transport.
func (rc *remoteConn) Abort() {
	rc.enqueue(relayMsg{Op: opAbort})
	rc.closing.Store(true)
	rc.stop()
}

// enqueue queues a message to the edge and starts the writer if none runs: the session's
// loop never waits for the store.
func (rc *remoteConn) enqueue(m relayMsg) {
	if rc.closing.Load() {
		return
	}
	m.Conn = rc.conn
	rc.mu.Lock()
	if rc.queued+len(m.Data) > rc.n.cfg.Limits.SendQueueBytes && m.Op != opClose && m.Op != opAbort {
		// The store does not keep up: the connection is dropped like a slow consumer's (its
		// client resumes), and what was queued is not sent.
		rc.pending = []relayMsg{{Op: opClose, Conn: rc.conn, Code: StatusTryAgainLater, Reason: "slow consumer"}}
		rc.queued = 0
		rc.closing.Store(true)
		m = relayMsg{}
	} else {
		rc.pending = append(rc.pending, m)
		rc.queued += len(m.Data)
	}
	start := !rc.writing
	rc.writing = true
	rc.mu.Unlock()
	if m.Op == "" {
		rc.stop()
	}
	if start {
		rc.n.relayOut.Add(1)
		go rc.write()
	}
}

// write sends what is queued, in order, until nothing is left.
func (rc *remoteConn) write() {
	defer rc.n.relayOut.Done()
	for {
		rc.mu.Lock()
		batch := rc.pending
		rc.pending = nil
		rc.queued = 0
		if len(batch) == 0 {
			rc.writing = false
			rc.mu.Unlock()
			return
		}
		rc.mu.Unlock()
		for _, m := range batch {
			rc.sent++
			m.N = rc.sent
			if err := rc.n.sendTo(rc.edge, m); err != nil {
				// The edge cannot hear it: the connection is dropped here (its client resumes
				// once its edge notices, or reconnects elsewhere).
				rc.n.log.Warn("broker: sending to a relayed connection's node failed; dropping it", "edge", rc.edge, "err", err)
				rc.closing.Store(true)
				rc.stop()
				rc.mu.Lock()
				rc.pending, rc.queued, rc.writing = nil, 0, false
				rc.mu.Unlock()
				return
			}
			rc.done.Store(m.N)
			if m.Op == opClose || m.Op == opAbort {
				rc.farewell.Store(true)
			}
		}
	}
}

// dropDeadEdges drops the relayed connections whose edge node is no longer alive (it crashed:
// nobody will send their drop).
func (n *Node) dropDeadEdges(ctx context.Context) {
	forDead(ctx, n, n.remotesByEdge(), (*remoteConn).stop)
}

// remotesByEdge groups the connections relayed to this node by their edge node.
func (n *Node) remotesByEdge() map[string][]*remoteConn {
	n.relayMu.Lock()
	defer n.relayMu.Unlock()
	edges := map[string][]*remoteConn{}
	for _, rc := range n.remotes {
		edges[rc.edge] = append(edges[rc.edge], rc)
	}
	return edges
}

// relayCheck is how often a node pings the nodes it relays connections with.
const relayCheck = time.Second

// pingRelays sends opPing to every node this node relays connections with; the links to a
// node whose inbox does not take it (it died, or the store is unreachable) are broken at once:
// relayed clients are closed with 1012, connections relayed from there are dropped.
func (n *Node) pingRelays() {
	holders, edges := n.edgesByHolder(), n.remotesByEdge()
	peers := map[string]bool{}
	for p := range holders {
		peers[p] = true
	}
	for p := range edges {
		peers[p] = true
	}
	for p := range peers {
		if err := n.sendTo(p, relayMsg{Op: opPing, Data: n.pingFor(holders[p], edges[p])}); err == nil {
			continue
		} else {
			n.log.Warn("broker: a node this node relays connections with does not answer; its links break", "node", p, "err", err)
		}
		for _, e := range holders[p] {
			e.broken("session node gone")
		}
		for _, rc := range edges[p] {
			rc.stop()
		}
	}
}

// relayLost breaks every relayed link of the node (its inbox may have missed messages: the
// store's connection dropped) and has every session it holds reconcile its jobs with the store
// (a relayed job change may be lost too).
func (n *Node) relayLost() {
	n.log.Warn("broker: the node's inbox may have missed messages; relayed connections resume")
	for _, es := range n.edgesByHolder() {
		for _, e := range es {
			e.broken("relay interrupted")
		}
	}
	for _, rcs := range n.remotesByEdge() {
		for _, rc := range rcs {
			rc.Close(StatusServiceRestart, "relay interrupted")
		}
	}
	n.reconcileAll()
}

// forDead calls fn for each item of the groups (by node address) whose node is no longer alive
// (nothing when the store cannot tell).
func forDead[T any](ctx context.Context, n *Node, groups map[string][]T, fn func(T)) {
	if len(groups) == 0 {
		return
	}
	alive, err := n.dir.NodesAlive(ctx, slices.Collect(maps.Keys(groups)))
	if err != nil {
		return
	}
	for node, items := range groups {
		if !alive[node] {
			for _, it := range items {
				fn(it)
			}
		}
	}
}
