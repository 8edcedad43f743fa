package webrtc

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"
	"github.com/pion/webrtc/v4/pkg/media"
	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/wiretest"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// timeout bounds every wait of the tests.
const timeout = 10 * time.Second

// env is a real broker (internal/brokertest) with the WebRTC handler mounted next to the
// broker's own routes on a listener of its own.
type env struct {
	b   *brokertest.Broker
	h   *Handler
	url string // http://127.0.0.1:PORT of the broker's routes plus the WebRTC ones
}

// start starts a broker and the WebRTC handler with opts; both stop when the test ends.
func start(t *testing.T, opts Options, cfg broker.Config) *env {
	t.Helper()
	return startOn(t, brokertest.Options{Config: cfg}, opts)
}

// startOn is start with the brokertest options (a Redis client and prefix shared with another
// env make two nodes of one store).
func startOn(t *testing.T, bopts brokertest.Options, opts Options) *env {
	t.Helper()
	b := brokertest.Start(t, bopts)
	h, err := NewHandler(b.Node, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: b.Node.Handler(nil, h.Register), ReadHeaderTimeout: timeout}
	go func() { _ = srv.Serve(ln) }()
	// Cleanups run last-in first-out: this one before the broker's own shutdown.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_ = h.Close()
		if err := h.Wait(ctx); err != nil {
			t.Errorf("webrtc handler: Wait: %v", err)
		}
		_ = srv.Shutdown(ctx)
	})
	e := &env{b: b, h: h, url: "http://" + ln.Addr().String()}
	b.Node.Advertise(e.url) // the server with the WebRTC routes: other nodes forward here
	return e
}

// checkHTTPError checks an error answer: its status and the body {code, message}.
func checkHTTPError(t *testing.T, what string, status int, body []byte, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("%s: status %d, want %d (body %q)", what, status, wantStatus, body)
	}
	var m map[string]string
	if err := json.Unmarshal(body, &m); err != nil || m["code"] != wantCode || m["message"] == "" || len(m) != 2 {
		t.Fatalf("%s: body %q, want {code: %q, message}", what, body, wantCode)
	}
}

// createSession is POST /v1/sessions with key.
func createSession(t *testing.T, e *env, key string) (id, joinToken string) {
	t.Helper()
	id, joinToken, _ = createSessionTokens(t, e, key)
	return id, joinToken
}

// createSessionTokens is createSession that also returns the caller token (SPEC 3.1).
func createSessionTokens(t *testing.T, e *env, key string) (id, joinToken, callerToken string) {
	t.Helper()
	status, _, body := wiretest.HTTPDo(t, http.MethodPost, e.url+"/v1/sessions", key, "", "")
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/sessions: %d %s", status, body)
	}
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	id, _ = m["session_id"].(string)
	joinToken, _ = m["join_token"].(string)
	callerToken, _ = m["caller_token"].(string)
	if id == "" || joinToken == "" || callerToken == "" {
		t.Fatalf("POST /v1/sessions: %s", body)
	}
	return id, joinToken, callerToken
}

// offerURL is the signaling URL of session id.
func (e *env) offerURL(id string) string { return e.url + "/v1/sessions/" + id + "/webrtc" }

// clientAPI is the test callers' pion API: the loopback recipe (no ICE servers, UDP4 only,
// loopback candidates, no mDNS: docs/webrtc.md) and the default codecs of a browser (Opus
// first), so that the broker has to choose PCMU. tweak, if not nil, changes the settings.
func clientAPI(t *testing.T, tweak func(*webrtc.SettingEngine)) *webrtc.API {
	t.Helper()
	var se webrtc.SettingEngine
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	se.SetIncludeLoopbackCandidate(true)
	se.SetIPFilter(loopbackIPv4)
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	if tweak != nil {
		tweak(&se)
	}
	me := &webrtc.MediaEngine{}
	if err := me.RegisterDefaultCodecs(); err != nil {
		t.Fatal(err)
	}
	return webrtc.NewAPI(webrtc.WithSettingEngine(se), webrtc.WithMediaEngine(me))
}

