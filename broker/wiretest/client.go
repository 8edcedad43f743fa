// Package wiretest is the black-box integration suite of the broker: it runs a real broker on
// loopback (internal/brokertest), over the memory store and over a private Redis, and drives it
// only through its wire protocol — WebSocket frames at /v1/ws and the HTTP API — the way any
// client would (SPEC 2–7, 10, 11, 13, 16).
//
// This file is the test client of the broker's tests (this package's and broker/voicetest's):
// Conn dials /v1/ws keeping the TCP connection (so a test can cut it abruptly), records every
// message it receives — frames and agent audio, with arrival times — on a reader goroutine, and
// checks on the fly that the seq of every frame after the welcome is consecutive (SPEC 2), that
// nothing follows session.ended (SPEC 3.6) and that agent audio comes in 20 ms messages (SPEC 17).
package wiretest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/g711"
)

// DefaultTimeout bounds every Expect.
const DefaultTimeout = 10 * time.Second

// Frame is one frame received from the broker.
type Frame struct {
	Type string
	Raw  []byte
	M    map[string]any // the decoded object (numbers as json.Number)
	At   time.Time      // when it arrived
}

// ParseFrame decodes one received message. A message that is not a JSON object gets Type "".
func ParseFrame(data []byte) Frame {
	f := Frame{Raw: append([]byte(nil), data...), At: time.Now()}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&f.M); err == nil && f.M != nil {
		f.Type, _ = f.M["type"].(string)
	}
	return f
}

// Has reports whether the frame has member k.
func (f Frame) Has(k string) bool { _, ok := f.M[k]; return ok }

// Str returns member k as a string ("" when absent or not a string).
func (f Frame) Str(k string) string { s, _ := f.M[k].(string); return s }

// Int returns member k as an integer (0 when absent or not an integer).
func (f Frame) Int(k string) int64 {
	n, ok := f.M[k].(json.Number)
	if !ok {
		return 0
	}
	v, _ := n.Int64()
	return v
}

// Bool returns member k as a bool (false when absent or not a bool).
func (f Frame) Bool(k string) bool { b, _ := f.M[k].(bool); return b }

// Obj returns member k as an object (nil when absent or not an object).
func (f Frame) Obj(k string) map[string]any { m, _ := f.M[k].(map[string]any); return m }

// Arr returns member k as an array (nil when absent or not an array).
func (f Frame) Arr(k string) []any { a, _ := f.M[k].([]any); return a }

