package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/g711"
)

// The callers of `bench voice`: pion peer connections in the bench process, as a browser's
// would be — PCMU both ways, the data channel "frames" with the hello, and a microphone that
// sends 20 ms packets in real time, speech-like bursts with pauses.

// callerAPI is the pion API every caller of a step shares: PCMU only, no interceptors (a
// caller needs no RTCP reports for the broker to work), loopback IPv4 candidates, and one
// UDP socket for all of them (an ICE UDP mux) instead of one per peer connection.
type callerAPI struct {
	api  *webrtc.API
	mux  ice.UDPMux
	conn *net.UDPConn
}

func newCallerAPI(ip net.IP, shared bool) (*callerAPI, error) {
	var se webrtc.SettingEngine
	var mux ice.UDPMux
	var conn *net.UDPConn
	if shared {
		var err error
		if conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: ip}); err != nil {
			return nil, err
		}
		// A burst of agent audio to hundreds of callers lands on this one socket.
		_ = conn.SetReadBuffer(16 << 20)
		_ = conn.SetWriteBuffer(16 << 20)
		mux = webrtc.NewICEUDPMux(nil, conn)
		se.SetICEUDPMux(mux)
	}
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	se.SetIncludeLoopbackCandidate(true)
	se.SetIPFilter(func(a net.IP) bool { return a.Equal(ip) })
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	me := &webrtc.MediaEngine{}
	if err := me.RegisterCodec(webrtc.RTPCodecParameters{RTPCodecCapability: benchPCMU, PayloadType: 0}, webrtc.RTPCodecTypeAudio); err != nil {
		return nil, err
	}
	// An empty interceptor registry: without one pion registers its defaults (NACK, RTCP
	// reports, stats, TWCC), which cost the load generator a third of its CPU per packet.
	api := webrtc.NewAPI(webrtc.WithSettingEngine(se), webrtc.WithMediaEngine(me), webrtc.WithInterceptorRegistry(&interceptor.Registry{}))
	return &callerAPI{api: api, mux: mux, conn: conn}, nil
}

func (a *callerAPI) close() {
	if a.mux != nil {
		_ = a.mux.Close()
	}
}

var benchPCMU = webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypePCMU, ClockRate: 8000, Channels: 1}

// speechFrames are a second of speech-like µ-law in 20 ms frames: a voiced tone whose pitch
// and loudness move like syllables (4 Hz), every frame well above the broker's VAD threshold.
var speechFrames = func() [][]byte {
	out := make([][]byte, 50)
	phase := 0.0
	for f := range out {
		b := make([]byte, g711.SamplesPer20ms)
		for i := range b {
			t := float64(f*g711.SamplesPer20ms+i) / 8000
			amp := 0.3 + 0.15*math.Sin(2*math.Pi*4*t)
			freq := 160 + 40*math.Sin(2*math.Pi*1.5*t)
			phase += 2 * math.Pi * freq / 8000
			b[i] = g711.Encode(int16(amp * 32767 * math.Sin(phase)))
		}
		out[f] = b
	}
	return out
}()

var silenceFrame = g711.Silence(20)

// benchCaller is one caller: its session (with a host of its own, benchHost), its peer
// connection and what it measured.
type benchCaller struct {
	id          int
	session     string
	joinToken   string
	callerToken string
	pc          *webrtc.PeerConnection
	dc          *webrtc.DataChannel
	mic         *webrtc.TrackLocalStaticRTP
	host        *benchHost

	opened   chan struct{}
	welcomed chan struct{}
	once     sync.Once
	openOnce sync.Once

	// The microphone (talk's goroutine only, read after it returned).
	sent     int64   // packets written in the measured window
	late     []int64 // send lateness histogram: 1 ms buckets (the last: ≥ 50 ms)
	turns    int     // caller.text turns sent (tool calls)
	bargeIns int     // times it started talking over the agent on purpose

	// The agent's audio (the track's reader).
	received   atomic.Int64
	lost       atomic.Int64 // gaps in RTP sequence numbers
	lastAgent  atomic.Int64 // unix ns of the latest agent packet
	spurts     atomic.Int64 // agent talk spurts (packets after a pause of 200 ms or more)
	transcript atomic.Int64 // agent transcripts (final) on the data channel
	errFrames  atomic.Int64
}