// caller is a test caller: a pion peer connection with a PCMU microphone track and the data
// channel "frames", recording every frame and every agent RTP packet it receives.
type caller struct {
	t        *testing.T
	name     string
	pc       *webrtc.PeerConnection
	dc       *webrtc.DataChannel
	mic      *webrtc.TrackLocalStaticSample
	opened   chan struct{}
	dcClosed chan struct{}
	pcClosed chan struct{}
	Resource string // the Location of the answer
	Answer   string
	extra    map[string]chan struct{} // closed when the data channel of that label closes

	packets     atomic.Int64                  // agent RTP packets of 160 bytes (20 ms of PCMU)
	otherSizes  atomic.Int64                  // agent RTP packets of any other size
	firstMarked atomic.Bool                   // the first agent RTP packet had the marker bit
	lastPacket  atomic.Int64                  // unix nanoseconds of the last agent packet
	gate        atomic.Pointer[chan struct{}] // while set, frames are not read until it closes

	mu       sync.Mutex
	queue    []wiretest.Frame
	last     wiretest.Frame
	notify   chan struct{}
	welcomed bool
	nextSeq  int64
	lastSeq  int64
	seqErrs  []string
}

// newCaller creates the caller's peer connection and its offer (gathered completely).
func newCaller(t *testing.T, name string) (*caller, string) {
	t.Helper()
	return newCallerWith(t, name, nil)
}

// newCallerWith is newCaller with tweaked settings.
func newCallerWith(t *testing.T, name string, tweak func(*webrtc.SettingEngine)) (*caller, string) {
	t.Helper()
	return newCallerOpts(t, name, callerOpts{tweak: tweak})
}

// callerOpts change how a test caller is made.
type callerOpts struct {
	tweak      func(*webrtc.SettingEngine) // settings, as for newCallerWith
	framesInit *webrtc.DataChannelInit     // the "frames" channel's options (nil: reliable, ordered)
	extra      []string                    // labels of more data channels, made before "frames"
}

// newCallerOpts is newCaller with o.
func newCallerOpts(t *testing.T, name string, o callerOpts) (*caller, string) {
	t.Helper()
	pc, err := clientAPI(t, o.tweak).NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	c := &caller{t: t, name: name, pc: pc, opened: make(chan struct{}), dcClosed: make(chan struct{}),
		pcClosed: make(chan struct{}), notify: make(chan struct{}), nextSeq: 1}
	var closeOnce sync.Once
	pc.OnConnectionStateChange(func(s webrtc.PeerConnectionState) {
		if s == webrtc.PeerConnectionStateClosed || s == webrtc.PeerConnectionStateFailed {
			closeOnce.Do(func() { close(c.pcClosed) })
		}
	})
	t.Cleanup(func() { _ = pc.GracefulClose() })
	c.mic, err = webrtc.NewTrackLocalStaticSample(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypePCMU, ClockRate: 8000, Channels: 1}, "mic", "caller")
	if err != nil {
		t.Fatal(err)
	}
	sender, err := pc.AddTrack(c.mic)
	if err != nil {
		t.Fatal(err)
	}
	go drainRTCP(sender)
	pc.OnTrack(func(tr *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		for {
			pkt, _, err := tr.ReadRTP()
			if err != nil {
				return
			}
			if c.packets.Load()+c.otherSizes.Load() == 0 {
				c.firstMarked.Store(pkt.Marker)
			}
			if len(pkt.Payload) == 160 {
				c.packets.Add(1)
			} else {
				c.otherSizes.Add(1)
			}
			c.lastPacket.Store(time.Now().UnixNano())
		}
	})
	c.extra = make(map[string]chan struct{})
	for _, label := range o.extra {
		dc, err := pc.CreateDataChannel(label, nil)
		if err != nil {
			t.Fatal(err)
		}
		closed := make(chan struct{})
		dc.OnClose(func() { close(closed) })
		c.extra[label] = closed
	}
	c.dc, err = pc.CreateDataChannel("frames", o.framesInit)
	if err != nil {
		t.Fatal(err)
	}
	c.dc.OnOpen(func() { close(c.opened) })
	c.dc.OnClose(func() { close(c.dcClosed) })
	c.dc.OnMessage(func(m webrtc.DataChannelMessage) {
		if g := c.gate.Load(); g != nil {
			<-*g
		}
		c.received(m.Data, m.IsString)
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gathered:
	case <-time.After(timeout):
		t.Fatal("caller: ICE gathering did not complete")
	}
	return c, pc.LocalDescription().SDP
}