// Compact returns member k re-encoded as compact JSON ("" when absent).
func (f Frame) Compact(k string) string {
	v, ok := f.M[k]
	if !ok {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// String is the frame as received.
func (f Frame) String() string { return string(f.Raw) }

// Match tells whether a frame is the one a test waits for.
type Match func(Frame) bool

// Type matches frames of type typ.
func Type(typ string) Match { return func(f Frame) bool { return f.Type == typ } }

// TypeWith matches frames of type typ whose string members equal kv (key, value, key, value...).
func TypeWith(typ string, kv ...string) Match {
	return func(f Frame) bool {
		if f.Type != typ {
			return false
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if f.Str(kv[i]) != kv[i+1] {
				return false
			}
		}
		return true
	}
}

// Error matches error frames with code.
func Error(code string) Match { return TypeWith("error", "code", code) }

// Any matches every frame.
func Any(Frame) bool { return true }

// asMatch turns a type string, a Match or a func(Frame) bool into a Match.
func asMatch(m any) Match {
	switch m := m.(type) {
	case string:
		return Type(m)
	case Match:
		return m
	case func(Frame) bool:
		return m
	}
	panic(fmt.Sprintf("wiretest: %T is not a frame type or a Match", m))
}

// Event is one message the connection received: a frame, or a binary message of agent audio
// (SPEC 17), with its place in the connection's history and its arrival time.
type Event struct {
	Idx   int
	At    time.Time
	Audio []byte // agent audio; nil for a frame
	Frame Frame
}

// IsAudio reports whether the event is agent audio.
func (e Event) IsAudio() bool { return e.Audio != nil }

// Conn is one WebSocket connection to the broker, with everything it received. A frame is
// taken by the wait that matched it (Wait, Expect, WaitFrom) and no later wait matches it
// again; the history keeps it.
type Conn struct {
	t    testing.TB
	Name string
	// Welcome is the welcome the last Hello got (zero until then).
	Welcome Frame
	ws      *websocket.Conn
	tcp     net.Conn
	hc      *http.Client

	mu       sync.Mutex
	events   []Event // everything received, in order
	untaken  []int   // the indices of the frames no wait has taken yet, in order
	audio    int     // binary messages received
	notify   chan struct{}
	welcomed bool
	nextSeq  int64 // the seq the next frame after the welcome must carry
	lastSeq  int64
	ended    bool // session.ended arrived
	problems []string
	done     chan struct{} // closed when the reader stopped
	closeErr error
	status   websocket.StatusCode
}

// Dial opens a WebSocket connection to wsURL (ws://HOST:PORT/v1/ws) without sending anything.
// The connection is closed when the test ends; seq errors found on it fail the test.
func Dial(t testing.TB, wsURL, name string) *Conn {
	t.Helper()
	c, err := DialErr(t, wsURL, name)
	if err != nil {
		t.Fatalf("%s: dial %s: %v", name, wsURL, err)
	}
	return c
}

// DialErr is Dial returning the error (for goroutines that must not call t.Fatal).
func DialErr(t testing.TB, wsURL, name string) (*Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, tcp, hc, err := DialWebSocket(ctx, wsURL)
	if err != nil {
		return nil, err
	}
	c := &Conn{t: t, Name: name, ws: ws, tcp: tcp, hc: hc, notify: make(chan struct{}), done: make(chan struct{}), nextSeq: 1}
	go c.read()
	t.Cleanup(c.cleanup)
	return c, nil
}

// DialWebSocket opens a WebSocket connection to wsURL the way the test clients do: over a TCP
// connection of its own (no keep-alives, a 5 s connect timeout), with a read limit of 16 MiB;
// ctx bounds the handshake. It returns the connection, the TCP connection under it (to cut it
// abruptly, see Conn.Cut) and the HTTP client that carries it, whose idle connections the
// caller closes once done with ws. On error nothing is left open.
func DialWebSocket(ctx context.Context, wsURL string) (ws *websocket.Conn, tcp net.Conn, hc *http.Client, err error) {
	var mu sync.Mutex
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				mu.Lock()
				tcp = nc
				mu.Unlock()
			}
			return nc, err
		},
		DisableKeepAlives: true,
	}
	hc = &http.Client{Transport: tr}
	ws, _, err = websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, nil, nil, err
	}
	ws.SetReadLimit(16 << 20)
	mu.Lock()
	defer mu.Unlock()
	return ws, tcp, hc, nil
}

func (c *Conn) cleanup() {
	_ = c.ws.CloseNow()
	<-c.done
	c.hc.CloseIdleConnections()
	c.mu.Lock()
	problems := c.problems
	c.mu.Unlock()
	for _, p := range problems {
		c.t.Errorf("%s: %s", c.Name, p)
	}
}

// read records every message until the connection ends.
func (c *Conn) read() {
	defer close(c.done)
	for {
		typ, data, err := c.ws.Read(context.Background())
		now := time.Now()
		c.mu.Lock()
		if err != nil {
			c.closeErr = err
			c.status = websocket.CloseStatus(err)
			close(c.notify)
			c.notify = make(chan struct{})
			c.mu.Unlock()
			return
		}
		e := Event{Idx: len(c.events), At: now}
		if typ == websocket.MessageBinary {
			e.Audio = data // agent audio (SPEC 17): not a frame, no seq
			c.audio++
			if len(data) != g711.SamplesPer20ms {
				c.problems = append(c.problems, fmt.Sprintf("SPEC 17: an agent audio message of %d bytes, want 20 ms (%d bytes of µ-law)", len(data), g711.SamplesPer20ms))
			}
			if c.ended {
				c.problems = append(c.problems, "agent audio after session.ended")
			}
		} else {
			e.Frame = ParseFrame(data)
			c.check(e.Frame)
			c.untaken = append(c.untaken, e.Idx)
		}
		c.events = append(c.events, e)
		close(c.notify)
		c.notify = make(chan struct{})
		c.mu.Unlock()
	}
}

