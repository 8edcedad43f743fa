package webrtc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/frames"
)

// framesLabel is the label of the data channel that carries the frames.
const framesLabel = "frames"

// flushTimeout bounds how long a closing peer connection waits for its last frames to be
// acknowledged, and for the data channel's close to complete.
const flushTimeout = 5 * time.Second

// peer is one peer connection: a broker.Transport. Its goroutines: run (the hello, then every
// data-channel message to the Client, in order, then the teardown), writeLoop (frames to the
// data channel, with back-pressure) and audioLoop (agent audio to the RTP track).
type peer struct {
	h          *Handler
	id         string // the resource id
	session    string // the session of the URL
	log        *slog.Logger
	pc         *webrtc.PeerConnection
	audioOut   *webrtc.TrackLocalStaticRTP
	frameLimit int
	maxQueued  int64
	high, low  uint64 // data-channel back-pressure marks

	in    chan inbound  // data-channel messages, read by run
	audio chan outAudio // agent audio, read by audioLoop
	// queuedAudio counts the chunks in audio or being written by audioLoop; rtpOut numbers
	// the packets (sendAudio writes directly when nothing is queued).
	queuedAudio atomic.Int32
	rtpOut      rtpState
	vm          *broker.VoiceMetrics
	wake        chan struct{}
	lowSig      chan struct{} // the data channel's buffered amount fell to the low mark
	answered    chan struct{} // the answer went out: the hello clock starts
	closeReq    chan struct{} // Close was called
	dcOpen      chan struct{}
	dcClosed    chan struct{}
	stop        chan struct{} // the peer connection is ending
	writerDone  chan struct{}
	audioDone   chan struct{}
	stopOnce    sync.Once
	closeOnce   sync.Once
	openOnce    sync.Once
	dcDownOnce  sync.Once

	client atomic.Pointer[attached] // the connection Hello gave, once attached

	dcMu sync.Mutex
	dc   *webrtc.DataChannel

	mu      sync.Mutex
	pending []item // frames waiting for the writer, then possibly the close
	queued  int64  // bytes in pending
	closing bool
}

// inbound is one data-channel message: data, or the size of one over the frame limit.
type inbound struct {
	data []byte
	size int
	ref  string // when data is nil (oversized): the id read from the message
}

// outAudio is a chunk of agent audio and when the broker's pacing had it due.
type outAudio struct {
	chunk []byte
	due   time.Time // zero: not measured (SendAudio)
}

// item is one entry of the send queue: a frame, or the close that ends it.
type item struct {
	data  []byte
	close bool
}

// newPeer creates a peer connection for session and starts its goroutines.
func (h *Handler) newPeer(session string) (*peer, error) {
	pc, err := h.api.NewPeerConnection(webrtc.Configuration{ICEServers: h.opts.ICEServers})
	if err != nil {
		return nil, err
	}
	track, err := webrtc.NewTrackLocalStaticRTP(pcmu, "agent", "backchannel")
	if err != nil {
		_ = pc.Close()
		return nil, err
	}
	cfg := h.node.Config()
	high := uint64(h.opts.BufferedHigh)
	p := &peer{h: h, id: newResourceID(), session: session, pc: pc, audioOut: track,
		frameLimit: cfg.Limits.MaxFrameBytes, maxQueued: int64(cfg.Limits.SendQueueBytes), high: high, low: high / 4,
		in: make(chan inbound, 64), audio: make(chan outAudio, 50), vm: h.node.VoiceMetrics(), wake: make(chan struct{}, 1),
		lowSig: make(chan struct{}, 1), answered: make(chan struct{}), closeReq: make(chan struct{}),
		dcOpen: make(chan struct{}), dcClosed: make(chan struct{}), stop: make(chan struct{}),
		writerDone: make(chan struct{}), audioDone: make(chan struct{})}
	p.rtpOut.seq, p.rtpOut.ts = uint16(rand.Uint32()), rand.Uint32()
	p.log = h.log.With("session", session, "peer", p.id)
	if err := h.track(p, true); err != nil {
		_ = pc.Close()
		return nil, err
	}
	pc.OnDataChannel(p.onDataChannel)
	pc.OnTrack(p.onTrack)
	pc.OnConnectionStateChange(func(s webrtc.PeerConnectionState) {
		switch s {
		case webrtc.PeerConnectionStateFailed, webrtc.PeerConnectionStateClosed:
			p.log.Debug("webrtc: peer connection ended", "state", s.String())
			p.end()
		}
	})
	go p.run()
	go p.writeLoop()
	go p.audioLoop()
	return p, nil
}