// newBenchCaller creates the caller's session (POST /v1/sessions with the API key).
func newBenchCaller(ctx context.Context, addr string, id int) (*benchCaller, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/sessions", strings.NewReader(`{}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+benchKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("POST /v1/sessions: %s %s", resp.Status, body)
	}
	var s struct {
		SessionID   string `json:"session_id"`
		JoinToken   string `json:"join_token"`
		CallerToken string `json:"caller_token"`
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, err
	}
	return &benchCaller{id: id, session: s.SessionID, joinToken: s.JoinToken, callerToken: s.CallerToken,
		opened: make(chan struct{}), welcomed: make(chan struct{}), late: make([]int64, 51)}, nil
}

// connect makes the peer connection (microphone track, data channel "frames"), sends the offer
// to the session's signaling route with the caller token, and says hello on the data channel.
func (c *benchCaller) connect(ctx context.Context, api *callerAPI, addr string) error {
	pc, err := api.api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return err
	}
	c.pc = pc
	c.mic, err = webrtc.NewTrackLocalStaticRTP(benchPCMU, "mic", fmt.Sprintf("bench-%d", c.id))
	if err != nil {
		return err
	}
	sender, err := pc.AddTrack(c.mic)
	if err != nil {
		return err
	}
	go func() { // RTCP from the broker: read and dropped
		buf := make([]byte, 1500)
		for {
			if _, _, err := sender.Read(buf); err != nil {
				return
			}
		}
	}()
	pc.OnTrack(func(tr *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { c.readAgent(tr) })
	dc, err := pc.CreateDataChannel("frames", nil)
	if err != nil {
		return err
	}
	c.dc = dc
	dc.OnOpen(func() { c.openOnce.Do(func() { close(c.opened) }) })
	dc.OnMessage(func(m webrtc.DataChannelMessage) { c.frame(m.Data) })
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		return err
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		return err
	}
	select {
	case <-gathered:
	case <-ctx.Done():
		return ctx.Err()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/sessions/"+c.session+"/webrtc",
		strings.NewReader(pc.LocalDescription().SDP))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.callerToken)
	req.Header.Set("Content-Type", "application/sdp")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("offer: %s %s", resp.Status, answer)
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: string(answer)}); err != nil {
		return err
	}
	select {
	case <-c.opened:
	case <-ctx.Done():
		return fmt.Errorf("data channel did not open: %w", ctx.Err())
	}
	hello, _ := json.Marshal(map[string]any{"type": "hello", "protocol": frames.Protocol, "role": "caller",
		"session_id": c.session, "caller_token": c.callerToken})
	if err := dc.SendText(string(hello)); err != nil {
		return err
	}
	select {
	case <-c.welcomed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("no welcome: %w", ctx.Err())
	}
}

// frame takes one frame of the data channel: the welcome, transcripts, errors.
func (c *benchCaller) frame(data []byte) {
	var f struct {
		Type  string `json:"type"`
		Role  string `json:"role"`
		Final bool   `json:"final"`
	}
	if json.Unmarshal(data, &f) != nil {
		return
	}
	switch f.Type {
	case "welcome":
		c.once.Do(func() { close(c.welcomed) })
	case "transcript":
		if f.Role == "agent" && f.Final {
			c.transcript.Add(1)
		}
	case "error":
		c.errFrames.Add(1)
	}
}

