package webrtc

import (
	"bytes"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/turn/v5"
	"github.com/pion/webrtc/v4"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/wiretest"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// sdpCandidates parses every a=candidate line of an SDP.
func sdpCandidates(t *testing.T, sdp string) []ice.Candidate {
	t.Helper()
	var out []ice.Candidate
	for _, line := range strings.Split(sdp, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "a=candidate:") {
			continue
		}
		c, err := ice.UnmarshalCandidate(strings.TrimPrefix(line, "a="))
		if err != nil {
			t.Fatalf("candidate %q: %v", line, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		t.Fatalf("the SDP has no candidate:\n%s", sdp)
	}
	return out
}

// freeUDPRange returns a block of n consecutive UDP ports, all free on 127.0.0.1 a moment
// ago, below the kernel's ephemeral range (so other sockets of the machine do not take them
// meanwhile).
func freeUDPRange(t *testing.T, n int) (lo, hi uint16) {
	t.Helper()
	for range 50 {
		base := 20000 + rand.IntN(10000/n)*n
		var conns []net.PacketConn
		ok := true
		for p := base; p < base+n; p++ {
			c, err := net.ListenPacket("udp4", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				break
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			_ = c.Close()
		}
		if ok {
			return uint16(base), uint16(base + n - 1)
		}
	}
	t.Fatalf("no %d free consecutive UDP ports", n)
	return 0, 0
}

// callWorks checks a whole call over the peer connection: hello, a caller.text turn, and the
// agent's speech as PCMU RTP on the audio track.
func callWorks(t *testing.T, c *caller, jt string) {
	t.Helper()
	c.join(jt)
	c.send(map[string]any{"type": "caller.text", "text": "say over the wire"})
	c.expect(wiretest.TypeWith("transcript", "role", "agent", "text", "over the wire"))
	c.waitPackets(10)
	c.checkSeq()
}

// brokerPort is the broker's port of the caller's selected ICE candidate pair.
func (c *caller) brokerPort() int {
	c.t.Helper()
	pair, err := c.pc.SCTP().Transport().ICETransport().GetSelectedCandidatePair()
	if err != nil || pair == nil {
		c.t.Fatalf("%s: no selected candidate pair (%v)", c.name, err)
	}
	return int(pair.Remote.Port)
}

// TestUDPPortRange: with UDPPortMin/UDPPortMax (serve's --webrtc-udp-port-min/max), every
// candidate of every answer is on a port of the range, the call goes over one of them, and
// every peer connection gets a port of its own.
func TestUDPPortRange(t *testing.T) {
	t.Parallel()
	lo, hi := freeUDPRange(t, 8)
	e := start(t, Options{UDPPortMin: lo, UDPPortMax: hi, IPFilter: loopbackIPv4}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	c := dial(t, e, "caller", id, jt)
	h := dial(t, e, "host", id, jt)
	inRange := func(p int) bool { return p >= int(lo) && p <= int(hi) }
	ports := map[int]string{}
	for _, p := range []*caller{c, h} {
		for _, cand := range sdpCandidates(t, p.Answer) {
			if cand.Type() != ice.CandidateTypeHost || cand.Address() != "127.0.0.1" {
				t.Errorf("%s: candidate %s: want only host candidates on 127.0.0.1", p.name, cand.Marshal())
			}
			if !inRange(cand.Port()) {
				t.Errorf("%s: candidate %s: port outside %d-%d", p.name, cand.Marshal(), lo, hi)
			}
			if other, ok := ports[cand.Port()]; ok && other != p.name {
				t.Errorf("%s and %s share port %d", other, p.name, cand.Port())
			}
			ports[cand.Port()] = p.name
		}
		if port := p.brokerPort(); !inRange(port) {
			t.Errorf("%s: the call goes over the broker's port %d, outside %d-%d", p.name, port, lo, hi)
		}
	}
	callWorks(t, c, jt)
}

// TestUDPPortRangeExhausted: when every port of the range is taken, an offer is answered 503
// (an answer without candidates could never connect); the port serves again once its peer
// connection ended.
func TestUDPPortRangeExhausted(t *testing.T) {
	t.Parallel()
	lo, _ := freeUDPRange(t, 1)
	e := start(t, Options{UDPPortMin: lo, UDPPortMax: lo, IPFilter: loopbackIPv4}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	first := dial(t, e, "first", id, jt)
	_, offer := newCaller(t, "second")
	status, _, body := wiretest.HTTPDo(t, http.MethodPost, e.offerURL(id), jt, "application/sdp", offer)
	checkHTTPError(t, "offer with the only port in use", status, body, http.StatusServiceUnavailable, "internal")
	if err := first.pc.GracefulClose(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(timeout)
	for {
		c, offer := newCaller(t, "third")
		status, _, body := wiretest.HTTPDo(t, http.MethodPost, e.offerURL(id), jt, "application/sdp", offer)
		if status == http.StatusCreated {
			for _, cand := range sdpCandidates(t, string(body)) {
				if cand.Port() != int(lo) {
					t.Fatalf("candidate %s: want port %d", cand.Marshal(), lo)
				}
			}
			_ = c.pc.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the port was not released after the peer connection ended: %d %s", status, body)
		}
		_ = c.pc.Close()
		time.Sleep(100 * time.Millisecond)
	}
}

// publicIP is a documentation address (RFC 5737) standing for a cloud VM's public IP.
const publicIP = "203.0.113.7"

// TestPublicIP: an address rewrite rule of the shape serve's --webrtc-public-ip makes (pion's
// successor of SetNAT1To1IPs) publishes the public IP instead of the local address in every
// candidate of the answer. Nothing on this machine answers on that IP, so no call is made.
func TestPublicIP(t *testing.T) {
	t.Parallel()
	e := start(t, Options{IPFilter: loopbackIPv4, AddressRewriteRules: []webrtc.ICEAddressRewriteRule{
		{External: []string{publicIP}, AsCandidateType: webrtc.ICECandidateTypeHost}}}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	_, offer := newCaller(t, "caller")
	status, _, body := wiretest.HTTPDo(t, http.MethodPost, e.offerURL(id), jt, "application/sdp", offer)
	if status != http.StatusCreated {
		t.Fatalf("POST offer: %d %s", status, body)
	}
	for _, cand := range sdpCandidates(t, string(body)) {
		if cand.Address() != publicIP || cand.Type() != ice.CandidateTypeHost || cand.Port() == 0 {
			t.Errorf("candidate %s: want a host candidate on %s", cand.Marshal(), publicIP)
		}
	}
	if bytes.Contains(body, []byte("127.0.0.1")) {
		t.Errorf("the answer still shows the local address:\n%s", body)
	}
}

// turnServer is a STUN/TURN server (github.com/pion/turn) on loopback, recording what it
// served: the source of every STUN binding request (what it answered as the XOR-MAPPED-ADDRESS)
// and every relay address it allocated.
type turnServer struct {
	addr string // 127.0.0.1:PORT
	srv  *turn.Server

	mu       sync.Mutex
	bindings map[string]bool // sources of binding requests
	relays   map[string]bool // allocated relay addresses
}

const turnUser, turnPass, turnRealm = "bc-user", "bc-pass", "backchannel.test"

// recordingConn notes the source of every STUN binding request it reads.
type recordingConn struct {
	net.PacketConn
	s *turnServer
}

func (r recordingConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, a, err := r.PacketConn.ReadFrom(b)
	// A STUN binding request: type 0x0001 and the magic cookie (RFC 8489 5).
	if err == nil && n >= 20 && b[0] == 0 && b[1] == 1 && bytes.Equal(b[4:8], []byte{0x21, 0x12, 0xa4, 0x42}) {
		r.s.mu.Lock()
		r.s.bindings[a.String()] = true
		r.s.mu.Unlock()
	}
	return n, a, err
}

// startTURN starts a STUN/TURN server on loopback; it stops when the test ends (after
// whatever the test starts later).
func startTURN(t *testing.T) *turnServer {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &turnServer{addr: pc.LocalAddr().String(), bindings: map[string]bool{}, relays: map[string]bool{}}
	key := turn.GenerateAuthKey(turnUser, turnRealm, turnPass)
	s.srv, err = turn.NewServer(turn.ServerConfig{
		Realm: turnRealm,
		AuthHandler: func(ra *turn.RequestAttributes) (string, []byte, bool) {
			return ra.Username, key, ra.Username == turnUser
		},
		EventHandler: turn.EventHandler{
			OnAllocationCreated: func(_, _ net.Addr, _, _, _ string, relay net.Addr, _ int) {
				s.mu.Lock()
				s.relays[relay.String()] = true
				s.mu.Unlock()
			},
		},
		PacketConnConfigs: []turn.PacketConnConfig{{
			PacketConn: recordingConn{PacketConn: pc, s: s},
			RelayAddressGenerator: &turn.RelayAddressGeneratorStatic{
				RelayAddress: net.IPv4(127, 0, 0, 1), Address: "127.0.0.1"},
		}},
	})
	if err != nil {
		_ = pc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

func (s *turnServer) served(kind map[string]bool, addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return kind[addr]
}

// TestICEServers: the configured ICE servers reach pion. With a STUN and a TURN server (one
// pion/turn server on loopback), the answer carries a server-reflexive candidate — the address
// the server saw a binding request come from — and a relay candidate on an address the server
// allocated; the call itself works.
func TestICEServers(t *testing.T) {
	t.Parallel()
	ts := startTURN(t)
	e := start(t, Options{IPFilter: loopbackIPv4, ICEServers: []webrtc.ICEServer{
		{URLs: []string{"stun:" + ts.addr}},
		{URLs: []string{"turn:" + ts.addr + "?transport=udp"}, Username: turnUser, Credential: turnPass},
	}}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	c := dial(t, e, "caller", id, jt)
	var srflx, relay []string
	for _, cand := range sdpCandidates(t, c.Answer) {
		addr := net.JoinHostPort(cand.Address(), strconv.Itoa(cand.Port()))
		switch cand.Type() {
		case ice.CandidateTypeServerReflexive:
			if !ts.served(ts.bindings, addr) {
				t.Errorf("server-reflexive candidate %s: the STUN server answered no binding request from %s", cand.Marshal(), addr)
			}
			srflx = append(srflx, addr)
		case ice.CandidateTypeRelay:
			if !ts.served(ts.relays, addr) {
				t.Errorf("relay candidate %s: the TURN server allocated no relay on %s", cand.Marshal(), addr)
			}
			relay = append(relay, addr)
		}
	}
	if len(srflx) == 0 || len(relay) == 0 {
		t.Fatalf("want server-reflexive and relay candidates from %s, got srflx %v, relay %v:\n%s", ts.addr, srflx, relay, c.Answer)
	}
	t.Logf("srflx %v, relay %v", srflx, relay)
	callWorks(t, c, jt)
}

// TestBadICEServers: ICE servers pion cannot use fail NewHandler at once, rather than every
// offer later.
func TestBadICEServers(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.Options{})
	for _, tc := range []struct {
		name   string
		server webrtc.ICEServer
		want   string
	}{
		{"TURN without credentials", webrtc.ICEServer{URLs: []string{"turn:127.0.0.1:3478"}}, "credentials"},
		{"not a STUN or TURN URL", webrtc.ICEServer{URLs: []string{"http://127.0.0.1:3478"}}, "scheme"},
	} {
		h, err := NewHandler(b.Node, Options{ICEServers: []webrtc.ICEServer{tc.server}})
		if err == nil {
			_ = h.Close()
			t.Errorf("%s: NewHandler accepted %v", tc.name, tc.server.URLs)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "webrtc: ICE servers: ") {
			t.Errorf("%s: error %q, want one about %s", tc.name, err, tc.want)
		}
	}
}
