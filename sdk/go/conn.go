package backchannel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/frames"
)

// This file holds the transport: dialing and the hello, the reader, the writer, the
// heartbeat watchdog, and reconnecting with backoff.

const (
	// dialTimeout bounds one dial and hello/welcome exchange.
	dialTimeout = 10 * time.Second
	// writeTimeout bounds one frame write; a write that takes longer drops the transport.
	writeTimeout = 10 * time.Second
	// readLimit is the largest server frame read (a tool_deferred_resume listing many jobs
	// with large arguments can be big; the broker's own hard limit is the same).
	readLimit = 64 << 20
	// Client-side pacing keeps the host under the broker's frame rate limit (SPEC 2: 100
	// frames/s sustained, burst 200), so that no frame is ever refused for rate.
	paceRate  = 80
	paceBurst = 100
)

// conn is one WebSocket connection of a Host.
type conn struct {
	ws     *websocket.Conn
	gen    uint64
	seen   atomic.Int64  // unix nanoseconds of the last frame or ping received
	closed chan struct{} // closed when the reader has ended
}

func (c *conn) touch() { c.seen.Store(time.Now().UnixNano()) }

// dial connects, sends hello and reads the answer: the welcome, or the refusal as an error
// wrapping the *frames.Error.
func (h *Host) dial(ctx context.Context, hello *frames.Hello) (*conn, *frames.Welcome, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c := &conn{closed: make(chan struct{})}
	c.touch()
	ws, _, err := websocket.Dial(ctx, h.url, &websocket.DialOptions{
		HTTPClient:     h.opts.HTTPClient,
		OnPingReceived: func(context.Context, []byte) bool { c.touch(); return true },
	})
	if err != nil {
		return nil, nil, fmt.Errorf("backchannel: cannot reach the broker at %s (check Options.URL and that the broker runs): %w", h.url, err)
	}
	ws.SetReadLimit(readLimit)
	c.ws = ws
	data, err := frames.Encode(hello)
	if err != nil {
		ws.CloseNow()
		return nil, nil, fmt.Errorf("backchannel: %w", err)
	}
	if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
		ws.CloseNow()
		return nil, nil, fmt.Errorf("backchannel: sending hello: %w", err)
	}
	for {
		typ, msg, err := ws.Read(ctx)
		if err != nil {
			ws.CloseNow()
			return nil, nil, fmt.Errorf("backchannel: waiting for the welcome: %w", err)
		}
		if typ != websocket.MessageText {
			continue
		}
		f, err := frames.Decode(msg)
		if err != nil {
			ws.CloseNow()
			return nil, nil, fmt.Errorf("backchannel: the broker's answer to hello: %w", err)
		}
		switch f := f.(type) {
		case *frames.Welcome:
			return c, f, nil
		case *frames.Error:
			ws.CloseNow()
			return nil, nil, brokerError("hello refused", f)
		default:
			ws.CloseNow()
			return nil, nil, fmt.Errorf("backchannel: the broker answered hello with %s instead of welcome", f.FrameType())
		}
	}
}

// attach makes c the host's connection after its welcome w. After a resume the writer sends
// only the sync barrier until it is answered (request.go).
func (h *Host) attach(c *conn, w *frames.Welcome, resumed bool) {
	h.mu.Lock()
	h.gen++
	c.gen = h.gen
	h.cur = c
	h.sessionID = w.SessionID
	h.resumeToken = w.ResumeToken
	if w.JoinToken != "" {
		h.joinToken = w.JoinToken
	}
	if w.ResumeWindowMS > 0 {
		h.resumeWindow = time.Duration(w.ResumeWindowMS) * time.Millisecond
	}
	if w.HeartbeatMS > 0 {
		h.heartbeat = time.Duration(w.HeartbeatMS) * time.Millisecond
	}
	h.sawDeferredResume = false
	if resumed {
		h.syncing = true
		h.syncReq = h.newBarrier(nil)
	}
	h.mu.Unlock()
	h.state.save() // the old token is void now: keep the new one before anything else
	kind := EventConnected
	if resumed {
		kind = EventResumed
	}
	h.log.Debug("backchannel: connected", "session", w.SessionID, "connection", w.ConnectionID, "resumed", resumed)
	h.events.push(Event{Kind: kind})
	h.wakeWriter()
}

// run is the host's supervisor: it serves connection after connection until the host stops.
func (h *Host) run(c *conn) {
	for c != nil {
		err := h.serve(c)
		if h.ctx.Err() != nil || h.isClosing() {
			return
		}
		h.mu.Lock()
		if h.cur == c {
			h.cur = nil
		}
		h.mu.Unlock()
		h.log.Info("backchannel: transport dropped; resuming", "err", err)
		h.events.push(Event{Kind: EventDropped, Err: err})
		c = h.reconnect(err)
	}
}

func (h *Host) isClosing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closing || h.stopped
}

// serve reads c until it fails, with its writer and watchdog running beside.
func (h *Host) serve(c *conn) error {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); h.writeLoop(c) }()
	go func() { defer wg.Done(); h.watch(c) }()
	var err error
	for {
		typ, data, rerr := c.ws.Read(h.ctx)
		if rerr != nil {
			err = rerr
			break
		}
		c.touch()
		if typ == websocket.MessageText {
			h.receive(data)
		}
	}
	c.ws.CloseNow()
	close(c.closed)
	wg.Wait()
	return err
}

