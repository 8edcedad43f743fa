package broker

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/relay"
)

// The check of relayed links by ping (package relay, check.go), driven from the other node's end as in
// relay_test.go: the test sends the pings a real node would, naming messages the store lost.

// ping sends an relay.OpPing listing links.
func (p *peer) ping(d relay.PingData) {
	p.t.Helper()
	b, _ := json.Marshal(d)
	p.send(relay.Message{Op: relay.OpPing, Data: b})
}

// pong waits for the node's answer to a ping.
func (p *peer) pong() relay.PongData {
	p.t.Helper()
	for {
		select {
		case m := <-p.got:
			if m.Op == relay.OpPong {
				var d relay.PongData
				if err := json.Unmarshal(m.Data, &d); err != nil {
					p.t.Fatalf("pong %q: %v", m.Data, err)
				}
				return d
			}
		case <-time.After(10 * time.Second):
			p.t.Fatal("no pong within 10 s")
		}
	}
}

// relayedHost makes edge relay a host's hello for a new session of n, as connection conn, and
// returns the welcome's frame.
func relayedHost(t *testing.T, n *Node, edge *peer, conn string) (*Session, map[string]any) {
	t.Helper()
	s, err := n.CreateSession("tenant-t", ModelConfig{})
	if err != nil {
		t.Fatal(err)
	}
	edge.send(relay.Message{Op: relay.OpHello, Conn: conn, N: 1, Data: helloData(map[string]any{"role": "host", "session_id": s.ID(), "join_token": s.JoinToken()})})
	w := edge.next(conn)
	if w.Op != relay.OpSend || w.N != 1 || frame(t, w)["type"] != "welcome" {
		t.Fatalf("the holder's first message to the edge: %+v, want the welcome as message 1", w)
	}
	return s, frame(t, w)
}

// TestRelayPingFindsTheEdgesLastMessageLost: the store lost the last message an edge sent (a
// client's frame) — no later message shows the gap. The edge's next ping says how many it sent;
// the holder has fewer, and closes the connection with 1012 so the client resumes and sends
// again what got no answer.
func TestRelayPingFindsTheEdgesLastMessageLost(t *testing.T) {
	n, store := relayNode(t)
	edge := newPeer(t, store, "edge-x", n.addr)
	relayedHost(t, n, edge, "c1")
	edge.ping(relay.PingData{Edges: []relay.LinkState{{Conn: "c1", Done: 1}}})
	edge.ping(relay.PingData{Edges: []relay.LinkState{{Conn: "c1", Done: 2}}}) // message 2 never arrived
	if m := edge.next("c1"); m.Op != relay.OpClose || m.Code != StatusServiceRestart || m.N != 2 {
		t.Fatalf("after a ping naming a lost message the holder sent %+v, want close 1012 as message 2", m)
	}
}

// TestRelayPingFindsTheHoldersLastMessageLost: the store lost the last message a holder sent
// to an edge (an answer). The holder's next ping says how many it sent; the edge has fewer, so
// it closes its client with 1012 (replay gives it what it missed) and tells the holder.
func TestRelayPingFindsTheHoldersLastMessageLost(t *testing.T) {
	holder, tc, h, _ := edgeOfElsewhere(t)
	// A ping naming what the edge has (and a link it never had, so that its pong shows the
	// ping was handled) leaves the client alone.
	holder.ping(relay.PingData{Held: []relay.LinkState{{Conn: h.Conn, Done: 1}, {Conn: "phantom", Done: 1}}})
	if p := holder.pong(); !slices.Equal(p.Dropped, []string{"phantom"}) {
		t.Fatalf("the pong: %+v, want dropped [phantom]", p)
	}
	select {
	case code := <-tc.closed:
		t.Fatalf("the client was closed (%d) though the edge had every message", code)
	default:
	}
	holder.ping(relay.PingData{Held: []relay.LinkState{{Conn: h.Conn, Done: 2}}}) // message 2 never arrived
	select {
	case code := <-tc.closed:
		if code != StatusServiceRestart {
			t.Errorf("the client was closed with %d, want 1012", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not closed after a ping naming a lost message")
	}
	for {
		if d := holder.next(h.Conn); d.Op == relay.OpDrop {
			break
		}
	}
}

// TestRelayPingFindsLinksTheOtherSideDropped: a link one side dropped without the other
// hearing of it (its close was refused by the store) is named in the ping of the side that
// still has it; the answer lists it, and that side breaks it too. A connection whose close
// the store took is not reset: its edge hears of its end from the close itself.
func TestRelayPingFindsLinksTheOtherSideDropped(t *testing.T) {
	n, store := relayNode(t)
	edge := newPeer(t, store, "edge-x", n.addr)
	_, w := relayedHost(t, n, edge, "c1")
	// c1's slot is resumed by a local connection: the holder closes c1 with 1008.
	tc := &testConn{t: t, frames: make(chan map[string]any, 64)}
	n.Hello(tc, helloData(map[string]any{"role": "host", "session_id": w["session_id"], "resume_token": w["resume_token"], "last_seq": 0}))
	if f := tc.next(); f["type"] != "welcome" {
		t.Fatalf("the local resume: %v", f)
	}
	if m := edge.next("c1"); m.Op != relay.OpClose {
		t.Fatalf("the relayed connection whose slot was resumed got %+v, want its close", m)
	}
	edge.ping(relay.PingData{Edges: []relay.LinkState{{Conn: "c1", Done: 1}, {Conn: "ghost", Done: 3}}, Held: []relay.LinkState{{Conn: "phantom", Done: 1}}})
	p := edge.pong()
	if !slices.Equal(p.Reset, []string{"ghost"}) || !slices.Equal(p.Dropped, []string{"phantom"}) {
		t.Errorf("the pong: %+v, want reset [ghost] (c1 said goodbye) and dropped [phantom]", p)
	}
}