// check applies SPEC 2 — every frame but welcome carries seq, consecutive per slot (from 1 on
// a fresh slot, from last_seq+1 on a resumed one); frames before the welcome (a refused hello)
// belong to no slot and are not checked — and SPEC 3.6: session.ended is the last frame.
func (c *Conn) check(f Frame) {
	if c.ended {
		c.problems = append(c.problems, "frame after session.ended: "+trunc(f.String(), 300))
	}
	if f.Type == "session.ended" {
		c.ended = true
	}
	if f.Type == "welcome" {
		c.welcomed = true
		if f.Has("seq") {
			c.problems = append(c.problems, "welcome carries seq: "+f.String())
		}
		return
	}
	if !c.welcomed {
		return
	}
	seq := f.Int("seq")
	if seq != c.nextSeq {
		c.problems = append(c.problems, fmt.Sprintf("seq %d, want %d (consecutive): %s", seq, c.nextSeq, trunc(f.String(), 300)))
	}
	c.nextSeq = seq + 1
	c.lastSeq = seq
}

// Audio is the number of binary messages (agent audio, SPEC 17) received so far; they are not
// frames and are not queued.
func (c *Conn) Audio() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.audio
}

// AudioQuiet waits (at most DefaultTimeout) until no binary message has come for d: the agent's
// audio has played out.
func (c *Conn) AudioQuiet(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(DefaultTimeout)
	for {
		var last time.Time
		if e, ok := c.LastAudio(); ok {
			last = e.At
		}
		if time.Since(last) >= d {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: the agent's audio did not stop within %v", c.Name, DefaultTimeout)
		}
		time.Sleep(d / 4)
	}
}

// LastSeq is the seq of the newest frame received (what a resuming client sends as last_seq).
func (c *Conn) LastSeq() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastSeq
}

// SendRaw sends one text message as it is.
func (c *Conn) SendRaw(data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, data)
}

// SendBinary sends one binary message (caller audio, SPEC 17) as it is.
func (c *Conn) SendBinary(data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageBinary, data)
}

// Send sends v as one text message: []byte and string as they are, a frames.Frame through
// frames.Encode, anything else as JSON. A send that fails fails the test.
func (c *Conn) Send(v any) {
	c.t.Helper()
	if err := c.SendErr(v); err != nil {
		c.t.Fatalf("%s: send: %v", c.Name, err)
	}
}

// SendErr is Send returning the error.
func (c *Conn) SendErr(v any) error {
	var data []byte
	switch v := v.(type) {
	case []byte:
		data = v
	case string:
		data = []byte(v)
	case frames.Frame:
		b, err := frames.Encode(v)
		if err != nil {
			return err
		}
		data = b
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		data = b
	}
	return c.SendRaw(data)
}

// Hello sends a hello with the given members (protocol is added) and returns the welcome, or
// the error frame that refused it. A last_seq member sets where the seq check resumes.
func (c *Conn) Hello(members map[string]any) Frame {
	c.t.Helper()
	c.SendHello(members)
	return c.ExpectWelcome()
}

// SendHello sends a hello with the given members (protocol is added) without waiting for its
// answer (see ExpectWelcome), so that a test can send something else meanwhile.
func (c *Conn) SendHello(members map[string]any) {
	c.t.Helper()
	h, next := HelloFrame(members)
	c.mu.Lock()
	c.nextSeq = next
	c.mu.Unlock()
	c.Send(h)
}

// ExpectWelcome returns the answer to a hello sent with SendHello: the welcome, or the error
// frame that refused it.
func (c *Conn) ExpectWelcome() Frame {
	c.t.Helper()
	f := c.Expect(func(f Frame) bool { return f.Type == "welcome" || f.Type == "error" })
	if f.Type == "welcome" {
		c.Welcome = f
	}
	return f
}

// HelloFrame builds a hello frame: type and protocol (frames.Protocol) plus members, which may
// override them. It also returns the seq the first frame after the welcome must carry (SPEC 2):
// 1 on a fresh slot, last_seq+1 when members resume with a last_seq (an int, int64 or float64).
func HelloFrame(members map[string]any) (hello map[string]any, nextSeq int64) {
	hello = map[string]any{"type": "hello", "protocol": frames.Protocol}
	for k, v := range members {
		hello[k] = v
	}
	nextSeq = 1
	if ls, ok := members["last_seq"]; ok {
		nextSeq = toInt64(ls) + 1
	}
	return hello, nextSeq
}

