package broker

import "github.com/backchannel-io/backchannel/broker/relay"

// The node's side of package relay: connections relayed to this node attach as local ones do.

// relayHost is the node as the relay's relay.Node.
type relayHost struct{ n *Node }

// Hello implements relay.Node: a relayed hello is answered here and never relayed on.
func (h relayHost) Hello(tr relay.Transport, data []byte) relay.Conn {
	if _, c := h.n.hello(tr, data, false); c != nil {
		return c
	}
	return nil
}

// WelcomeConfirmed implements relay.Conn: the edge of the relayed connection c got its welcome
// and writes it to the client (Session.welcomeConfirmed).
func (c *Client) WelcomeConfirmed() {
	s := c.session
	s.post(func() { s.welcomeConfirmed(c) })
}

// relayLost runs when the node's inbox may have missed messages (the store's connection
// dropped): every relayed link breaks (its clients resume), and every session the node holds
// reconciles its jobs with the store, since a relayed job change may be lost too.
func (n *Node) relayLost() {
	n.relay.Lost()
	n.reconcileAll()
}

// relayTimeout bounds one round trip to the cluster (a directory call, a message to another
// node): the relay's own bound.
const relayTimeout = relay.Timeout
