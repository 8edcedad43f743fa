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