func toInt64(v any) int64 {
	switch v := v.(type) {
	case int:
		return int64(v)
	case int64:
		return v
	case float64:
		return int64(v)
	}
	return 0
}

// Wait takes the first frame not taken yet that m matches (waiting for it up to timeout),
// leaving the others untaken. It fails when the connection ends or the timeout passes first.
func (c *Conn) Wait(timeout time.Duration, m any) (Frame, error) {
	match := asMatch(m)
	e, found, closed := c.take(0, timeout, match)
	switch {
	case found:
		return e.Frame, nil
	case closed != nil:
		return Frame{}, fmt.Errorf("%s: connection closed (%v) before the frame came; queued: %s", c.Name, closed, c.dumpQueue())
	}
	return Frame{}, fmt.Errorf("%s: no matching frame within %v; queued: %s", c.Name, timeout, c.dumpQueue())
}

// WaitFrom is Wait among the frames at index from or later (Mark), returning the event; its
// error shows what arrived from there on, with arrival times.
func (c *Conn) WaitFrom(from int, timeout time.Duration, m Match) (Event, error) {
	e, found, closed := c.take(from, timeout, m)
	switch {
	case found:
		return e, nil
	case closed != nil:
		return Event{}, fmt.Errorf("%s: connection closed (%v) before the frame came; received:%s", c.Name, closed, c.Dump(from))
	}
	return Event{}, fmt.Errorf("%s: no matching frame within %v; received:%s", c.Name, timeout, c.Dump(from))
}

// take waits up to timeout for the first untaken frame at index from or later that m
// matches, and takes it.
func (c *Conn) take(from int, timeout time.Duration, m Match) (Event, bool, error) {
	return c.await(timeout, func() (Event, bool) {
		for i, idx := range c.untaken {
			if idx >= from && m(c.events[idx].Frame) {
				c.untaken = append(c.untaken[:i:i], c.untaken[i+1:]...)
				return c.events[idx], true
			}
		}
		return Event{}, false
	})
}

// WaitFor waits up to timeout for the first event — frame or audio, taken or not — at index
// from or later that pick accepts. found is false when the timeout passed or the connection
// ended first (closed is then why it ended).
func (c *Conn) WaitFor(from int, timeout time.Duration, pick func(Event) bool) (e Event, found bool, closed error) {
	return c.await(timeout, func() (Event, bool) {
		for i := max(from, 0); i < len(c.events); i++ {
			if pick(c.events[i]) {
				return c.events[i], true
			}
		}
		return Event{}, false
	})
}

// await runs find (with c.mu held) at once and after each message until it finds, the
// timeout passes (found false) or the connection ends (closed: why).
func (c *Conn) await(timeout time.Duration, find func() (Event, bool)) (e Event, found bool, closed error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		e, found = find()
		ch, closed := c.notify, c.closeErr
		c.mu.Unlock()
		if found {
			return e, true, nil
		}
		if closed != nil {
			return Event{}, false, closed
		}
		select {
		case <-ch:
		case <-deadline.C:
			return Event{}, false, nil
		}
	}
}

// Events returns a copy of everything received so far, in order.
func (c *Conn) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.events...)
}

// Mark is the index the next message received will get.
func (c *Conn) Mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

// LastAudio is the newest agent audio message (ok false when none came yet).
func (c *Conn) LastAudio() (Event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.events) - 1; i >= 0; i-- {
		if c.events[i].IsAudio() {
			return c.events[i], true
		}
	}
	return Event{}, false
}

// SessionEnded reports whether session.ended arrived.
func (c *Conn) SessionEnded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