// readAgent reads the agent's RTP packets: counted, and their sequence numbers checked for
// gaps (the broker numbers every packet it writes, talk spurts included).
func (c *benchCaller) readAgent(tr *webrtc.TrackRemote) {
	buf := make([]byte, 1500)
	var h rtp.Header
	var highest, base int64
	first := true
	for {
		n, _, err := tr.Read(buf)
		if err != nil {
			return
		}
		if _, err := h.Unmarshal(buf[:n]); err != nil {
			continue
		}
		now := time.Now().UnixNano()
		if prev := c.lastAgent.Swap(now); now-prev >= int64(200*time.Millisecond) {
			c.spurts.Add(1)
		}
		c.received.Add(1)
		s := int64(h.SequenceNumber)
		if first {
			base, highest, first = s, s, false
		} else {
			ext := highest + int64(int16(uint16(s)-uint16(highest)))
			highest = max(highest, ext)
		}
		if lost := highest - base + 1 - c.received.Load(); lost > 0 {
			c.lost.Store(lost)
		} else {
			c.lost.Store(0)
		}
	}
}

// talkPlan is how a caller talks during a step.
type talkPlan struct {
	start, end time.Time     // the measured window: the microphone sends from start to end
	callEvery  time.Duration // a caller.text tool call this often
	firstCall  time.Duration // the first one this long after start
}

// talk sends the microphone's packets from p.start to p.end, every 20 ms on the real-time
// schedule: speech-like bursts of 1–2 s and pauses of 1–2 s, now and then talking over the
// agent on purpose (a barge-in), and a caller.text turn `call render_report {...}` every
// callEvery, which the scripted model (and the simulator) turn into a tool call.
func (c *benchCaller) talk(p talkPlan, rng *rand.Rand) {
	var pkt rtp.Packet
	pkt.Header = rtp.Header{Version: 2, PayloadType: 0, SequenceNumber: uint16(rng.Uint32()), Timestamp: rng.Uint32()}
	span := func() time.Duration { return time.Second + time.Duration(rng.Int64N(int64(time.Second))) }
	talking := rng.IntN(2) == 0
	phaseEnd := p.start.Add(time.Duration(rng.Int64N(int64(2 * time.Second))))
	nextCall := p.start.Add(p.firstCall)
	spoken := 0          // frames of the current burst
	var bargeSpurt int64 // the agent spurt the barge-in decision was made for
	next := p.start
	for next.Before(p.end) {
		now := time.Now()
		if d := next.Sub(now); d > 0 {
			time.Sleep(d)
			now = time.Now()
		}
		c.late[min(int(now.Sub(next)/time.Millisecond), len(c.late)-1)]++
		if !now.Before(phaseEnd) {
			talking, spoken = !talking, 0
			phaseEnd = now.Add(span())
		}
		// The agent speaks (a packet in the last 60 ms) while the caller is silent: one time in
		// three the caller talks over it 300 ms in.
		if last := c.lastAgent.Load(); !talking && last != 0 && now.UnixNano()-last < int64(60*time.Millisecond) {
			if spurt := c.spurts.Load(); spurt != bargeSpurt {
				bargeSpurt = spurt
				if rng.IntN(3) == 0 {
					phaseEnd = now.Add(300 * time.Millisecond)
					c.bargeIns++
				}
			}
		}
		pkt.Payload = silenceFrame
		if talking {
			pkt.Payload = speechFrames[spoken%len(speechFrames)]
			spoken++
		}
		if err := c.mic.WriteRTP(&pkt); err == nil {
			c.sent++
		}
		pkt.SequenceNumber++
		pkt.Timestamp += g711.SamplesPer20ms
		if p.callEvery > 0 && !now.Before(nextCall) {
			c.turns++
			text, _ := json.Marshal(map[string]any{"type": "caller.text",
				"text": fmt.Sprintf(`call render_report {"caller":%d,"turn":%d}`, c.id, c.turns)})
			_ = c.dc.SendText(string(text))
			nextCall = nextCall.Add(p.callEvery)
		}
		next = next.Add(20 * time.Millisecond)
	}
}

// close hangs up the peer connection (not the session: the step's serve is stopped after).
func (c *benchCaller) close() {
	if c.pc != nil {
		_ = c.pc.Close()
	}
	if c.host != nil {
		c.host.close()
	}
}