// errNoCandidates: gathering found no address to offer, e.g. every port of the UDP port range
// is taken (503). An answer without candidates could never connect.
var errNoCandidates = errors.New("no ICE candidate could be gathered")

// badOffer is an offer the transport cannot answer (400).
type badOffer struct{ msg string }

func (b badOffer) Error() string { return b.msg }

// negotiate answers offer without trickle (pion's whip-whep): remote description, the agent's
// audio track, answer, local description, then every candidate is gathered.
func (p *peer) negotiate(ctx context.Context, offer string) (string, error) {
	desc := webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}
	parsed, err := desc.Unmarshal()
	if err != nil {
		return "", badOffer{"the SDP offer could not be parsed: " + err.Error()}
	}
	hasData, hasAudio := false, false
	for _, m := range parsed.MediaDescriptions {
		switch m.MediaName.Media {
		case "application":
			hasData = true
		case "audio":
			hasAudio = true
		}
	}
	if !hasData {
		return "", badOffer{`the SDP offer has no data channel: create the data channel "frames" before the offer`}
	}
	if err := p.pc.SetRemoteDescription(desc); err != nil {
		return "", badOffer{"the SDP offer was not accepted: " + err.Error()}
	}
	if hasAudio {
		sender, err := p.pc.AddTrack(p.audioOut)
		if err != nil {
			return "", badOffer{"the offer's audio cannot carry PCMU: " + err.Error()}
		}
		go drainRTCP(sender)
	}
	answer, err := p.pc.CreateAnswer(nil)
	if err != nil {
		return "", badOffer{"no answer to this offer: " + err.Error()}
	}
	gathered := webrtc.GatheringCompletePromise(p.pc)
	if err := p.pc.SetLocalDescription(answer); err != nil {
		return "", fmt.Errorf("local description: %w", err)
	}
	select {
	case <-gathered:
	case <-ctx.Done():
		return "", fmt.Errorf("ICE gathering: %w", ctx.Err())
	}
	ld := p.pc.LocalDescription()
	if ld == nil {
		return "", fmt.Errorf("no local description after gathering")
	}
	if !strings.Contains(ld.SDP, "a=candidate:") {
		return "", errNoCandidates
	}
	close(p.answered)
	return ld.SDP, nil
}

// drainRTCP reads the RTCP of the agent's track (reports from the caller) so that pion's
// interceptors run; nothing else needs it.
func drainRTCP(s *webrtc.RTPSender) {
	buf := make([]byte, 1500)
	for {
		if _, _, err := s.Read(buf); err != nil {
			return
		}
	}
}

// onDataChannel takes the first reliable, ordered data channel labelled "frames"; any other
// channel is closed.
func (p *peer) onDataChannel(dc *webrtc.DataChannel) {
	if dc.Label() != framesLabel {
		p.log.Debug("webrtc: closing a data channel that is not \"frames\"", "label", dc.Label())
		_ = dc.Close()
		return
	}
	if !dc.Ordered() || dc.MaxPacketLifeTime() != nil || dc.MaxRetransmits() != nil {
		p.log.Debug("webrtc: the frames data channel must be reliable and ordered; closing the peer connection")
		_ = dc.Close()
		p.end()
		return
	}
	p.dcMu.Lock()
	if p.dc != nil {
		p.dcMu.Unlock()
		_ = dc.Close()
		return
	}
	p.dc = dc
	p.dcMu.Unlock()
	dc.SetBufferedAmountLowThreshold(p.low)
	dc.OnBufferedAmountLow(func() {
		select {
		case p.lowSig <- struct{}{}:
		default:
		}
	})
	dc.OnOpen(func() { p.openOnce.Do(func() { close(p.dcOpen) }) })
	dc.OnClose(func() {
		p.dcDownOnce.Do(func() { close(p.dcClosed) })
		p.end() // a closed data channel is a dropped transport
	})
	dc.OnMessage(func(m webrtc.DataChannelMessage) {
		// Text and binary messages alike are frames: audio travels on the RTP track.
		msg := inbound{data: m.Data}
		if len(m.Data) > p.frameLimit {
			msg = inbound{size: len(m.Data), ref: frames.PeekID(m.Data)}
		}
		select {
		case p.in <- msg: // blocks while run is behind: back-pressure through SCTP
		case <-p.stop:
		}
	})
}