// Dump renders what arrived from index from on, with arrival times relative to the first
// message shown (runs of audio summarized).
func (c *Conn) Dump(from int) string {
	var b strings.Builder
	var t0, runStart, runEnd time.Time
	audio := 0
	flush := func() {
		if audio > 0 {
			fmt.Fprintf(&b, "\n  +%dms [%d audio until +%dms]", runStart.Sub(t0).Milliseconds(), audio, runEnd.Sub(t0).Milliseconds())
			audio = 0
		}
	}
	for _, e := range c.Events() {
		if e.Idx < from {
			continue
		}
		if t0.IsZero() {
			t0 = e.At
		}
		if e.IsAudio() {
			if audio == 0 {
				runStart = e.At
			}
			runEnd = e.At
			audio++
			continue
		}
		flush()
		fmt.Fprintf(&b, "\n  +%dms %s", e.At.Sub(t0).Milliseconds(), e.Frame)
	}
	flush()
	if b.Len() == 0 {
		return " (nothing)"
	}
	return b.String()
}

// Expect is Wait with DefaultTimeout that fails the test.
func (c *Conn) Expect(m any) Frame {
	c.t.Helper()
	f, err := c.Wait(DefaultTimeout, m)
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

// ExpectWithin is Expect with a timeout of its own.
func (c *Conn) ExpectWithin(d time.Duration, m any) Frame {
	c.t.Helper()
	f, err := c.Wait(d, m)
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

// Absent fails the test if a frame m matches is queued now or arrives within d.
func (c *Conn) Absent(d time.Duration, m any) {
	c.t.Helper()
	if f, err := c.Wait(d, m); err == nil {
		c.t.Fatalf("%s: unexpected frame %s", c.Name, f)
	}
}

// Next takes the next queued frame, whatever it is.
func (c *Conn) Next() Frame {
	c.t.Helper()
	return c.Expect(Match(Any))
}

// Drain takes every frame received so far.
func (c *Conn) Drain() {
	c.mu.Lock()
	c.untaken = nil
	c.mu.Unlock()
}

// Queued returns the frames no wait has taken yet.
func (c *Conn) Queued() []Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Frame, 0, len(c.untaken))
	for _, idx := range c.untaken {
		out = append(out, c.events[idx].Frame)
	}
	return out
}

// History returns every frame received so far, in order (agent audio left out).
func (c *Conn) History() []Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Frame
	for _, e := range c.events {
		if !e.IsAudio() {
			out = append(out, e.Frame)
		}
	}
	return out
}

func (c *Conn) dumpQueue() string {
	q := c.Queued()
	if len(q) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for i, f := range q {
		if i == 20 {
			fmt.Fprintf(&b, "\n  … %d more", len(q)-i)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(trunc(f.String(), 300))
	}
	return b.String()
}

// WaitClosed waits until the broker closed the connection and returns the close status (-1 when
// the connection ended without a close frame).
func (c *Conn) WaitClosed(timeout time.Duration) (websocket.StatusCode, error) {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.status, nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s: still open after %v", c.Name, timeout)
	}
}

// ExpectClosed fails the test unless the broker closes the connection with status within
// DefaultTimeout.
func (c *Conn) ExpectClosed(status websocket.StatusCode) {
	c.t.Helper()
	got, err := c.WaitClosed(DefaultTimeout)
	if err != nil {
		c.t.Fatal(err)
	}
	if got != status {
		c.mu.Lock()
		cerr := c.closeErr
		c.mu.Unlock()
		c.t.Fatalf("%s: closed with status %d, want %d (%v)", c.Name, got, status, cerr)
	}
}

// CloseReason is the reason of the close frame the broker sent ("" when none came).
func (c *Conn) CloseReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ce websocket.CloseError
	if errors.As(c.closeErr, &ce) {
		return ce.Reason
	}
	return ""
}

// IsClosed reports whether the connection has ended.
func (c *Conn) IsClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Cut drops the TCP connection abruptly (SO_LINGER 0: an RST, no close frame), as a crashed
// client or a dead network would.
func (c *Conn) Cut() {
	nc := c.tcp
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = nc.Close()
	<-c.done
}

// CloseNow drops the connection without a close frame and waits for its reader to stop.
func (c *Conn) CloseNow() {
	_ = c.ws.CloseNow()
	<-c.done
}

// Close closes the connection with a normal close frame.
func (c *Conn) Close() {
	_ = c.ws.Close(websocket.StatusNormalClosure, "bye")
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