// watch drops c when nothing (no frame, no ping) arrived for two heartbeats and a half: the
// broker pings every heartbeat (SPEC 3.4).
func (h *Host) watch(c *conn) {
	h.mu.Lock()
	hb := h.heartbeat
	h.mu.Unlock()
	limit := 2*hb + hb/2
	t := time.NewTicker(hb / 2)
	defer t.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
			if time.Since(time.Unix(0, c.seen.Load())) > limit {
				h.log.Info("backchannel: no ping from the broker; dropping the transport", "silent_for", limit)
				c.ws.CloseNow()
				return
			}
		}
	}
}

// wakeWriter tells the writer that requests are queued.
func (h *Host) wakeWriter() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// nextBatch takes what c's writer may send now, registered as written on c; ok is false when
// c is done.
func (h *Host) nextBatch(c *conn) (batch []*request, ok bool) {
	for {
		h.mu.Lock()
		if h.cur != c || h.stopped {
			h.mu.Unlock()
			return nil, false
		}
		if h.syncing {
			if r := h.syncReq; r != nil && !r.written {
				batch = []*request{r}
			}
		} else if len(h.queue) > 0 {
			batch, h.queue = h.queue, nil
		}
		if len(batch) > 0 {
			var covers []*request
			for _, r := range batch {
				if r.kind == silent {
					covers = append(covers, r)
				}
			}
			if len(covers) > 0 {
				batch = append(batch, h.newBarrier(covers))
			}
			for _, r := range batch {
				h.order++
				r.written, r.gen, r.order = true, c.gen, h.order
				h.pending[r.id] = r
			}
			h.mu.Unlock()
			return batch, true
		}
		h.mu.Unlock()
		select {
		case <-h.wake:
		case <-c.closed:
			return nil, false
		case <-h.ctx.Done():
			return nil, false
		}
	}
}

// unwrite puts requests a failed write never sent back at the front of the queue.
func (h *Host) unwrite(rs []*request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var back []*request
	for _, r := range rs {
		delete(h.pending, r.id)
		r.written = false
		if r.barrier || r.done {
			continue
		}
		back = append(back, r)
	}
	h.queue = append(back, h.queue...)
}

// writeLoop writes c's batches in order, paced under the broker's rate limit.
func (h *Host) writeLoop(c *conn) {
	p := pacer{tokens: paceBurst, last: time.Now()}
	for {
		batch, ok := h.nextBatch(c)
		if !ok {
			return
		}
		for i, r := range batch {
			if err := p.wait(c); err != nil {
				h.unwrite(batch[i:])
				return
			}
			ctx, cancel := context.WithTimeout(h.ctx, writeTimeout)
			err := c.ws.Write(ctx, websocket.MessageText, r.data)
			cancel()
			if err != nil {
				// r itself may have left: it stays pending and is settled after the resume.
				h.unwrite(batch[i+1:])
				c.ws.CloseNow()
				return
			}
		}
	}
}

// pacer is a token bucket for the writer.
type pacer struct {
	tokens float64
	last   time.Time
}

// wait takes one token, sleeping for it if needed; it fails when c closes.
func (p *pacer) wait(c *conn) error {
	now := time.Now()
	p.tokens = min(paceBurst, p.tokens+now.Sub(p.last).Seconds()*paceRate)
	p.last = now
	if p.tokens < 1 {
		d := time.Duration((1 - p.tokens) / paceRate * float64(time.Second))
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.closed:
			t.Stop()
			return errors.New("closed")
		}
		p.tokens = 1
		p.last = time.Now()
	}
	p.tokens--
	return nil
}

// reconnect resumes the slot on a new connection with backoff (SPEC 10, 15). It returns nil
// when the host stopped (or it stopped it: a refusal that retrying cannot fix, or the policy
// gave up).
func (h *Host) reconnect(cause error) *conn {
	h.mu.Lock()
	window := h.resumeWindow
	h.mu.Unlock()
	var b backoff.BackOff
	if h.opts.Backoff != nil {
		b = h.opts.Backoff()
	} else {
		b = defaultBackoff(window)
	}
	start := time.Now()
	last := cause
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			d := b.NextBackOff()
			if d == backoff.Stop {
				h.stop(fmt.Errorf("backchannel: gave up resuming after %s: %w", time.Since(start).Round(time.Millisecond), last))
				return nil
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-h.ctx.Done():
				t.Stop()
				return nil
			}
		}
		h.mu.Lock()
		hello := &frames.Hello{Protocol: frames.Protocol, Role: frames.RoleHost, SessionID: h.sessionID,
			ResumeToken: h.resumeToken, LastSeq: h.lastSeq}
		h.mu.Unlock()
		c, w, err := h.dial(h.ctx, hello)
		if err == nil {
			if h.isClosing() {
				c.ws.CloseNow()
				return nil
			}
			h.attach(c, w, true)
			return c
		}
		if h.ctx.Err() != nil {
			return nil
		}
		last = err
		if permanent(err) {
			h.stop(err)
			return nil
		}
		h.log.Debug("backchannel: resume attempt failed", "attempt", attempt+1, "err", err)
	}
}
