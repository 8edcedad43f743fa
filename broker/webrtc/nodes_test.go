package webrtc

import (
	"testing"

	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestOfferOnAnotherNode covers SPEC 15 for WebRTC callers: the offer for a session node A holds
// is posted to node B, which forwards it to A; the peer connection lives on A (the answer
// carries A's candidates), and the caller's hello on its data channel joins the session there.
func TestOfferOnAnotherNode(t *testing.T) {
	t.Parallel()
	opts := brokertest.SharedRedis(t)
	a := startOn(t, opts, Options{})
	b := startOn(t, opts, Options{})
	a.b.WaitRelaying(t)
	b.b.WaitRelaying(t)
	id, jt := createSession(t, a, brokertest.KeyA)
	c := dial(t, b, "caller through B", id, jt)
	c.join(jt)
	waitPeers(t, a, 1)
	waitPeers(t, b, 0)
}

// TestOfferForAParkedSession: the offer is an entry point like a hello (SPEC 15, 18). Posted to
// node B for a session node A parked when it shut down, it makes B take the session back — an
// explicit step before the offer is authorized — and the peer connection lives on B, where
// the caller's hello on its data channel joins the session.
func TestOfferForAParkedSession(t *testing.T) {
	t.Parallel()
	opts := brokertest.SharedRedis(t)
	a := startOn(t, opts, Options{})
	b := startOn(t, opts, Options{})
	a.b.WaitRelaying(t)
	b.b.WaitRelaying(t)
	id, jt := createSession(t, a, brokertest.KeyA)
	a.b.Close(false) // SIGTERM with the Redis store: the session is parked
	c := dial(t, b, "caller on B", id, jt)
	c.join(jt)
	waitPeers(t, b, 1)
}
