package voicetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker/wiretest"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/g711"
)

// waitTimeout bounds every wait for a frame: generous, machines are shared and noisy.
const waitTimeout = 20 * time.Second

// frame is one JSON frame received from the broker.
type frame struct{ wiretest.Frame }

func (f frame) str(k string) string { return f.Str(k) }

func (f frame) has(k string) bool { return f.Has(k) }

func (f frame) num(k string) int64 {
	n, ok := f.M[k].(json.Number)
	if !ok {
		return -1
	}
	v, err := n.Int64()
	if err != nil {
		return -1
	}
	return v
}

func (f frame) boolean(k string) (v, ok bool) { v, ok = f.M[k].(bool); return v, ok }

func (f frame) String() string {
	if len(f.Raw) > 400 {
		return string(f.Raw[:400]) + "…"
	}
	return string(f.Raw)
}

// event is one message received on a connection: a JSON frame, or (Audio set) one binary
// message of agent audio.
type event struct {
	Idx   int // position in the connection's history
	At    time.Time
	Audio []byte
	F     frame
}

func (e event) isAudio() bool { return e.Audio != nil }

func eventOf(e wiretest.Event) event {
	return event{Idx: e.Idx, At: e.At, Audio: e.Audio, F: frame{e.Frame}}
}

// match selects frames.
type match func(frame) bool

func (m match) wire() wiretest.Match { return func(f wiretest.Frame) bool { return m(frame{f}) } }

// typ matches frames of type t whose string members equal kv (key, value, …).
func typ(t string, kv ...string) match {
	m := wiretest.TypeWith(t, kv...)
	return func(f frame) bool { return m(f.Frame) }
}

// conn is one WebSocket connection to the broker: wiretest's test client (which records every
// message with its arrival time and checks seq, session.ended and the audio framing), with the
// index-based waits the voice scenarios use.
type conn struct {
	*wiretest.Conn
	t    testing.TB
	name string
}

// dial opens a connection to wsURL; it is closed when the test ends.
func dial(t testing.TB, wsURL, name string) *conn {
	t.Helper()
	return &conn{Conn: wiretest.Dial(t, wsURL, name), t: t, name: name}
}

// close drops the connection (no close frame) and waits for its reader.
func (c *conn) close() { c.CloseNow() }

// send sends v as one text message (a frames.Frame through frames.Encode, anything else as
// JSON). It fails the test on error.
func (c *conn) send(v any) {
	c.t.Helper()
	if err := c.trySend(v); err != nil {
		c.t.Fatalf("%s: send: %v", c.name, err)
	}
}

func (c *conn) trySend(v any) error {
	if f, ok := v.(frames.Frame); ok {
		data, err := frames.Encode(f)
		if err != nil {
			return err
		}
		return c.SendRaw(data)
	}
	return c.SendErr(v)
}

// sendAudio sends one binary message of caller audio.
func (c *conn) sendAudio(chunk []byte) error { return c.SendBinary(chunk) }

// hello sends a hello with members (protocol added) and returns the welcome.
func (c *conn) hello(members map[string]any) frame {
	c.t.Helper()
	c.SendHello(members)
	e := c.expect(func(f frame) bool { return f.Type == "welcome" || f.Type == "error" })
	if e.F.Type != "welcome" {
		c.t.Fatalf("%s: hello refused: %s", c.name, e.F)
	}
	return e.F
}

// waitFrom takes the first frame after index from (inclusive) not taken yet that m matches,
// waiting up to d.
func (c *conn) waitFrom(from int, d time.Duration, m match) (event, error) {
	e, err := c.WaitFrom(from, d, m.wire())
	return eventOf(e), err
}

// waitFor waits up to d for the first message at index from or later that pick accepts.
func (c *conn) waitFor(from int, d time.Duration, pick func(e event) bool) (event, bool, error) {
	e, found, closed := c.WaitFor(from, d, func(e wiretest.Event) bool { return pick(eventOf(e)) })
	return eventOf(e), found, closed
}

// expect takes the first untaken frame m matches, failing the test after waitTimeout.
func (c *conn) expect(m match) event {
	c.t.Helper()
	return c.expectAfter(0, m)
}

// expectAfter is expect among the frames from index from on.
func (c *conn) expectAfter(from int, m match) event {
	c.t.Helper()
	e, err := c.waitFrom(from, waitTimeout, m)
	if err != nil {
		c.t.Fatal(err)
	}
	return e
}

// absent fails the test if an untaken frame m matches arrives (or is there) within d.
func (c *conn) absent(d time.Duration, m match, why string) {
	c.t.Helper()
	if e, err := c.waitFrom(0, d, m); err == nil {
		c.t.Fatalf("%s: %s: unexpected frame %s", c.name, why, e.F)
	}
}

// never fails the test if any frame so far (taken or not) matches m.
func (c *conn) never(m match, why string) {
	c.t.Helper()
	for _, e := range c.events() {
		if !e.isAudio() && m(e.F) {
			c.t.Fatalf("%s: %s: %s", c.name, why, e.F)
		}
	}
}

// events returns a copy of the history.
func (c *conn) events() []event {
	es := c.Events()
	out := make([]event, len(es))
	for i, e := range es {
		out[i] = eventOf(e)
	}
	return out
}

// mark is the index the next received message will get.
func (c *conn) mark() int { return c.Mark() }

// lastAudio is the newest agent audio message (ok false when none arrived yet).
func (c *conn) lastAudio() (event, bool) {
	e, ok := c.LastAudio()
	return eventOf(e), ok
}

