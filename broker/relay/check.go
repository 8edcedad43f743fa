package relay

import (
	"encoding/json"
	"time"

	"github.com/backchannel-io/backchannel/frames"
)

// The check of relayed links. Numbering every message of a link finds a lost one
// at the next message — but a lost *last* message (an answer, a close) is followed by nothing,
// and a link one side dropped without a word (the store refused its close) looks alive to the
// other. So every CheckEvery each node pings each node it relays connections with, listing its
// links with that node and, for each, the number of its last message the store took (done).
// Pub/sub keeps one publisher's order, and a message counts as done only once its publish
// returned, so when the ping arrives every message up to done is already in: a receiver that
// got fewer lost some, and breaks the link (the client resumes; replay gives it what it
// missed). The answer, OpPong, lists the links the receiver does not have — its side dropped
// them — and the pinger breaks its side of those.

// LinkState is one link in a ping: the connection's id at its edge and the number of the last
// message its sender handed to the store.
type LinkState struct {
	Conn string `json:"conn"`
	Done int64  `json:"done"`
}

// PingData is what OpPing carries: the sender's links with the receiver, where the sender is
// the edge (Edges) and where it holds the session (Held).
type PingData struct {
	Edges []LinkState `json:"edges,omitempty"`
	Held  []LinkState `json:"held,omitempty"`
}

// PongData is what OpPong carries: of the pinger's links, those the receiver no longer has —
// as holder (Reset: the pinger, their edge, closes its client with 1012) and as edge (Dropped:
// the pinger, their holder, drops the connection).
type PongData struct {
	Reset   []string `json:"reset,omitempty"`
	Dropped []string `json:"dropped,omitempty"`
}

// endedLinkKeep is how long a holder remembers a relayed connection that ended, so that a ping
// listing it before its close reached the edge does not have the edge reset it.
const endedLinkKeep = 30 * time.Second

// pingFor lists the node's links with peer, for OpPing.
func (n *Relay) pingFor(edges []*Edge, held []*remote) []byte {
	var p PingData
	for _, e := range edges {
		if d := e.done.Load(); d > 0 { // its hello is in: the holder knows it
			p.Edges = append(p.Edges, LinkState{Conn: e.conn, Done: d})
		}
	}
	for _, rc := range held {
		p.Held = append(p.Held, LinkState{Conn: rc.conn, Done: rc.done.Load()})
	}
	b, _ := json.Marshal(p)
	return b
}

// pinged checks the links a ping from another node lists, on the inbox's goroutine (where
// every earlier message of that node was taken), and answers with what this node lacks.
func (n *Relay) pinged(m Message) {
	var p PingData
	if len(m.Data) == 0 || json.Unmarshal(m.Data, &p) != nil {
		return
	}
	var pong PongData
	for _, l := range p.Edges { // this node holds their sessions
		n.mu.Lock()
		rc := n.remotes[m.From+"/"+l.Conn]
		ended := n.endedRemotes[m.From+"/"+l.Conn]
		n.mu.Unlock()
		switch {
		case rc != nil && rc.got < l.Done:
			n.log.Warn("relay: a relayed connection lost its edge's last messages; the client resumes",
				"edge", m.From, "got", rc.got, "sent", l.Done)
			rc.Close(frames.CloseServiceRestart, "relay lost frames")
		case rc == nil && (ended == nil || !ended.farewellOnItsWay()):
			pong.Reset = append(pong.Reset, l.Conn)
		}
	}
	for _, l := range p.Held { // this node is their edge
		n.mu.Lock()
		e := n.edges[l.Conn]
		n.mu.Unlock()
		switch {
		case e == nil || e.holder != m.From:
			pong.Dropped = append(pong.Dropped, l.Conn)
		case e.got.Load() < l.Done:
			n.log.Warn("relay: a relayed connection lost the session node's last messages; the client resumes",
				"session", e.session, "node", e.holder, "got", e.got.Load(), "sent", l.Done)
			e.broken("relay lost frames")
		}
	}
	if len(pong.Reset) == 0 && len(pong.Dropped) == 0 {
		return
	}
	b, _ := json.Marshal(pong)
	go func() { // not on the inbox's goroutine
		if err := n.sendTo(m.From, Message{Op: OpPong, Data: b}); err != nil {
			n.log.Debug("relay: answering a ping", "node", m.From, "err", err)
		}
	}()
}

// ponged breaks this node's side of the links the other node no longer has.
func (n *Relay) ponged(m Message) {
	var p PongData
	if json.Unmarshal(m.Data, &p) != nil {
		return
	}
	for _, conn := range p.Reset {
		n.mu.Lock()
		e := n.edges[conn]
		n.mu.Unlock()
		if e != nil && e.holder == m.From {
			n.log.Warn("relay: the session's node no longer has a relayed connection; the client resumes",
				"session", e.session, "node", e.holder)
			e.broken("relay interrupted")
		}
	}
	for _, conn := range p.Dropped {
		n.mu.Lock()
		rc := n.remotes[m.From+"/"+conn]
		n.mu.Unlock()
		if rc != nil {
			rc.stop()
		}
	}
}

// remoteEnded remembers a relayed connection that ended on this node (endedLinkKeep).
func (n *Relay) remoteEnded(rc *remote) {
	n.mu.Lock()
	defer n.mu.Unlock()
	rc.endedAt = time.Now()
	n.endedRemotes[rc.edge+"/"+rc.conn] = rc
	for k, old := range n.endedRemotes {
		if time.Since(old.endedAt) > endedLinkKeep {
			delete(n.endedRemotes, k)
		}
	}
}

// farewellOnItsWay reports whether the edge of an ended connection hears of its end without
// a reset: its close (or abort) was taken by the store, or is still being sent.
func (rc *remote) farewellOnItsWay() bool {
	if rc.farewell.Load() {
		return true
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.writing
}
