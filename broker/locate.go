package broker

import (
	"context"

	"github.com/backchannel-io/backchannel/frames"
)

// Where a session is (SPEC 15: one node at a time holds a session's live parts; SPEC 10:
// resume works on any node). Every entry point that names a session — a hello (client.go,
// package relay), an HTTP request about it (forward.go, the timeline, the WebRTC signaling), the MCP
// facade's initialize (agentport.go) — asks locate first and acts on its answer: a session
// here is served here; one another live node holds is relayed (package relay) or forwarded
// (forward.go) there; an ended one is answered as ended; one no live node holds is taken over
// by an explicit step, takeBack, never as a side effect of a lookup or of an authorization.
//
// locate does not tell a parked session from one journaled by a node that died, nor either
// from a session that does not exist: every entry point would do the same with the three — try
// to take it — and only the take can tell them apart for sure (a look first would cost the
// store a round trip, and another node may take the session between the look and the take).
// takeBack says what it found: the session, now here; a session not free yet (moving); or
// nothing. (For an ended session it only drops a journal that outlived it.)

// place is where locate found a session.
type place int

const (
	// placeUnheld: no live node holds the session and none remembers it ended: it is parked
	// (its node shut down), journaled by a node that died (orphaned once the lease ran out),
	// or unknown. takeBack tells which.
	placeUnheld place = iota
	// placeHere: the session is live on this node.
	placeHere
	// placeNode: another live node holds it (location.holder).
	placeNode
	// placeEnded: it ended within the retention period (location.ended).
	placeEnded
)

// location is locate's answer for one session id.
type location struct {
	id      string
	place   place
	session *Session      // placeHere
	ended   *endedSession // placeEnded
	// holder is the node the directory names as the session's holder and holderTenant the
	// session's tenant there ("" when it names none, or it was not asked: here or ended).
	holder, holderTenant string
	// moving (set by takeBack): the session may exist but could not be taken yet — another
	// node's lease on it still runs, or the store could not be read.
	moving bool
}

// locate tells where session id is, changing nothing: here, held by another live node, ended
// (by this node or any node of the cluster), or held by no live node.
func (n *Node) locate(ctx context.Context, id string) location {
	loc := location{id: id}
	if s := n.session(id); s != nil {
		loc.place, loc.session = placeHere, s
		return loc
	}
	if e := n.endedInfo(id); e != nil {
		loc.place, loc.ended = placeEnded, e
		return loc
	}
	ctx, cancel := context.WithTimeout(ctx, relayTimeout)
	defer cancel()
	holder, tenant, err := n.dir.SessionHolder(ctx, id)
	if err != nil {
		n.log.Warn("broker: looking up a session's node", "session", id, "err", err)
		return loc
	}
	loc.holder, loc.holderTenant = holder, tenant
	if holder == "" || holder == n.addr {
		return loc // nobody holds it: parked, or journaled by a node that died
	}
	if alive, err := n.dir.NodesAlive(ctx, []string{holder}); err == nil && alive[holder] {
		loc.place = placeNode
	}
	// Otherwise its node died holding it (the hold has not run out yet): unheld.
	return loc
}

// takeBack is the explicit step an entry point takes for a session locate found unheld: a
// parked one is taken back, one journaled by a node that died is taken over (Node.claim), and
// it is here from now on. tenant is the caller's tenant when it is known ("" otherwise: a
// join token or a resume token names none); a session of another tenant is left alone. For an
// ended session it drops the journal if it outlived the session (its node could not drop it),
// so that nobody revives it. Anything else is returned as it is.
func (n *Node) takeBack(loc location, tenant string) location {
	if loc.place == placeEnded {
		n.dropEnded(loc.ended, loc.id)
	}
	if loc.place != placeUnheld {
		return loc
	}
	s, held := n.claim(tenant, loc.id)
	if s != nil {
		loc.place, loc.session = placeHere, s
		return loc
	}
	loc.moving = held
	return loc
}

// takeBackFor is takeBack for an HTTP request whose bearer token is token (the tenant of an
// API key, or none), answering a retryable internal error (HTTP 503: try again) while the
// session moves from a node that died: a node takes it over within HoldTTL.
func (n *Node) takeBackFor(loc location, token string) (location, *frames.Error) {
	keyTenant, _ := n.tenantOf(token)
	loc = n.takeBack(loc, keyTenant)
	if loc.moving && !n.holderAlive(loc.id) {
		return loc, moving(loc.id)
	}
	return loc, nil
}

// TakeBack is the explicit step of an HTTP entry point outside this package (the WebRTC
// signaling) for session id: when no live node holds it — parked by a node that shut down, or
// journaled by one that died — this node takes it. token is the request's bearer token (an API
// key's tenant is the only session tenant it takes). It returns a retryable internal error
// (HTTP 503, AuthStatus) while the session moves from a node that died, nil otherwise — also
// when there was nothing to take: authorization answers for a session that does not exist.
func (n *Node) TakeBack(id, token string) *frames.Error {
	_, e := n.takeBackFor(n.locate(n.ctx, id), token)
	return e
}