// waitAudio waits for the first agent audio message at index from or later.
func (c *conn) waitAudio(from int, d time.Duration) (event, error) {
	e, found, closed := c.waitFor(from, d, func(e event) bool { return e.isAudio() })
	switch {
	case found:
		return e, nil
	case closed != nil:
		return event{}, fmt.Errorf("%s: closed (%v) before agent audio came", c.name, closed)
	}
	return event{}, fmt.Errorf("%s: no agent audio within %v", c.name, d)
}

// expectAudio is waitAudio failing the test.
func (c *conn) expectAudio(from int) event {
	c.t.Helper()
	e, err := c.waitAudio(from, waitTimeout)
	if err != nil {
		c.t.Fatal(err)
	}
	return e
}

// audioFrames counts the agent audio messages with index in [from, to) (to < 0: to the end).
func (c *conn) audioFrames(from, to int) int {
	n := 0
	for _, e := range c.Events() {
		if e.Idx >= from && (to < 0 || e.Idx < to) && e.IsAudio() {
			n++
		}
	}
	return n
}

// awaitAudioFrames waits (at most waitTimeout) until at least n agent audio messages with index
// from or later have arrived.
func (c *conn) awaitAudioFrames(from, n int) {
	c.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for c.audioFrames(from, -1) < n {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %d agent audio messages never arrived:%s", c.name, n, c.dump(from))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// quiet waits until no agent audio has arrived for d (at most waitTimeout) and returns the
// index the next message will get.
func (c *conn) quiet(d time.Duration) int {
	c.t.Helper()
	start := time.Now()
	for {
		last := start
		if e, ok := c.lastAudio(); ok && e.At.After(last) {
			last = e.At
		}
		if wait := time.Until(last.Add(d)); wait > 0 {
			if time.Since(start) > waitTimeout {
				c.t.Fatalf("%s: agent audio did not stop for %v within %v", c.name, d, waitTimeout)
			}
			time.Sleep(wait)
			continue
		}
		return c.mark()
	}
}

// noAudio fails the test if agent audio arrives within d from now.
func (c *conn) noAudio(d time.Duration, why string) {
	c.t.Helper()
	from := c.mark()
	if e, err := c.waitAudio(from, d); err == nil {
		c.t.Fatalf("%s: %s: agent audio arrived %v after the check began", c.name, why, e.At.Sub(time.Now().Add(-d)).Round(time.Millisecond))
	}
}

// cut drops the TCP connection abruptly (an RST, no close frame).
func (c *conn) cut() { c.Cut() }

// waitClosed waits until the broker closed the connection and returns its close status.
func (c *conn) waitClosed() websocket.StatusCode {
	c.t.Helper()
	st, err := c.WaitClosed(waitTimeout)
	if err != nil {
		c.t.Fatal(err)
	}
	return st
}

// sessionEnded reports whether session.ended arrived.
func (c *conn) sessionEnded() bool { return c.SessionEnded() }

func (c *conn) lastSeqSeen() int64 { return c.LastSeq() }

// dump renders what arrived from index from on, with arrival times.
func (c *conn) dump(from int) string { return c.Dump(from) }

// ---------------------------------------------------------------------------------------------
// the caller's microphone

// mic streams caller audio like a phone bridge: one 20 ms µ-law frame every 20 ms, never ahead
// of real time, loud (a tone far above the VAD threshold) or silent. It records when each loud
// frame was sent.
type mic struct {
	c    *conn
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	loud     bool
	lastLoud time.Time // when the last loud frame was due (it was not sent earlier)
	sent     int       // frames sent
	silentAt int       // frames sent when the mic last went silent
	err      error
}

var (
	loudFrame   = g711.Tone(300, 20, 0.5)
	silentFrame = g711.Silence(20)
)

// startMic starts streaming silence on c until the test ends.
func startMic(t testing.TB, c *conn) *mic {
	m := &mic{c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	t.Cleanup(m.close)
	return m
}

func (m *mic) close() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
}

func (m *mic) run() {
	defer close(m.done)
	start := time.Now()
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * 20 * time.Millisecond)
		if wait := time.Until(due); wait > 0 {
			select {
			case <-m.stop:
				return
			case <-time.After(wait):
			}
		}
		select {
		case <-m.stop:
			return
		default:
		}
		m.mu.Lock()
		loud := m.loud
		m.mu.Unlock()
		f := silentFrame
		if loud {
			f = loudFrame
		}
		err := m.c.sendAudio(f)
		m.mu.Lock()
		if err != nil && m.err == nil {
			m.err = err
		}
		m.sent++
		if loud {
			m.lastLoud = due
		}
		m.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// setLoud switches the microphone between speech and silence.
func (m *mic) setLoud(loud bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !loud {
		m.silentAt = m.sent
	}
	m.loud = loud
}

// waitSent waits until n more frames were sent.
func (m *mic) waitSent(n int) {
	m.mu.Lock()
	target := m.sent + n
	m.mu.Unlock()
	for {
		m.mu.Lock()
		sent, err := m.sent, m.err
		m.mu.Unlock()
		if sent >= target || err != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// silence makes the microphone silent and waits until a silent frame was sent; it returns when
// the last loud frame was due: the broker cannot have received it earlier.
func (m *mic) silence() time.Time {
	m.setLoud(false)
	for {
		m.mu.Lock()
		sent, at, last, err := m.sent, m.silentAt, m.lastLoud, m.err
		m.mu.Unlock()
		if sent > at+1 || err != nil {
			return last
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// failure is the error that stopped the microphone, if any.
func (m *mic) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}
