package voicetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
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

func parseFrame(data []byte) frame { return frame{wiretest.ParseFrame(data)} }

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

// match selects frames.
type match func(frame) bool

// typ matches frames of type t whose string members equal kv (key, value, …).
func typ(t string, kv ...string) match {
	m := wiretest.TypeWith(t, kv...)
	return func(f frame) bool { return m(f.Frame) }
}

// conn is one WebSocket connection to the broker: it keeps everything received, in order,
// with arrival times, on a reader goroutine, and checks that seq is consecutive (SPEC 2).
type conn struct {
	t    testing.TB
	name string
	ws   *websocket.Conn
	tcp  net.Conn // set once by dial
	hc   *http.Client

	mu       sync.Mutex
	history  []event
	taken    map[int]bool // frames a wait consumed
	notify   chan struct{}
	done     chan struct{}
	closeErr error
	welcomed bool
	nextSeq  int64
	lastSeq  int64
	problems []string
	ended    bool // session.ended arrived
}

// dial opens a connection to wsURL; it is closed when the test ends.
func dial(t testing.TB, wsURL, name string) *conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, tcp, hc, err := wiretest.DialWebSocket(ctx, wsURL)
	if err != nil {
		t.Fatalf("%s: dial %s: %v", name, wsURL, err)
	}
	c := &conn{t: t, name: name, ws: ws, tcp: tcp, hc: hc, taken: map[int]bool{}, notify: make(chan struct{}), done: make(chan struct{}), nextSeq: 1}
	go c.read()
	t.Cleanup(c.close)
	return c
}

func (c *conn) close() {
	_ = c.ws.CloseNow()
	<-c.done
	c.hc.CloseIdleConnections()
	c.mu.Lock()
	problems := c.problems
	c.mu.Unlock()
	for _, p := range problems {
		c.t.Errorf("%s: %s", c.name, p)
	}
}

func (c *conn) read() {
	defer close(c.done)
	for {
		typ, data, err := c.ws.Read(context.Background())
		now := time.Now()
		c.mu.Lock()
		if err != nil {
			c.closeErr = err
			close(c.notify)
			c.notify = make(chan struct{})
			c.mu.Unlock()
			return
		}
		e := event{Idx: len(c.history), At: now}
		if typ == websocket.MessageBinary {
			e.Audio = data
			if len(data) != g711.SamplesPer20ms {
				c.problems = append(c.problems, fmt.Sprintf("SPEC 17: an agent audio message of %d bytes, want 20 ms (%d bytes of µ-law)", len(data), g711.SamplesPer20ms))
			}
			if c.ended {
				c.problems = append(c.problems, "agent audio after session.ended")
			}
		} else {
			e.F = parseFrame(data)
			c.check(e.F)
		}
		c.history = append(c.history, e)
		close(c.notify)
		c.notify = make(chan struct{})
		c.mu.Unlock()
	}
}

// check applies SPEC 2 (every frame after the welcome carries a consecutive seq) and SPEC 3.6
// (session.ended is the last frame).
func (c *conn) check(f frame) {
	if c.ended {
		c.problems = append(c.problems, "frame after session.ended: "+f.String())
	}
	if f.Type == "session.ended" {
		c.ended = true
	}
	if f.Type == "welcome" {
		c.welcomed = true
		return
	}
	if !c.welcomed {
		return
	}
	seq := f.num("seq")
	if seq != c.nextSeq {
		c.problems = append(c.problems, fmt.Sprintf("seq %d, want %d: %s", seq, c.nextSeq, f))
	}
	c.nextSeq = seq + 1
	c.lastSeq = seq
}

// send sends v as one text message (a frames.Frame through frames.Encode, anything else as
// JSON). It fails the test on error.
func (c *conn) send(v any) {
	c.t.Helper()
	if err := c.trySend(v); err != nil {
		c.t.Fatalf("%s: send: %v", c.name, err)
	}
}

func (c *conn) trySend(v any) error {
	var data []byte
	var err error
	switch v := v.(type) {
	case frames.Frame:
		data, err = frames.Encode(v)
	default:
		data, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, data)
}

// sendAudio sends one binary message of caller audio.
func (c *conn) sendAudio(chunk []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageBinary, chunk)
}

