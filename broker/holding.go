package broker

import (
	"context"
	"time"

	"github.com/backchannel-io/backchannel/cluster"
)

// Holding. A node records in its cluster's directory (cluster.Directory) which sessions it
// holds and that it is alive, both for Config.HoldTTL and renewed every third of it, so that another node
// can relay a connection to it (package relay) and can tell when it crashed.

// hold records that this node holds session s (created or taken back here).
func (n *Node) hold(s *Session) {
	ctx, cancel := context.WithTimeout(n.ctx, relayTimeout)
	defer cancel()
	if err := n.dir.HoldSessions(ctx, n.addr, []cluster.HeldSession{{ID: s.id, Tenant: s.tenant}}, n.cfg.HoldTTL); err != nil {
		n.log.Warn("broker: recording a session's node", "session", s.id, "err", err)
	}
}

// release records that this node no longer holds session id (ended or parked). It does not
// wait for the store.
func (n *Node) release(id string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), relayTimeout)
		defer cancel()
		if err := n.dir.ReleaseSession(ctx, n.addr, id); err != nil {
			n.log.Warn("broker: releasing a session", "session", id, "err", err)
		}
	}()
}

// holdEvery renews the node's sessions and liveness every third of HoldTTL, and drops the
// relayed connections whose other node died, until ctx ends.
func (n *Node) holdEvery(ctx context.Context) {
	n.renew(ctx)
	every(ctx, n.cfg.HoldTTL/3, func() {
		n.renew(ctx)
		n.relay.DropDead(ctx)
	})
}

// every runs fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// renew records the node alive and renews its hold on every session it serves.
func (n *Node) renew(ctx context.Context) {
	n.alive(ctx)
	n.mu.Lock()
	ids := make([]cluster.HeldSession, 0, len(n.sessions))
	for id, s := range n.sessions {
		ids = append(ids, cluster.HeldSession{ID: id, Tenant: s.tenant})
	}
	closing := n.closing
	n.mu.Unlock()
	if closing {
		return
	}
	if err := n.dir.HoldSessions(ctx, n.addr, ids, n.cfg.HoldTTL); err != nil {
		n.log.Warn("broker: renewing the node's sessions", "sessions", len(ids), "err", err)
	}
	n.renewLeases(ctx)
}

// listen opens the node's inbox, trying again every second while the store cannot be reached.
func (n *Node) listen(ctx context.Context) {
	n.untilDone(ctx, "opening the node's inbox", func() error { return n.dir.NodeInbox(ctx, n.addr, n.relay.Inbox, n.relayLost) }, &n.inboxUp)
}
