package webrtc

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/wiretest"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	"github.com/backchannel-io/backchannel/internal/g711"
)

// TestOfferAnswer covers signaling: a 201 with a complete (non-trickle) PCMU answer and a
// Location, then hello/welcome over the data channel; an API key of the tenant works too.
func TestOfferAnswer(t *testing.T) {
	t.Parallel()
	e := start(t, Options{}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	c := dial(t, e, "caller", id, jt)
	if !regexp.MustCompile(`^/v1/sessions/` + id + `/webrtc/[A-Za-z0-9_-]{22}$`).MatchString(c.Resource) {
		t.Errorf("Location %q", c.Resource)
	}
	for _, want := range []string{"m=audio", "PCMU/8000", "m=application", "a=candidate:", "127.0.0.1", "a=end-of-candidates"} {
		if !strings.Contains(c.Answer, want) {
			t.Errorf("answer has no %q:\n%s", want, c.Answer)
		}
	}
	if strings.Contains(strings.ToLower(c.Answer), "opus") {
		t.Errorf("answer offers Opus:\n%s", c.Answer)
	}
	w := c.hello(map[string]any{"role": "caller", "join_token": jt})
	if w.Type != "welcome" || w.Str("session_id") != id || len(w.Str("resume_token")) < 22 || w.Str("connection_id") == "" {
		t.Fatalf("hello: %s", w)
	}

	// An API key of the session's tenant may sign the offer too (here: a host's data channel).
	h := dial(t, e, "host", id, brokertest.KeyA)
	if w := h.hello(map[string]any{"role": "host", "session_id": id, "api_key": brokertest.KeyA}); w.Type != "welcome" {
		t.Fatalf("host hello: %s", w)
	}
	c.checkSeq()
}

// TestOfferRefused covers the refusals of signaling: 401, 404 (another tenant's or an unknown
// session), 415, 400, 405, and a hello naming another session.
func TestOfferRefused(t *testing.T) {
	t.Parallel()
	e := start(t, Options{}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	_, offer := newCaller(t, "offer")
	post := func(what, url, token, ct, body string, wantStatus int, wantCode string) {
		t.Helper()
		status, _, resp := wiretest.HTTPDo(t, http.MethodPost, url, token, ct, body)
		checkHTTPError(t, what, status, resp, wantStatus, wantCode)
	}
	post("no token", e.offerURL(id), "", "application/sdp", offer, 401, "unauthorized")
	post("wrong token", e.offerURL(id), "jt_wrong", "application/sdp", offer, 401, "unauthorized")
	post("other tenant's key", e.offerURL(id), brokertest.KeyB, "application/sdp", offer, 404, "not_found")
	post("unknown session", e.offerURL("sess_doesnotexist"), brokertest.KeyA, "application/sdp", offer, 404, "not_found")
	post("JSON body", e.offerURL(id), jt, "application/json", `{"sdp":"x"}`, 415, "bad_frame")
	post("garbage SDP", e.offerURL(id), jt, "application/sdp", "v=0 this is not SDP", 400, "bad_frame")
	post("offer over 256 KiB", e.offerURL(id), jt, "application/sdp", offer+strings.Repeat("a=x\r\n", 256<<10/5), 413, "limit_exceeded")
	status, hdr, body := wiretest.HTTPDo(t, http.MethodGet, e.offerURL(id), jt, "", "")
	checkHTTPError(t, "GET", status, body, 405, "bad_frame")
	if hdr.Get("Allow") != "POST" {
		t.Errorf("Allow %q", hdr.Get("Allow"))
	}
	// A peer connection's resource knows DELETE only (no trickle ICE, no ICE restart).
	status, hdr, body = wiretest.HTTPDo(t, http.MethodPatch, e.offerURL(id)+"/some-resource", jt, "application/trickle-ice-sdpfrag", "a=end-of-candidates")
	checkHTTPError(t, "PATCH", status, body, 405, "bad_frame")
	if hdr.Get("Allow") != "DELETE" {
		t.Errorf("PATCH: Allow %q", hdr.Get("Allow"))
	}

	// An offer without a data channel cannot carry frames.
	audioOnly := regexp.MustCompile(`(?s)m=application.*`).ReplaceAllString(offer, "")
	audioOnly = strings.Replace(audioOnly, "a=group:BUNDLE 0 1", "a=group:BUNDLE 0", 1)
	post("offer without a data channel", e.offerURL(id), jt, "application/sdp", audioOnly, 400, "bad_frame")

	// The peer connection belongs to the session of its URL.
	other, _ := createSession(t, e, brokertest.KeyA)
	c := dial(t, e, "caller", id, jt)
	f := c.hello(map[string]any{"id": "h1", "role": "caller", "session_id": other, "join_token": jt})
	if f.Type != "error" || f.Str("code") != "forbidden" || f.Str("ref") != "h1" {
		t.Fatalf("hello for another session: %s", f)
	}
	c.waitClosed()
}

// TestCallerTurn: a caller.text turn over the data channel gets the transcripts there and the
// agent's speech as PCMU RTP on the audio track.
func TestCallerTurn(t *testing.T) {
	t.Parallel()
	_, _, _, c := joined(t, Options{}, broker.Config{})
	c.send(map[string]any{"type": "caller.text", "text": "say hello there"})
	echo := c.expect(wiretest.TypeWith("transcript", "role", "caller"))
	if echo.Str("text") != "say hello there" || !echo.Bool("final") {
		t.Errorf("caller transcript: %s", echo)
	}
	agent := c.expect(wiretest.TypeWith("transcript", "role", "agent"))
	if agent.Str("text") != "hello there" {
		t.Errorf("agent transcript: %s", agent)
	}
	// The scripted model speaks at least 300 ms: 15 packets of 20 ms.
	c.waitPackets(10)
	time.Sleep(500 * time.Millisecond)
	if n := c.packets.Load(); n < 15 {
		t.Errorf("%d packets of agent audio, want 15", n)
	}
	if n := c.otherSizes.Load(); n != 0 {
		t.Errorf("%d agent packets are not 160 bytes (20 ms)", n)
	}
	if !c.firstMarked.Load() {
		t.Errorf("the first packet of the talk spurt has no marker bit")
	}
	c.checkSeq()
}

// TestBargeIn: the caller's RTP audio reaches the broker's VAD: a loud tone during a long
// reply stops the reply.
func TestBargeIn(t *testing.T) {
	t.Parallel()
	_, _, _, c := joined(t, Options{}, broker.Config{})
	words := make([]string, 150) // 9 s of speech: 450 packets
	for i := range words {
		words[i] = fmt.Sprintf("word%d", i)
	}
	c.send(map[string]any{"type": "caller.text", "text": "say " + strings.Join(words, " ")})
	c.expect(wiretest.TypeWith("transcript", "role", "agent"))
	c.waitPackets(10)
	c.speak(g711.Tone(300, 400, 0.5))
	c.speak(g711.Silence(100))
	// The reply stops: no agent audio for a while, far fewer packets than its length.
	deadline := time.Now().Add(timeout)
	for time.Since(time.Unix(0, c.lastPacket.Load())) < 500*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("agent audio goes on after the barge-in: %d packets", c.packets.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := c.packets.Load(); n >= 200 {
		t.Fatalf("%d packets of a 450-packet reply reached the caller despite the barge-in", n)
	}
}

// TestCallerHost: a data-channel caller that declares tools in its hello is also a host: it
// gets the tool_call on the data channel and its result is spoken.
func TestCallerHost(t *testing.T) {
	t.Parallel()
	e := start(t, Options{}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	c := dial(t, e, "caller", id, jt)
	tools := []map[string]any{{"name": "lookup", "description": "Looks a thing up.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}}}
	if w := c.hello(map[string]any{"id": "h1", "role": "caller", "join_token": jt, "tools": tools}); w.Type != "welcome" {
		t.Fatalf("hello: %s", w)
	}
	if d := c.expect("tools.declared"); d.Str("ref") != "h1" || d.Compact("names") != `["lookup"]` {
		t.Fatalf("tools.declared: %s", d)
	}
	c.send(map[string]any{"type": "caller.text", "text": `call lookup {"q":"weather"}`})
	call := c.expect("tool_call")
	if call.Str("name") != "lookup" || call.Compact("arguments") != `{"q":"weather"}` || call.Str("session_id") != id {
		t.Fatalf("tool_call: %s", call)
	}
	c.send(map[string]any{"type": "tool_result", "call_id": call.Str("call_id"), "output": "sunny"})
	said := c.expect(wiretest.TypeWith("transcript", "role", "agent"))
	if said.Str("text") != "lookup returned: sunny" {
		t.Fatalf("agent transcript: %s", said)
	}
	c.waitPackets(10)
	c.checkSeq()
}

// TestDropAndResume: closing the peer connection is a drop, not the end of the session;
// frames made meanwhile are replayed to a new peer connection that resumes.
func TestDropAndResume(t *testing.T) {
	t.Parallel()
	e := start(t, Options{}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	c := dial(t, e, "caller-1", id, jt)
	tools := []map[string]any{{"name": "slow", "description": "Never answers.", "timeout": "1s",
		"parameters": map[string]any{"type": "object"}}}
	w := c.hello(map[string]any{"role": "caller", "join_token": jt, "tools": tools})
	if w.Type != "welcome" {
		t.Fatalf("hello: %s", w)
	}
	c.expect("tools.declared")
	c.send(map[string]any{"type": "caller.text", "text": "call slow {}"})
	call := c.expect("tool_call")
	lastSeq := c.LastSeq()
	c.checkSeq()

	// Drop: the caller's peer connection closes; the tool times out meanwhile.
	if err := c.pc.GracefulClose(); err != nil {
		t.Fatal(err)
	}
	waitTimeline(t, e, id, "disconnect")
	waitTimeline(t, e, id, "tool_deadline_timeout")
	waitPeers(t, e, 0) // the broker let go of the dropped peer connection

	r := dial(t, e, "caller-2", id, jt)
	w2 := r.hello(map[string]any{"role": "caller", "resume_token": w.Str("resume_token"), "last_seq": lastSeq})
	if w2.Type != "welcome" || w2.Str("resume_token") == w.Str("resume_token") {
		t.Fatalf("resume: %s", w2)
	}
	cancel := r.expect("tool_cancel")
	if cancel.Str("call_id") != call.Str("call_id") || cancel.Str("reason") != "timeout" || cancel.Int("seq") <= lastSeq {
		t.Fatalf("replayed tool_cancel: %s (last_seq %d)", cancel, lastSeq)
	}
	if res := r.expect("tool_deferred_resume"); len(res.Arr("jobs")) != 0 {
		t.Fatalf("tool_deferred_resume: %s", res)
	}
	// The resumed caller is the caller: its turns work.
	r.send(map[string]any{"type": "caller.text", "text": "say back again"})
	if f := r.expect(wiretest.TypeWith("transcript", "role", "agent", "text", "back again")); !f.Bool("final") {
		t.Fatalf("transcript: %s", f)
	}
	r.waitPackets(10)
	r.checkSeq()
}

// TestDataChannels: frames travel on the data channel labelled "frames" only (SPEC 1): a
// channel of another label is closed while "frames" serves, and a "frames" channel that is not
// reliable and ordered ends the peer connection.
func TestDataChannels(t *testing.T) {
	t.Parallel()
	// No hello timeout within the test: what closes the second peer connection is its channel.
	e := start(t, Options{HelloTimeout: time.Minute}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)

	c, offer := newCallerOpts(t, "caller", callerOpts{extra: []string{"chat"}})
	c.answer(e, id, jt, offer)
	select {
	case <-c.extra["chat"]:
	case <-time.After(timeout):
		t.Fatal(`the broker did not close the data channel "chat"`)
	}
	select {
	case <-c.opened:
	case <-time.After(timeout):
		t.Fatal(`the data channel "frames" did not open`)
	}
	c.join(jt)
	c.send(map[string]any{"type": "caller.text", "text": "say still here"})
	c.expect(wiretest.TypeWith("transcript", "role", "agent", "text", "still here"))
	c.checkSeq()

	unordered := false
	u, offer := newCallerOpts(t, "unordered", callerOpts{framesInit: &webrtc.DataChannelInit{Ordered: &unordered}})
	u.answer(e, id, jt, offer)
	select {
	case <-u.pcClosed:
	case <-time.After(timeout):
		t.Fatal(`a peer connection whose "frames" channel is unordered was not closed`)
	}
	waitPeers(t, e, 1) // the caller's stays
}

// TestResumeTakesOver: a new peer connection that resumes the slot while the old one is still
// open takes it over (SPEC 10): the old one is closed — without session.ended, the session
// lives on — and the new one is the caller.
func TestResumeTakesOver(t *testing.T) {
	t.Parallel()
	e := start(t, Options{}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	old := dial(t, e, "old", id, jt)
	w := old.hello(map[string]any{"role": "caller", "join_token": jt})
	if w.Type != "welcome" {
		t.Fatalf("hello: %s", w)
	}
	old.send(map[string]any{"type": "caller.text", "text": "say one"})
	old.expect(wiretest.TypeWith("transcript", "role", "agent", "text", "one"))
	lastSeq := old.LastSeq()

	r := dial(t, e, "new", id, jt)
	w2 := r.hello(map[string]any{"role": "caller", "resume_token": w.Str("resume_token"), "last_seq": lastSeq})
	if w2.Type != "welcome" || w2.Str("session_id") != id {
		t.Fatalf("resume: %s", w2)
	}
	old.waitClosed()
	select {
	case <-old.pcClosed:
	case <-time.After(timeout):
		t.Fatal("the broker did not close the resumed slot's old peer connection")
	}
	if f := old.lastFrame(); f.Type == "session.ended" {
		t.Errorf("the old peer connection got %s: a take-over does not end the session", f)
	}
	waitPeers(t, e, 1)
	r.send(map[string]any{"type": "caller.text", "text": "say two"})
	r.expect(wiretest.TypeWith("transcript", "role", "agent", "text", "two"))
	old.checkSeq()
	r.checkSeq()
	for _, k := range timeline(t, e, id) {
		if k == "session_end" {
			t.Fatal("a resume ended the session")
		}
	}
}

// TestHangUp: DELETE on the peer connection's resource ends the session (reason hung_up once
// the broker has the hook, see hooks.go): every connection gets session.ended.
func TestHangUp(t *testing.T) {
	t.Parallel()
	e, id, jt, c := joined(t, Options{}, broker.Config{})
	host := wsHost(t, e, id, jt)

	status, _, body := wiretest.HTTPDo(t, http.MethodDelete, e.url+c.Resource, "", "", "")
	checkHTTPError(t, "DELETE without a token", status, body, 401, "unauthorized")
	status, _, body = wiretest.HTTPDo(t, http.MethodDelete, e.url+c.Resource, brokertest.KeyB, "", "")
	checkHTTPError(t, "DELETE with another tenant's key", status, body, 404, "not_found")
	if status, _, body := wiretest.HTTPDo(t, http.MethodDelete, e.url+c.Resource, jt, "", ""); status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	if e.h.hangUpper == nil {
		t.Fatal("the broker node does not provide HangUp")
	}
	const want = "hung_up"
	if f := host.Expect("session.ended"); f.Str("reason") != want {
		t.Fatalf("host: %s, want reason %s", f, want)
	}
	if f := c.expect("session.ended"); f.Str("reason") != want {
		t.Fatalf("caller: %s, want reason %s", f, want)
	}
	c.waitClosed()
	if f := c.lastFrame(); f.Type != "session.ended" {
		t.Errorf("the last frame before the close is %s, want session.ended (SPEC 3.6)", f)
	}
	c.checkSeq()
	// The session's end closed the broker's side of the peer connection: nothing of it is left
	// running until the handler's own Close.
	waitPeers(t, e, 0)
	{
		_, offer := newCaller(t, "late")
		status, _, body := wiretest.HTTPDo(t, http.MethodPost, e.offerURL(id), jt, "application/sdp", offer)
		checkHTTPError(t, "offer after the hang-up", status, body, 410, "session_ended")
		if status, _, body := wiretest.HTTPDo(t, http.MethodDelete, e.url+c.Resource, jt, "", ""); status != http.StatusOK {
			t.Fatalf("second DELETE: %d %s", status, body)
		}
	}
}

// TestHelloTimeout: a peer connection that sends no hello is closed.
func TestHelloTimeout(t *testing.T) {
	t.Parallel()
	e := start(t, Options{HelloTimeout: 300 * time.Millisecond}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	c := dial(t, e, "caller", id, jt)
	c.waitClosed()
	select {
	case <-c.pcClosed:
	case <-time.After(timeout):
		t.Fatal("the peer connection was not closed")
	}
}

// TestOversizedFrame: a data-channel message over the frame limit is answered with
// limit_exceeded, carrying the frame's id as ref (SPEC 2), and the connection goes on.
func TestOversizedFrame(t *testing.T) {
	t.Parallel()
	_, _, _, c := joined(t, Options{}, broker.Config{Limits: broker.Limits{MaxFrameBytes: 32 << 10}})
	if !strings.Contains(c.Answer, "a=max-message-size:131072") {
		t.Errorf("the answer does not announce four times the frame limit as max-message-size:\n%s", c.Answer)
	}
	c.send(map[string]any{"type": "caller.text", "id": "too-big", "text": strings.Repeat("x", 40<<10)})
	c.expect(wiretest.TypeWith("error", "code", "limit_exceeded", "ref", "too-big"))
	c.send(map[string]any{"type": "caller.text", "text": "say still here"})
	c.expect(wiretest.TypeWith("transcript", "role", "agent", "text", "still here"))
	c.checkSeq()
}

// TestSingleUDPPort: with UDPMuxPort every peer connection shares one UDP port.
func TestSingleUDPPort(t *testing.T) {
	t.Parallel()
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := uc.LocalAddr().(*net.UDPAddr).Port
	_ = uc.Close()
	e := start(t, Options{UDPMuxPort: port, IPFilter: loopbackIPv4}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	c := dial(t, e, "caller", id, jt)
	h := dial(t, e, "host", id, jt)
	for _, p := range []*caller{c, h} {
		if !strings.Contains(p.Answer, fmt.Sprintf(" 127.0.0.1 %d typ host", port)) {
			t.Fatalf("%s: answer has no candidate on 127.0.0.1:%d:\n%s", p.name, port, p.Answer)
		}
	}
	if w := c.hello(map[string]any{"role": "caller"}); w.Type != "error" || w.Str("code") != "unauthorized" {
		t.Fatalf("hello without credentials: %s", w) // session_id comes from the URL; a token is still needed
	}
	if w := h.hello(map[string]any{"role": "host", "join_token": jt}); w.Type != "welcome" || w.Str("session_id") != id {
		t.Fatalf("host hello: %s", w)
	}
	c.waitClosed()
}

// TestShutdown: Close refuses new offers and closes the peer connections; Wait returns.
func TestShutdown(t *testing.T) {
	t.Parallel()
	e, id, jt, c := joined(t, Options{}, broker.Config{})
	_ = e.h.Close()
	c.waitClosed()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := e.h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	_, offer := newCaller(t, "late")
	status, _, body := wiretest.HTTPDo(t, http.MethodPost, e.offerURL(id), jt, "application/sdp", offer)
	checkHTTPError(t, "offer after Close", status, body, 503, "internal")
	// The session lives on: a drop, not an end (SPEC 10).
	waitTimeline(t, e, id, "disconnect")
	for _, k := range timeline(t, e, id) {
		if k == "session_end" {
			t.Fatal("closing the transport ended the session")
		}
	}
}

// TestSlowConsumer: a caller that stops reading its data channel is closed once the frames
// waiting for it outgrow the send queue — a drop, not the end of its session — while one that
// reads keeps up with the same traffic.
func TestSlowConsumer(t *testing.T) {
	t.Parallel()
	e := start(t, Options{BufferedHigh: 64 << 10}, broker.Config{Limits: broker.Limits{SendQueueBytes: 256 << 10}})
	id, jt := createSession(t, e, brokertest.KeyA)
	c := dialWith(t, e, "caller", id, jt, func(se *webrtc.SettingEngine) { se.SetSCTPMaxReceiveBufferSize(128 << 10) })
	c.join(jt)
	// Each turn makes two transcripts of 4 KB: the caller's echo and the agent's "I heard".
	turns := func(n int, every time.Duration) error {
		for i := range n {
			data, _ := json.Marshal(map[string]any{"type": "caller.text", "text": fmt.Sprintf("%d %s", i, strings.Repeat("y", 4<<10))})
			if err := c.dc.SendText(string(data)); err != nil {
				return err
			}
			time.Sleep(every)
		}
		return nil
	}
	if err := turns(60, 10*time.Millisecond); err != nil { // about 800 KB/s
		t.Fatal(err)
	}
	for range 60 {
		c.expect(wiretest.TypeWith("transcript", "role", "caller"))
	}
	select {
	case <-c.pcClosed:
		t.Fatal("a caller that keeps up was closed")
	default:
	}

	gate := make(chan struct{})
	c.gate.Store(&gate)
	defer close(gate)
	_ = turns(120, 5*time.Millisecond) // until the broker closes the data channel
	select {
	case <-c.pcClosed:
	case <-time.After(timeout):
		t.Fatalf("the slow consumer was not closed (%d bytes waiting in its data channel)", c.dc.BufferedAmount())
	}
	waitTimeline(t, e, id, "disconnect")
	for _, k := range timeline(t, e, id) {
		if k == "session_end" {
			t.Fatal("closing a slow consumer ended the session")
		}
	}
}

// cuttable is a UDP socket that can go silent both ways at once, like a lost network.
type cuttable struct {
	net.PacketConn
	cut atomic.Bool
}

func (c *cuttable) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, a, err := c.PacketConn.ReadFrom(b)
		if err != nil || !c.cut.Load() {
			return n, a, err
		}
	}
}

func (c *cuttable) WriteTo(b []byte, a net.Addr) (int, error) {
	if c.cut.Load() {
		return len(b), nil
	}
	return c.PacketConn.WriteTo(b, a)
}

// TestICEFailure: a caller whose network vanishes (no close of any kind) is dropped when ICE
// fails; the session lives on.
func TestICEFailure(t *testing.T) {
	t.Parallel()
	e := start(t, Options{ICEDisconnectedTimeout: 500 * time.Millisecond, ICEFailedTimeout: time.Second,
		ICEKeepaliveInterval: 100 * time.Millisecond}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	conn := &cuttable{PacketConn: uc}
	mux := ice.NewUDPMuxDefault(ice.UDPMuxParams{UDPConn: conn})
	t.Cleanup(func() { _ = mux.Close() }) // after the caller's peer connection (cleanups run in reverse)
	c := dialWith(t, e, "caller", id, jt, func(se *webrtc.SettingEngine) { se.SetICEUDPMux(mux) })
	c.join(jt)
	conn.cut.Store(true)
	waitTimeline(t, e, id, "disconnect")
	for _, k := range timeline(t, e, id) {
		if k == "session_end" {
			t.Fatal("an ICE failure ended the session")
		}
	}
}

// fakeHooks stands in for the broker hooks of hooks.go: it accepts one join token, and hangs
// up by ending the session through a WebSocket host (reason ended).
type fakeHooks struct {
	jt   string
	host *wiretest.Conn
	live atomic.Bool
	mu   sync.Mutex
	hung []string // tenant/id of every HangUp
}

func (f *fakeHooks) AuthorizeSignaling(id, token string) (string, bool, *frames.Error) {
	if token != f.jt {
		return "", false, frames.Errorf(frames.CodeUnauthorized, "wrong token")
	}
	return brokertest.TenantA, f.live.Load(), nil
}

func (f *fakeHooks) HangUp(tenant, id string) bool {
	f.mu.Lock()
	f.hung = append(f.hung, tenant+"/"+id)
	f.mu.Unlock()
	f.live.Store(false)
	return f.host.SendErr(map[string]any{"type": "session.end"}) == nil
}

// TestHangUpHooks covers the wiring of the broker hooks: authorization and liveness come from
// AuthorizeSignaling, DELETE calls HangUp with the session's tenant, and an ended session
// refuses offers with 410 and answers DELETE with 200 again.
func TestHangUpHooks(t *testing.T) {
	t.Parallel()
	e := start(t, Options{}, broker.Config{})
	id, jt := createSession(t, e, brokertest.KeyA)
	f := &fakeHooks{jt: jt, host: wsHost(t, e, id, jt)}
	f.live.Store(true)
	e.h.authorizer, e.h.hangUpper = f, f
	c := dial(t, e, "caller", id, jt)
	c.join(jt)
	status, _, body := wiretest.HTTPDo(t, http.MethodDelete, e.url+c.Resource, brokertest.KeyA, "", "")
	checkHTTPError(t, "DELETE with a token the hook refuses", status, body, 401, "unauthorized")
	if status, _, body := wiretest.HTTPDo(t, http.MethodDelete, e.url+c.Resource, jt, "", ""); status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	if f := c.expect("session.ended"); f.Str("reason") != "ended" {
		t.Fatalf("caller: %s", f)
	}
	c.waitClosed()
	f.mu.Lock()
	hung := fmt.Sprint(f.hung)
	f.mu.Unlock()
	if hung != "["+brokertest.TenantA+"/"+id+"]" {
		t.Fatalf("HangUp calls: %s", hung)
	}
	_, offer := newCaller(t, "late")
	status, _, body = wiretest.HTTPDo(t, http.MethodPost, e.offerURL(id), jt, "application/sdp", offer)
	checkHTTPError(t, "offer to an ended session", status, body, 410, "session_ended")
	if status, _, body := wiretest.HTTPDo(t, http.MethodDelete, e.url+c.Resource, jt, "", ""); status != http.StatusOK {
		t.Fatalf("second DELETE: %d %s", status, body)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.hung) != 1 {
		t.Fatalf("HangUp of an ended session: %v", f.hung)
	}
}

// TestCallerToken: the caller token of POST /v1/sessions signals a peer connection and attaches
// it as the caller (SPEC 3.1); it reaches no other HTTP resource (the timeline answers 401)
// and attaches no host; a DELETE of a resource the session never had answers 404 and ends
// nothing (SPEC 18); the caller's own resource hangs up with the caller token.
func TestCallerToken(t *testing.T) {
	t.Parallel()
	e := start(t, Options{}, broker.Config{})
	id, jt, ct := createSessionTokens(t, e, brokertest.KeyA)
	host := wsHost(t, e, id, jt)
	c := dial(t, e, "caller", id, ct)
	if w := c.hello(map[string]any{"role": "caller", "caller_token": ct}); w.Type != "welcome" {
		t.Fatalf("hello with the caller token: %s", w)
	}
	status, _, body := wiretest.HTTPDo(t, http.MethodGet, e.url+"/v1/sessions/"+id+"/timeline", ct, "", "")
	checkHTTPError(t, "the timeline with the caller token", status, body, 401, "unauthorized")

	h := dial(t, e, "host-with-the-caller-token", id, ct)
	if w := h.hello(map[string]any{"role": "host", "caller_token": ct}); w.Type != "error" || w.Str("code") != "forbidden" {
		t.Errorf("a host hello with the caller token: %s, want forbidden", w)
	}

	status, _, body = wiretest.HTTPDo(t, http.MethodDelete, e.offerURL(id)+"/made-up", ct, "", "")
	checkHTTPError(t, "DELETE of a resource the session never had", status, body, 404, "not_found")
	host.Absent(300*time.Millisecond, wiretest.Type("session.ended"))

	if status, _, body := wiretest.HTTPDo(t, http.MethodDelete, e.url+c.Resource, ct, "", ""); status != http.StatusOK {
		t.Fatalf("DELETE of the caller's resource with the caller token: %d %s", status, body)
	}
	if f := host.Expect("session.ended"); f.Str("reason") != "hung_up" {
		t.Errorf("host: %s, want session.ended hung_up", f)
	}
}