// onTrack feeds the caller's PCMU payloads (20 ms of µ-law each) to the broker. It runs once
// per RTP packet, so it reuses one buffer and one packet (TrackRemote.ReadRTP allocates both
// for every packet); ReceiveAudio copies the payload it keeps. The moment each packet was
// read goes with it, for the broker's inbound delay (backchannel_voice_audio_in_delay_seconds).
func (p *peer) onTrack(t *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
	if t.Kind() != webrtc.RTPCodecTypeAudio || !strings.EqualFold(t.Codec().MimeType, webrtc.MimeTypePCMU) {
		return
	}
	buf := make([]byte, rtpReadBytes)
	var pkt rtp.Packet
	for {
		n, _, err := t.Read(buf)
		if err != nil {
			return
		}
		read := p.vm.Now()
		if pkt.Unmarshal(buf[:n]) != nil {
			continue
		}
		a := p.client.Load()
		if a == nil || len(pkt.Payload) == 0 {
			continue
		}
		if ar, ok := a.c.(broker.AudioReceiver); ok {
			ar.ReceiveAudioAt(pkt.Payload, read)
		} else {
			a.c.ReceiveAudio(pkt.Payload)
		}
	}
}

// rtpReadBytes is the read buffer of a caller's RTP packets: pion's default receive MTU.
const rtpReadBytes = 1460

// run reads the hello, hands every later message to the Client, and tears the peer
// connection down when it ends.
func (p *peer) run() {
	defer p.h.wg.Done()
	defer func() { _ = p.h.track(p, false) }()
	if c := p.hello(); c != nil {
		p.client.Store(&attached{c})
		p.serve(c)
		c.Dropped() // not the end of the session (SPEC 10); a no-op after the broker closed it
	}
	p.end()
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	if err := p.pc.GracefulClose(); err != nil {
		p.log.Debug("webrtc: closing the peer connection", "err", err)
	}
	<-p.writerDone
	<-p.audioDone
}

// attached holds the connection a peer's hello attached (for an atomic pointer to it).
type attached struct{ c broker.Connection }

// hello waits for the first frame (within HelloTimeout of the answer) and attaches the peer
// connection with it. It returns nil when the hello was refused or never came.
func (p *peer) hello() broker.Connection {
	select {
	case <-p.answered:
	case <-p.stop:
		return nil
	}
	timer := time.NewTimer(p.h.opts.HelloTimeout)
	defer timer.Stop()
	for {
		select {
		case <-p.stop:
			return nil
		case <-timer.C:
			p.log.Debug("webrtc: no hello in time")
			p.Close(broker.StatusPolicy, fmt.Sprintf("hello expected within %s", p.h.opts.HelloTimeout))
			p.awaitEnd()
			return nil
		case m := <-p.in:
			if m.data == nil {
				continue // an oversized first message is skipped, as on /v1/ws
			}
			data, e := bindHello(m.data, p.session)
			if e != nil {
				if enc, err := frames.Encode(e); err == nil {
					p.Send(enc)
				}
				p.Close(broker.StatusPolicy, string(e.Code))
				p.awaitEnd()
				return nil
			}
			c := p.h.node.Hello(p, data)
			if c == nil {
				p.awaitEnd() // the refusal is queued, then the close
			}
			return c
		}
	}
}

// serve hands the messages after the hello to the Client, in order, until the peer
// connection ends.
func (p *peer) serve(c broker.Connection) {
	for {
		select {
		case m := <-p.in:
			if m.data == nil {
				c.Oversized(m.size, m.ref)
				continue
			}
			c.Receive(m.data)
		case <-p.stop:
			return
		}
	}
}

// awaitEnd waits for a close in progress to finish, then ends the peer connection anyway.
func (p *peer) awaitEnd() {
	select {
	case <-p.stop:
	case <-time.After(flushTimeout + time.Second):
		p.end()
	}
}