// dial connects a caller to session id with token: offer, 201 answer, data channel open.
func dial(t *testing.T, e *env, name, id, token string) *caller {
	t.Helper()
	return dialWith(t, e, name, id, token, nil)
}

// dialWith is dial with tweaked settings.
func dialWith(t *testing.T, e *env, name, id, token string, tweak func(*webrtc.SettingEngine)) *caller {
	t.Helper()
	c, offer := newCallerWith(t, name, tweak)
	c.answer(e, id, token, offer)
	select {
	case <-c.opened:
	case <-time.After(timeout):
		t.Fatalf("%s: the data channel did not open", name)
	}
	return c
}

// answer posts c's offer for session id with token and applies the answer (201 expected).
func (c *caller) answer(e *env, id, token, offer string) {
	t, name := c.t, c.name
	t.Helper()
	status, hdr, body := wiretest.HTTPDo(t, http.MethodPost, e.offerURL(id), token, "application/sdp", offer)
	if status != http.StatusCreated {
		t.Fatalf("%s: POST offer: status %d: %s", name, status, body)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/sdp" {
		t.Fatalf("%s: answer Content-Type %q", name, ct)
	}
	c.Resource, c.Answer = hdr.Get("Location"), string(body)
	if err := c.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: c.Answer}); err != nil {
		t.Fatalf("%s: answer: %v\n%s", name, err, body)
	}
}

func (c *caller) received(data []byte, isString bool) {
	f := wiretest.ParseFrame(data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !isString {
		// A browser would get an ArrayBuffer: every frame is one text message.
		c.seqErrs = append(c.seqErrs, fmt.Sprintf("a binary data-channel message: %s", f))
	}
	switch {
	case f.Type == "welcome":
		c.welcomed = true
	case c.welcomed:
		if seq := f.Int("seq"); seq != c.nextSeq {
			c.seqErrs = append(c.seqErrs, fmt.Sprintf("seq %d, want %d: %s", seq, c.nextSeq, f))
		}
		c.nextSeq = f.Int("seq") + 1
		c.lastSeq = f.Int("seq")
	}
	c.queue = append(c.queue, f)
	c.last = f
	close(c.notify)
	c.notify = make(chan struct{})
}

// send sends v as JSON in one data-channel message.
func (c *caller) send(v any) {
	c.t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.dc.SendText(string(data)); err != nil {
		c.t.Fatalf("%s: send: %v", c.name, err)
	}
}

// hello sends a hello with members and returns the welcome (or the refusing error).
func (c *caller) hello(members map[string]any) wiretest.Frame {
	c.t.Helper()
	h, next := wiretest.HelloFrame(members)
	c.mu.Lock()
	c.nextSeq = next
	c.mu.Unlock()
	c.send(h)
	return c.expect(func(f wiretest.Frame) bool { return f.Type == "welcome" || f.Type == "error" })
}

// join sends a caller's hello with join token jt and fails the test unless it is welcomed.
func (c *caller) join(jt string) {
	c.t.Helper()
	if w := c.hello(map[string]any{"role": "caller", "join_token": jt}); w.Type != "welcome" {
		c.t.Fatalf("hello: %s", w)
	}
}

// expect takes the first queued frame m matches (a type or a wiretest.Match), waiting for it.
func (c *caller) expect(m any) wiretest.Frame {
	c.t.Helper()
	var match func(wiretest.Frame) bool
	switch m := m.(type) {
	case string:
		match = wiretest.Type(m)
	case wiretest.Match:
		match = m
	case func(wiretest.Frame) bool:
		match = m
	default:
		c.t.Fatalf("expect: %T", m)
	}
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		for i, f := range c.queue {
			if match(f) {
				c.queue = append(c.queue[:i:i], c.queue[i+1:]...)
				c.mu.Unlock()
				return f
			}
		}
		ch := c.notify
		c.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			c.mu.Lock()
			q := fmt.Sprint(c.queue)
			c.mu.Unlock()
			c.t.Fatalf("%s: no matching frame within %v; queued: %s", c.name, timeout, q)
		}
	}
}