// hello sends a hello with members (protocol added) and returns the welcome.
func (c *conn) hello(members map[string]any) frame {
	c.t.Helper()
	h, next := wiretest.HelloFrame(members)
	c.mu.Lock()
	c.nextSeq = next
	c.mu.Unlock()
	c.send(h)
	e := c.expect(func(f frame) bool { return f.Type == "welcome" || f.Type == "error" })
	if e.F.Type != "welcome" {
		c.t.Fatalf("%s: hello refused: %s", c.name, e.F)
	}
	return e.F
}

// waitFrom takes the first frame after index from (inclusive) not taken yet that m matches,
// waiting up to d.
func (c *conn) waitFrom(from int, d time.Duration, m match) (event, error) {
	e, found, closed := c.waitFor(from, d, func(i int, e event) bool {
		if e.isAudio() || c.taken[i] || !m(e.F) {
			return false
		}
		c.taken[i] = true
		return true
	})
	switch {
	case found:
		return e, nil
	case closed != nil:
		return event{}, fmt.Errorf("%s: connection closed (%v) before the frame came; received:%s", c.name, closed, c.dump(from))
	}
	return event{}, fmt.Errorf("%s: no matching frame within %v; received:%s", c.name, d, c.dump(from))
}

// waitFor waits up to d for the first message at index from or later that pick accepts (pick
// runs with c.mu held). found is false when d passed or the connection ended first (closed is
// then why it ended).
func (c *conn) waitFor(from int, d time.Duration, pick func(i int, e event) bool) (e event, found bool, closed error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		for i := max(from, 0); i < len(c.history); i++ {
			if pick(i, c.history[i]) {
				e = c.history[i]
				c.mu.Unlock()
				return e, true, nil
			}
		}
		ch := c.notify
		closed = c.closeErr
		c.mu.Unlock()
		if closed != nil {
			return event{}, false, closed
		}
		select {
		case <-ch:
		case <-deadline.C:
			return event{}, false, nil
		}
	}
}

// expect takes the first untaken frame m matches, failing the test after waitTimeout.
func (c *conn) expect(m match) event {
	c.t.Helper()
	e, err := c.waitFrom(0, waitTimeout, m)
	if err != nil {
		c.t.Fatal(err)
	}
	return e
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
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]event(nil), c.history...)
}

// mark is the index the next received message will get.
func (c *conn) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.history)
}

// lastAudio is the newest agent audio message (ok false when none arrived yet).
func (c *conn) lastAudio() (event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.history) - 1; i >= 0; i-- {
		if c.history[i].isAudio() {
			return c.history[i], true
		}
	}
	return event{}, false
}

// waitAudio waits for the first agent audio message at index from or later.
func (c *conn) waitAudio(from int, d time.Duration) (event, error) {
	e, found, closed := c.waitFor(from, d, func(_ int, e event) bool { return e.isAudio() })
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
	for _, e := range c.events() {
		if e.Idx >= from && (to < 0 || e.Idx < to) && e.isAudio() {
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
func (c *conn) cut() {
	nc := c.tcp
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	if nc != nil {
		_ = nc.Close()
	}
	<-c.done
}

// waitClosed waits until the broker closed the connection and returns its close status.
func (c *conn) waitClosed() websocket.StatusCode {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(waitTimeout):
		c.t.Fatalf("%s: still open after %v", c.name, waitTimeout)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return websocket.CloseStatus(c.closeErr)
}

// sessionEnded reports whether session.ended arrived.
func (c *conn) sessionEnded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

func (c *conn) lastSeqSeen() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastSeq
}

// dump renders what arrived from index from on, with arrival times relative to the first
// message shown (runs of audio summarized).
func (c *conn) dump(from int) string {
	var b strings.Builder
	var t0, runStart, runEnd time.Time
	audio := 0
	flush := func() {
		if audio > 0 {
			fmt.Fprintf(&b, "\n  +%dms [%d audio until +%dms]", runStart.Sub(t0).Milliseconds(), audio, runEnd.Sub(t0).Milliseconds())
			audio = 0
		}
	}
	for _, e := range c.events() {
		if e.Idx < from {
			continue
		}
		if t0.IsZero() {
			t0 = e.At
		}
		if e.isAudio() {
			if audio == 0 {
				runStart = e.At
			}
			runEnd = e.At
			audio++
			continue
		}
		flush()
		fmt.Fprintf(&b, "\n  +%dms %s", e.At.Sub(t0).Milliseconds(), e.F)
	}
	flush()
	if b.Len() == 0 {
		return " (nothing)"
	}
	return b.String()
}

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