// bindHello ties a hello to the session of the URL: a hello without session_id is taken for
// it, one naming another session is refused with forbidden.
func bindHello(data []byte, session string) ([]byte, *frames.Error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return data, nil // the broker answers bad_frame
	}
	raw, ok := m["session_id"]
	if !ok || string(raw) == "null" {
		m["session_id"], _ = json.Marshal(session)
		out, err := json.Marshal(m)
		if err != nil {
			return data, nil
		}
		return out, nil
	}
	var got string
	if json.Unmarshal(raw, &got) != nil || got == session {
		return data, nil // a wrong type is the broker's bad_frame
	}
	e := frames.Errorf(frames.CodeForbidden, "this peer connection belongs to session %s, not %s", session, got)
	_ = json.Unmarshal(m["id"], &e.Ref)
	return nil, e
}

// end starts the teardown (idempotent).
func (p *peer) end() {
	p.stopOnce.Do(func() { close(p.stop) })
}

// Send implements broker.Transport: the frame is queued for the data channel. A caller whose
// queue outgrows the broker's SendQueueBytes is closed as a slow consumer (a drop).
func (p *peer) Send(frame []byte) {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return
	}
	p.queued += int64(len(frame))
	if p.queued > p.maxQueued {
		p.closing = true
		p.mu.Unlock()
		p.log.Warn("webrtc: send queue overflow, closing a slow consumer")
		p.end()
		return
	}
	p.pending = append(p.pending, item{data: frame})
	p.mu.Unlock()
	p.signal()
}

// SendAudio implements broker.Transport: the chunk goes out on the agent's RTP track. Audio
// that cannot keep up (more than a second waiting) is dropped, never queued without bound.
func (p *peer) SendAudio(chunk []byte) { p.sendAudio(outAudio{chunk: chunk}) }

// SendAudioDue implements broker.AudioDueSender: SendAudio of a chunk the broker's pacing had
// due at due; its delay is observed when its packet is written.
func (p *peer) SendAudioDue(chunk []byte, due time.Time) {
	p.sendAudio(outAudio{chunk: chunk, due: due})
}

// When nothing waits for audioLoop, the chunk is written here, on the caller's goroutine (the
// session's loop), saving the frame a hand-over to another goroutine, which is a wait in the
// run queue when the machine is busy. The first packets go through audioLoop: a write before
// SRTP is up would wait for it.
func (p *peer) sendAudio(a outAudio) {
	select {
	case <-p.stop:
		return
	default:
	}
	if p.queuedAudio.Load() == 0 && p.rtpOut.mu.TryLock() {
		if p.rtpOut.written && p.queuedAudio.Load() == 0 { // SendAudio has one caller: none is queued now
			p.writeAudio(a)
			p.rtpOut.mu.Unlock()
			return
		}
		p.rtpOut.mu.Unlock()
	}
	p.queuedAudio.Add(1)
	select {
	case p.audio <- a:
	default:
		p.queuedAudio.Add(-1)
		p.vm.AudioDropped()
	}
}

// Close implements broker.Transport: the queued frames go first, then the data channel and
// the peer connection close. code and reason are not carried (see the package doc): the
// frame before the close says what it means.
func (p *peer) Close(code int, reason string) {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return
	}
	p.closing = true
	p.pending = append(p.pending, item{close: true})
	p.mu.Unlock()
	p.log.Debug("webrtc: closing", "code", code, "reason", reason)
	p.closeOnce.Do(func() { close(p.closeReq) })
	p.signal()
}

// Abort implements broker.Transport: the peer connection closes at once.
func (p *peer) Abort() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	p.end()
}

func (p *peer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *peer) take() []item {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.pending
	p.pending = nil
	return out
}

func (p *peer) dataChannel() *webrtc.DataChannel {
	p.dcMu.Lock()
	defer p.dcMu.Unlock()
	return p.dc
}

