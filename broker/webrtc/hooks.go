package webrtc

import (
	"net/http"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/frames"
)

// The broker hooks this transport needs; *broker.Node satisfies them (tests may stand in).

// sessionAuthorizer authenticates a request for a resource of a session.
type sessionAuthorizer interface {
	// AuthorizeSignaling checks token — an API key of the session's tenant, the session's join
	// token or its caller token — for the WebRTC signaling of session id (SPEC 3.1, 3.5). It
	// returns the session's tenant and whether the session is still live (an ended one is
	// remembered for the retention period), or an error frame: not_found (HTTP 404: no such
	// session, or one of another tenant, for an API key) or unauthorized (HTTP 401).
	AuthorizeSignaling(id, token string) (tenant string, live bool, err *frames.Error)
}

// sessionTaker takes a session no live node holds for this node, before its authorization.
type sessionTaker interface {
	// TakeBack takes session id for this node when no live node holds it — parked by a node
	// that shut down, or journaled by one that died (SPEC 15) — with the tenant of token when
	// it is an API key. It returns a retryable internal error (HTTP 503) while the session
	// moves from a node that died, nil otherwise.
	TakeBack(id, token string) *frames.Error
}

// hangUpper ends a session because its caller hung up.
type hangUpper interface {
	// HangUp ends the live session id of tenant with reason hung_up (SPEC 3.6) and returns once
	// session.ended went to every connection of the session. It reports false when tenant has
	// no such live session.
	HangUp(tenant, id string) bool
}

// authorization is the outcome of authorize.
type authorization struct {
	tenant string // "" when the interim check could not tell
	live   bool   // true when the session is live, or the interim check could not tell
	status int    // the HTTP status of a refusal; 0 when authorized
	err    *frames.Error
}

// authorize checks the bearer token of r for session id, once the session is where it can be
// served: a session no live node holds is taken first (TakeBack), an explicit step of its own.
func (h *Handler) authorize(r *http.Request, id string) authorization {
	token := broker.BearerToken(r)
	if h.taker != nil {
		if e := h.taker.TakeBack(id, token); e != nil {
			return authorization{status: broker.AuthStatus(e), err: e}
		}
	}
	if h.authorizer != nil {
		tenant, live, e := h.authorizer.AuthorizeSignaling(id, token)
		if e != nil {
			return authorization{status: broker.AuthStatus(e), err: e}
		}
		return authorization{tenant: tenant, live: live}
	}
	return authorization{status: http.StatusServiceUnavailable, err: frames.Errorf(frames.CodeInternal, "the broker cannot authorize sessions")}
}

// hangUpSession ends session id with reason hung_up and closes p, the resource's peer
// connection, if it is still open.
func (h *Handler) hangUpSession(a authorization, id string, p *peer) bool {
	if h.hangUpper == nil {
		return false
	}
	ended := a.live && h.hangUpper.HangUp(a.tenant, id)
	// An attached peer connection is closed by the session's end, after session.ended; one
	// that never said hello is closed here.
	if p != nil && (!ended || p.client.Load() == nil) {
		p.Close(broker.StatusNormal, "hung up")
	}
	return true
}
