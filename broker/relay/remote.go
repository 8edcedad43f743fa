package relay

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backchannel-io/backchannel/frames"
)

// Message is one message between an edge and a holder: the wire format between nodes.
type Message struct {
	Op     string `json:"op"`
	From   string `json:"from"` // the sender's node address
	Conn   string `json:"conn"` // the connection's id at its edge
	Data   []byte `json:"data,omitempty"`
	Code   int    `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
	Size   int    `json:"size,omitempty"`
	Ref    string `json:"ref,omitempty"` // OpOversized: the id read from the frame's start
	// N numbers the messages of one connection in one direction, from 1 (the hello), so that
	// a message the store lost is noticed at the next one (OpDrop and OpPing carry none).
	N int64 `json:"n,omitempty"`
}

// The ops of Message: edge → holder, then holder → edge.
const (
	OpHello     = "hello"
	OpFrame     = "frame"
	OpAudio     = "audio"
	OpOversized = "oversized"
	OpDrop      = "drop"
	// OpAck: the edge got the holder's first message — the welcome — and writes it to its
	// client once the store took the ack (until then the token the hello used stays valid
	// too: Session.welcomeConfirmed).
	OpAck = "ack"

	OpSend      = "send"
	OpSendAudio = "send_audio"
	OpClose     = "close"
	OpAbort     = "abort"

	// OpPing goes, every CheckEvery, to each node this node relays connections with: one whose
	// inbox no longer listens (it died) is noticed at once, not when its liveness runs out. It
	// lists the links with that node, which checks them (relaycheck.go) and answers with
	// OpPong when it lacks some.
	OpPing = "ping"
	OpPong = "pong"
)

// Timeout bounds one send to another node's inbox.
const Timeout = 5 * time.Second

// Inbox takes one message another node sent to this node's inbox (cluster.Directory.NodeInbox).
func (n *Relay) Inbox(b []byte) {
	if n.ctx.Err() != nil {
		return // halted (Halt), or shut down
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		n.log.Warn("relay: an undecodable message from another node", "err", err)
		return
	}
	switch m.Op {
	case OpHello, OpFrame, OpAudio, OpOversized, OpDrop, OpAck:
		n.toRemote(m)
	case OpSend, OpSendAudio, OpClose, OpAbort:
		n.toEdge(m)
	case OpPing:
		n.pinged(m)
	case OpPong:
		n.ponged(m)
	}
}

// sendTo sends m to node's inbox.
func (n *Relay) sendTo(node string, m Message) error {
	m.From = n.addr
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	return n.dir.SendToNode(ctx, node, b)
}

// remote is, on the holder, a connection whose edge is another node.
type remote struct {
	n    *Relay
	edge string
	conn string
	in   chan Message // from the edge, handled in order by run

	closing  atomic.Bool
	got      int64        // the number of the last message from the edge (the inbox's alone)
	sent     int64        // the number of the last message to the edge (the writer's alone)
	done     atomic.Int64 // the number of the last message to the edge the store took
	farewell atomic.Bool  // the store took its close (or abort)
	endedAt  time.Time    // when run ended (Node.endedRemotes; under mu)
	mu       sync.Mutex
	pending  []Message // to the edge, sent in order by one writer at a time
	queued   int       // bytes in pending
	writing  bool
}

// remoteInboxSize bounds what waits for a relayed connection's turn; an edge that far ahead
// loses its connection (it resumes).
const remoteInboxSize = 1024

// toRemote hands a message from an edge to its relayed connection, opening it on hello.
func (n *Relay) toRemote(m Message) {
	key := m.From + "/" + m.Conn
	n.mu.Lock()
	rc := n.remotes[key]
	if rc == nil && m.Op == OpHello {
		rc = &remote{n: n, edge: m.From, conn: m.Conn, in: make(chan Message, remoteInboxSize)}
		n.remotes[key] = rc
		go rc.run() // it ends with its connection, or with the node
	}
	n.mu.Unlock()
	if rc == nil {
		return
	}
	if m.Op != OpDrop {
		if m.N != rc.got+1 {
			// A message of the edge's was lost (the store dropped it): the client's frames are
			// not known, so it resumes and sends again what got no answer.
			n.log.Warn("relay: a relayed connection lost messages from its edge; the client resumes",
				"edge", m.From, "got", m.N, "want", rc.got+1)
			rc.Close(frames.CloseServiceRestart, "relay lost frames")
			return
		}
		rc.got = m.N
	}
	select {
	case rc.in <- m:
	default:
		n.log.Warn("relay: a relayed connection fell behind; dropping it", "edge", m.From)
		rc.Abort()
	}
}

// run handles the edge's messages in order: the hello attaches the connection, the rest go to
// its Client as a local connection's would.
func (rc *remote) run() {
	n := rc.n
	defer func() {
		n.mu.Lock()
		delete(n.remotes, rc.edge+"/"+rc.conn)
		n.mu.Unlock()
		n.remoteEnded(rc)
	}()
	var c Conn
	for {
		var m Message
		select {
		case m = <-rc.in:
		case <-n.ctx.Done():
			if c != nil {
				c.Dropped()
			}
			return
		}
		switch {
		case m.Op == OpHello:
			if c = n.hello(rc, m.Data); c == nil {
				return
			}
		case c == nil:
			return
		case m.Op == OpFrame:
			c.Receive(m.Data)
		case m.Op == OpAudio:
			c.ReceiveAudio(m.Data)
		case m.Op == OpOversized:
			c.Oversized(m.Size, m.Ref)
		case m.Op == OpAck:
			c.WelcomeConfirmed()
		case m.Op == OpDrop:
			c.Dropped()
			return
		}
	}
}

// Send implements Transport.
func (rc *remote) Send(frame []byte) { rc.enqueue(Message{Op: OpSend, Data: frame}) }

// SendAudio implements Transport.
func (rc *remote) SendAudio(chunk []byte) { rc.enqueue(Message{Op: OpSendAudio, Data: chunk}) }

// Close implements Transport: queued frames go first. The connection is done on this node
// too: its reader stops (the edge's drop that follows finds nothing).
func (rc *remote) Close(code int, reason string) {
	rc.enqueue(Message{Op: OpClose, Code: code, Reason: reason})
	rc.closing.Store(true)
	rc.stop()
}

// stop ends run without waiting for the edge's drop.
func (rc *remote) stop() {
	select {
	case rc.in <- Message{Op: OpDrop}:
	default:
	}
}

// Abort implements Transport.
func (rc *remote) Abort() {
	rc.enqueue(Message{Op: OpAbort})
	rc.closing.Store(true)
	rc.stop()
}

// enqueue queues a message to the edge and starts the writer if none runs: the session's
// loop never waits for the store.
func (rc *remote) enqueue(m Message) {
	if rc.closing.Load() {
		return
	}
	m.Conn = rc.conn
	rc.mu.Lock()
	if rc.queued+len(m.Data) > rc.n.sendQueueBytes && m.Op != OpClose && m.Op != OpAbort {
		// The store does not keep up: the connection is dropped like a slow consumer's (its
		// client resumes), and what was queued is not sent.
		rc.pending = []Message{{Op: OpClose, Conn: rc.conn, Code: frames.CloseTryAgainLater, Reason: "slow consumer"}}
		rc.queued = 0
		rc.closing.Store(true)
		m = Message{}
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
		rc.n.out.Add(1)
		go rc.write()
	}
}

// write sends what is queued, in order, until nothing is left.
func (rc *remote) write() {
	defer rc.n.out.Done()
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
				rc.n.log.Warn("relay: sending to a relayed connection's node failed; dropping it", "edge", rc.edge, "err", err)
				rc.closing.Store(true)
				rc.stop()
				rc.mu.Lock()
				rc.pending, rc.queued, rc.writing = nil, 0, false
				rc.mu.Unlock()
				return
			}
			rc.done.Store(m.N)
			if m.Op == OpClose || m.Op == OpAbort {
				rc.farewell.Store(true)
			}
		}
	}
}

// DropDead drops the relayed connections whose edge node is no longer alive (it crashed:
// nobody will send their drop), and closes with 1012 the edges whose holder is no longer alive:
// their clients reconnect, and a session that was parked is taken back.
func (n *Relay) DropDead(ctx context.Context) {
	n.closeDeadHolders(ctx)
	forDead(ctx, n, n.remotesByEdge(), (*remote).stop)
}

// remotesByEdge groups the connections relayed to this node by their edge node.
func (n *Relay) remotesByEdge() map[string][]*remote {
	n.mu.Lock()
	defer n.mu.Unlock()
	edges := map[string][]*remote{}
	for _, rc := range n.remotes {
		edges[rc.edge] = append(edges[rc.edge], rc)
	}
	return edges
}

// CheckEvery is how often a node pings the nodes it relays connections with (Ping).
const CheckEvery = time.Second

// Ping sends OpPing to every node this node relays connections with (every CheckEvery); the
// links to a node whose inbox does not take it (it died, or the store is unreachable) are
// broken at once: relayed clients are closed with 1012, connections relayed from there are
// dropped.
func (n *Relay) Ping() {
	holders, edges := n.edgesByHolder(), n.remotesByEdge()
	peers := map[string]bool{}
	for p := range holders {
		peers[p] = true
	}
	for p := range edges {
		peers[p] = true
	}
	for p := range peers {
		if err := n.sendTo(p, Message{Op: OpPing, Data: n.pingFor(holders[p], edges[p])}); err == nil {
			continue
		} else {
			n.log.Warn("relay: a node this node relays connections with does not answer; its links break", "node", p, "err", err)
		}
		for _, e := range holders[p] {
			e.broken("session node gone")
		}
		for _, rc := range edges[p] {
			rc.stop()
		}
	}
}

// Lost breaks every relayed link of the node: its inbox may have missed messages (the store's
// connection dropped).
func (n *Relay) Lost() {
	n.log.Warn("relay: the node's inbox may have missed messages; relayed connections resume")
	for _, es := range n.edgesByHolder() {
		for _, e := range es {
			e.broken("relay interrupted")
		}
	}
	for _, rcs := range n.remotesByEdge() {
		for _, rc := range rcs {
			rc.Close(frames.CloseServiceRestart, "relay interrupted")
		}
	}
}

// forDead calls fn for each item of the groups (by node address) whose node is no longer alive
// (nothing when the store cannot tell).
func forDead[T any](ctx context.Context, n *Relay, groups map[string][]T, fn func(T)) {
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