// writeLoop writes queued frames to the data channel in order, keeping at most BufferedHigh
// bytes unacknowledged in it, until a close item or the end.
func (p *peer) writeLoop() {
	defer close(p.writerDone)
	select {
	case <-p.dcOpen:
	case <-p.closeReq:
		select {
		case <-p.dcOpen:
		default:
			p.end() // closed before the data channel opened: nothing to flush
			return
		}
	case <-p.stop:
		return
	}
	dc := p.dataChannel()
	for {
		select {
		case <-p.wake:
		case <-p.stop:
			return
		}
		for _, it := range p.take() {
			if it.close {
				p.finish(dc)
				return
			}
			if !p.waitBuffered(dc) {
				return
			}
			err := dc.SendText(string(it.data))
			p.mu.Lock()
			p.queued -= int64(len(it.data))
			p.mu.Unlock()
			if err != nil {
				// Also a frame over the peer's max-message-size (Chrome: 256 KiB).
				p.log.Warn("webrtc: sending a frame failed; closing the peer connection", "bytes", len(it.data), "err", err)
				p.end()
				return
			}
		}
	}
}

// waitBuffered waits until the data channel holds at most the high mark; false when the
// peer connection ended meanwhile.
func (p *peer) waitBuffered(dc *webrtc.DataChannel) bool {
	for dc.BufferedAmount() > p.high {
		select {
		case <-p.lowSig:
		case <-p.stop:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}

// finish waits until every frame sent was acknowledged, closes the data channel (the peer
// reads every frame before it sees the close), and ends the peer connection.
func (p *peer) finish(dc *webrtc.DataChannel) {
	deadline := time.Now().Add(flushTimeout)
	for dc.BufferedAmount() > 0 && time.Now().Before(deadline) {
		select {
		case <-p.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	_ = dc.Close()
	select {
	case <-p.dcClosed:
	case <-p.stop:
	case <-time.After(flushTimeout):
	}
	p.end()
}

// spurtGap is how late agent audio may come before it counts as a new talk spurt.
const spurtGap = 200 * time.Millisecond

// audioLoop sends agent audio as PCMU RTP packets of at most 20 ms. The broker paces the
// audio in real time; between responses the RTP timestamp advances by the silence and the
// first packet of a talk spurt carries the marker bit (RFC 3551 4.1), so the caller's jitter
// buffer sees a pause, not a late packet.
func (p *peer) audioLoop() {
	defer close(p.audioDone)
	for {
		var a outAudio
		select {
		case a = <-p.audio:
		case <-p.stop:
			return
		}
		p.rtpOut.mu.Lock()
		p.writeAudio(a)
		p.rtpOut.mu.Unlock()
		p.queuedAudio.Add(-1)
	}
}

// rtpState is the numbering of the agent's RTP packets, shared by audioLoop and the direct
// path of sendAudio under mu.
type rtpState struct {
	mu      sync.Mutex
	seq     uint16
	ts      uint32
	next    time.Time // when the audio sent so far ends
	pkt     rtp.Packet
	written bool // a packet was written: SRTP is up, so a write does not wait for it
}

// writeAudio writes one chunk as packets of at most 20 ms. p.rtpOut.mu is held.
func (p *peer) writeAudio(a outAudio) {
	o := &p.rtpOut
	chunk := a.chunk
	now := time.Now()
	marker := false
	if o.next.IsZero() || now.Sub(o.next) > spurtGap {
		if !o.next.IsZero() {
			silent := now.Sub(o.next) / (20 * time.Millisecond) * 160
			o.ts += uint32(silent)
		}
		marker = true
		o.next = now
	}
	for len(chunk) > 0 {
		n := min(len(chunk), samplesPerPacket)
		// One packet for all: WriteRTP copies it (and marshals the payload) before it returns.
		o.pkt.Header = rtp.Header{Version: 2, Marker: marker, SequenceNumber: o.seq, Timestamp: o.ts}
		o.pkt.Payload = chunk[:n]
		if err := p.audioOut.WriteRTP(&o.pkt); err != nil {
			p.log.Debug("webrtc: writing agent audio", "err", err)
		} else {
			o.written = true
			if !a.due.IsZero() {
				p.vm.AudioWritten(a.due)
				a.due = a.due.Add(time.Duration(n) * time.Second / 8000) // the next 20 ms of a longer chunk
			}
		}
		o.seq++
		o.ts += uint32(n)
		marker = false
		chunk = chunk[n:]
		o.next = o.next.Add(time.Duration(n) * time.Second / 8000)
	}
	o.pkt.Payload = nil
}

// samplesPerPacket is 20 ms of PCMU.
const samplesPerPacket = 160