// lastFrame is the newest frame received (for "session.ended is the last frame").
func (c *caller) lastFrame() wiretest.Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// checkSeq fails the test if the frames after the welcome were not consecutive, or if one
// came as a binary message.
func (c *caller) checkSeq() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.seqErrs {
		c.t.Errorf("%s: %s", c.name, e)
	}
}

// LastSeq is the seq of the newest frame received.
func (c *caller) LastSeq() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastSeq
}

// waitClosed waits until the broker closed the data channel.
func (c *caller) waitClosed() {
	c.t.Helper()
	select {
	case <-c.dcClosed:
	case <-time.After(timeout):
		c.t.Fatalf("%s: the data channel was not closed", c.name)
	}
}

// speak sends ms milliseconds of µ-law audio on the microphone track, in 20 ms samples paced
// in real time.
func (c *caller) speak(audio []byte) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for len(audio) > 0 {
		n := min(len(audio), 160)
		if err := c.mic.WriteSample(media.Sample{Data: audio[:n], Duration: 20 * time.Millisecond}); err != nil {
			c.t.Errorf("%s: mic: %v", c.name, err)
			return
		}
		audio = audio[n:]
		<-t.C
	}
}

// waitPackets waits until at least n agent packets of 160 bytes arrived.
func (c *caller) waitPackets(n int64) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for c.packets.Load() < n {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %d agent RTP packets of 160 bytes, want at least %d", c.name, c.packets.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// joined starts a broker with opts and cfg, creates a session of tenant A and dials a caller
// to it that said hello with the join token and was welcomed.
func joined(t *testing.T, opts Options, cfg broker.Config) (e *env, id, jt string, c *caller) {
	t.Helper()
	e = start(t, opts, cfg)
	id, jt = createSession(t, e, brokertest.KeyA)
	c = dial(t, e, "caller", id, jt)
	c.join(jt)
	return e, id, jt, c
}

// waitPeers waits until the handler holds n peer connections: a peer connection leaves it
// only once its goroutines (reader, writer, audio) have returned and pion's is closed.
func waitPeers(t *testing.T, e *env, n int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		e.h.mu.Lock()
		have := len(e.h.peers)
		e.h.mu.Unlock()
		if have == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the handler holds %d peer connections, want %d", have, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wsHost attaches a WebSocket host to session id (the broker's own /v1/ws).
func wsHost(t *testing.T, e *env, id, token string) *wiretest.Conn {
	t.Helper()
	h := wiretest.Dial(t, e.b.WSURL, "ws-host")
	if w := h.Hello(map[string]any{"role": "host", "session_id": id, "join_token": token}); w.Type != "welcome" {
		t.Fatalf("ws host hello: %s", w)
	}
	return h
}

// timeline returns the kinds of session id's timeline entries.
func timeline(t *testing.T, e *env, id string) []string {
	t.Helper()
	status, _, body := wiretest.HTTPDo(t, http.MethodGet, e.url+"/v1/sessions/"+id+"/timeline", brokertest.KeyA, "", "")
	if status != http.StatusOK {
		t.Fatalf("timeline: %d %s", status, body)
	}
	var tl struct {
		Entries []struct {
			Kind string `json:"kind"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(body, &tl); err != nil {
		t.Fatal(err)
	}
	kinds := make([]string, len(tl.Entries))
	for i, en := range tl.Entries {
		kinds[i] = en.Kind
	}
	return kinds
}

// waitTimeline waits until session id's timeline has an entry of kind.
func waitTimeline(t *testing.T, e *env, id, kind string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		kinds := timeline(t, e, id)
		for _, k := range kinds {
			if k == kind {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timeline has no %s entry: %v", kind, kinds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
