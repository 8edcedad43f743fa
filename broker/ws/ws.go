// Package ws is the WebSocket transport of the broker (github.com/coder/websocket): it accepts
// connections at /v1/ws, waits for the hello, and then runs one reader and one writer per
// connection. The writer's queue is bounded: a connection that does not keep up is closed as a
// slow consumer (1013) instead of slowing its session down. Pings every heartbeat; two missed
// pongs drop the transport (SPEC 3.4), which is not the end of its session (SPEC 10).
package ws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/frames"
)

// Options configure the transport.
type Options struct {
	// HelloTimeout is how long a new connection has to send hello (SPEC 3.2: 10 s).
	HelloTimeout time.Duration
	// HardReadLimit is the largest message read at all; bigger ones close the connection
	// with 1009 (default 64 MiB). Messages over the broker's frame limit but under this one are
	// discarded as they arrive and answered with limit_exceeded.
	HardReadLimit int64
	// WriteTimeout is how long one message's write may take before the connection is dropped
	// (its peer stopped reading; default 30 s). It is checked with the heartbeats, every
	// quarter second.
	WriteTimeout time.Duration
	Logger       *slog.Logger
}

// Handler serves /v1/ws for a node.
type Handler struct {
	node *broker.Node
	opts Options

	mu    sync.Mutex
	conns map[*conn]struct{}
	wg    sync.WaitGroup
	beats heartbeats
}

// NewHandler returns the /v1/ws handler of node.
func NewHandler(node *broker.Node, opts Options) *Handler {
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = 10 * time.Second
	}
	if opts.HardReadLimit <= 0 {
		opts.HardReadLimit = 64 << 20
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Handler{node: node, opts: opts, conns: make(map[*conn]struct{})}
}

// ServeHTTP accepts one WebSocket connection and runs it until it ends.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Counted before the upgrade: once the connection is hijacked, http.Server.Shutdown no
	// longer waits for it, and Wait must.
	h.wg.Add(1)
	wc, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// The Origin was checked before this handler ran: Node.Handler, which mounts it at
		// /v1/ws, puts every route behind one origin rule (the broker's own origin and
		// --allowed-origins, SPEC 18; broker/guard.go). coder/websocket's own check (the
		// Origin's host:port exactly as the Host is written, or a glob of OriginPatterns,
		// refused with a plain-text 403) would be a second rule that disagrees with it on
		// default ports and listed origins, so it is off.
		InsecureSkipVerify: true,
	})
	if err != nil {
		h.wg.Done()
		return
	}
	defer h.wg.Done()
	cfg := h.node.Config()
	wc.SetReadLimit(h.opts.HardReadLimit)
	c := &conn{ws: wc, log: h.opts.Logger, done: make(chan struct{}), writeTimeout: h.opts.WriteTimeout,
		maxQueued: int64(cfg.Limits.SendQueueBytes), frameLimit: cfg.Limits.MaxFrameBytes}
	h.track(c, true)
	defer h.track(c, false)
	c.run(h, h.node, h.opts.HelloTimeout, cfg.Heartbeat)
}

func (h *Handler) track(c *conn, add bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if add {
		h.conns[c] = struct{}{}
	} else {
		delete(h.conns, c)
	}
}

// CloseAll closes every connection still open (after the node has shut down).
func (h *Handler) CloseAll(code int, reason string) {
	for _, c := range h.all() {
		c.Close(code, reason)
	}
}

// all lists the open connections.
func (h *Handler) all() []*conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		cs = append(cs, c)
	}
	return cs
}

// AbortAll drops every connection at once, without a close frame (as a crashed process's
// connections drop; for fault tests).
func (h *Handler) AbortAll() {
	for _, c := range h.all() {
		c.Abort()
	}
}

// Wait waits until every connection's handler has returned, or ctx ends.
func (h *Handler) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// item is one entry of a connection's send queue: a text frame, or the close that ends it.
type item struct {
	data   []byte
	binary bool
	close  bool
	code   int
	reason string
}

// conn is one WebSocket connection: a broker.Transport.
type conn struct {
	ws         *websocket.Conn
	log        *slog.Logger
	queued     atomic.Int64 // bytes waiting to be written
	maxQueued  int64
	frameLimit int
	closing    atomic.Bool
	done       chan struct{} // closed when the writer is finished: its close item written, or a write failed
	doneOnce   sync.Once
	stopped    atomic.Bool // the reader is done: the writer stops too
	mu         sync.Mutex
	pending    []item // waiting to be written, in order
	writing    bool   // a writer goroutine runs (it exists only while there is something to write)
	// writeSince is when the write in progress began (UnixNano; 0: none). The heartbeats drop a
	// connection whose write has taken writeTimeout (stuck): a write has no context of its own,
	// which would cost a timer and a context.AfterFunc per message.
	writeSince   atomic.Int64
	writeTimeout time.Duration
}

// Send implements broker.Transport.
func (c *conn) Send(frame []byte) {
	if c.closing.Load() {
		return
	}
	if c.queued.Add(int64(len(frame))) > c.maxQueued {
		c.closing.Store(true)
		c.log.Warn("ws: send queue overflow, closing a slow consumer")
		go func() { _ = c.ws.Close(websocket.StatusCode(broker.StatusTryAgainLater), "slow consumer") }()
		return
	}
	c.enqueue(item{data: frame})
}

// SendAudio implements broker.Transport: agent audio as a binary message.
func (c *conn) SendAudio(chunk []byte) {
	if c.closing.Load() {
		return
	}
	if c.queued.Add(int64(len(chunk))) > c.maxQueued {
		c.queued.Add(-int64(len(chunk)))
		return // audio that cannot keep up is dropped, never queued without bound
	}
	c.enqueue(item{data: chunk, binary: true})
}

// Close implements broker.Transport: queued frames go first.
func (c *conn) Close(code int, reason string) {
	if c.closing.Swap(true) {
		return
	}
	c.enqueue(item{close: true, code: code, reason: reason})
}

// Abort implements broker.Transport.
func (c *conn) Abort() {
	c.closing.Store(true)
	_ = c.ws.CloseNow()
	c.doneOnce.Do(func() { close(c.done) }) // nothing more is written
}

// enqueue queues an item and starts the writer if none runs.
func (c *conn) enqueue(it item) {
	c.mu.Lock()
	c.pending = append(c.pending, it)
	start := !c.writing
	c.writing = true
	c.mu.Unlock()
	if start {
		go c.write()
	}
}

// take returns what is queued, or stops the writer when nothing is.
func (c *conn) take() []item {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.pending
	c.pending = nil
	if len(out) == 0 {
		c.writing = false
	}
	return out
}

// write writes queued items in order until none is left, a close item, or an error: a
// connection with nothing to send costs no goroutine.
func (c *conn) write() {
	for {
		items := c.take()
		if len(items) == 0 {
			return
		}
		for _, it := range items {
			if c.stopped.Load() {
				c.drop()
				return
			}
			if it.close {
				_ = c.ws.Close(websocket.StatusCode(it.code), truncate(it.reason, 120))
				c.drop()
				return
			}
			typ := websocket.MessageText
			if it.binary {
				typ = websocket.MessageBinary
			}
			c.writeSince.Store(time.Now().UnixNano())
			err := c.ws.Write(context.Background(), typ, it.data)
			c.writeSince.Store(0)
			c.queued.Add(-int64(len(it.data)))
			if err != nil {
				c.drop()
				return
			}
		}
	}
}

// drop discards what is queued for good: the writer ends and nothing more is written.
func (c *conn) drop() {
	c.doneOnce.Do(func() { close(c.done) })
	c.closing.Store(true)
	c.mu.Lock()
	c.pending = nil
	c.writing = true // no writer is started again
	c.mu.Unlock()
}

// waitWriter lets the writer send the refusal and the close, for at most 5 s (it returns as
// soon as the writer is finished, also when the connection broke under it).
func (c *conn) waitWriter() {
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.stopped.Store(true)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// run reads the hello, attaches the connection, then reads frames until the connection ends.
func (c *conn) run(h *Handler, node *broker.Node, helloTimeout, heartbeat time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := c.readHello(ctx, helloTimeout)
	if err != nil {
		c.Close(broker.StatusPolicy, fmt.Sprintf("hello expected within %v", helloTimeout))
		c.waitWriter()
		return
	}
	client := node.Hello(c, first)
	if client == nil {
		c.waitWriter()
		_ = c.ws.CloseNow()
		return
	}
	h.beats.add(c, heartbeat)
	defer h.beats.remove(c)
	for {
		// After the hello nothing cancels a read but the connection's end: no context to
		// watch (coder/websocket registers a context.AfterFunc per read for one that can end).
		m, err := c.read(context.Background())
		if err != nil {
			break
		}
		switch {
		case m.oversized && m.binary:
			// caller audio is 20 ms a message: one over the frame limit is dropped
		case m.oversized:
			client.Oversized(m.size, m.ref)
		case m.binary:
			client.ReceiveAudio(m.data)
		default:
			client.Receive(m.data)
		}
	}
	client.Dropped()
	c.closing.Store(true)
	c.stopped.Store(true)
	_ = c.ws.CloseNow()
}

// readHello reads the first text message within timeout. Reading has its own goroutine so the
// timeout does not cancel a read (which would close the connection with the wrong status).
func (c *conn) readHello(ctx context.Context, timeout time.Duration) ([]byte, error) {
	type res struct {
		data []byte
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		for {
			m, err := c.read(ctx)
			if err != nil || (!m.oversized && !m.binary) {
				ch <- res{m.data, err}
				return
			}
		}
	}()
	select {
	case r := <-ch:
		return r.data, r.err
	case <-time.After(timeout):
		return nil, errors.New("hello timeout")
	}
}

// message is one message read from the connection.
type message struct {
	data      []byte // the message (nil when oversized)
	size      int    // its size in bytes
	binary    bool   // caller audio rather than a text frame
	oversized bool   // over the frame limit: discarded as it arrived
	ref       string // when oversized: the id read from the part that was read
}

// read returns the next message: a text frame, or (binary) caller audio. A message over the
// frame limit is discarded as it arrives and reported as oversized, with its size. The message
// is read into a pooled buffer and copied out at its exact size: one allocation a message (a
// bytes.Buffer of its own grew twice for a frame of a few hundred bytes, a tenth of what the
// broker allocated per job lifecycle).
func (c *conn) read(ctx context.Context) (message, error) {
	typ, r, err := c.ws.Reader(ctx)
	if err != nil {
		return message{}, err
	}
	m := message{binary: typ == websocket.MessageBinary}
	buf := readBufs.Get().(*bytes.Buffer)
	defer putReadBuf(buf)
	n, err := io.Copy(buf, io.LimitReader(r, int64(c.frameLimit)+1))
	if err != nil {
		return message{}, err
	}
	if n > int64(c.frameLimit) {
		rest, err := io.Copy(io.Discard, r)
		if err != nil {
			return message{}, err
		}
		m.size, m.oversized = int(n+rest), true
		if !m.binary {
			m.ref = frames.PeekID(buf.Bytes())
		}
		return m, nil
	}
	m.data, m.size = bytes.Clone(buf.Bytes()), int(n)
	return m, nil
}

// readBufs are the buffers messages are read into (read).
var readBufs = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 4<<10)) }}

// putReadBuf returns a read buffer to the pool, unless a large message grew it.
func putReadBuf(b *bytes.Buffer) {
	if b.Cap() > 64<<10 {
		return
	}
	b.Reset()
	readBufs.Put(b)
}

// heartbeats pings every attached connection every heartbeat interval from one goroutine per
// handler (an idle connection costs no goroutine of its own); a ping runs on a short-lived
// goroutine, and two missed pongs in a row drop the transport (SPEC 3.4). The same loop drops
// a connection whose write is stuck (Options.WriteTimeout).
type heartbeats struct {
	mu      sync.Mutex
	conns   map[*conn]*beat
	running bool
}

type beat struct {
	every  time.Duration
	next   time.Time
	missed int
	busy   bool
	stuck  bool // dropped for a write that took too long
}

func (b *heartbeats) add(c *conn, every time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		b.conns = make(map[*conn]*beat)
	}
	b.conns[c] = &beat{every: every, next: time.Now().Add(every)}
	if !b.running {
		b.running = true
		go b.loop()
	}
}

func (b *heartbeats) remove(c *conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.conns, c)
}

// loop pings the connections that are due; it ends when none is left.
func (b *heartbeats) loop() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for range t.C {
		now := time.Now()
		b.mu.Lock()
		if len(b.conns) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		for c, bt := range b.conns {
			if since := c.writeSince.Load(); since != 0 && !bt.stuck && now.UnixNano()-since > int64(c.writeTimeout) {
				bt.stuck = true
				c.log.Warn("ws: a write did not finish in time, dropping the connection", "timeout", c.writeTimeout)
				go c.Abort()
			}
			if bt.busy || now.Before(bt.next) {
				continue
			}
			bt.busy, bt.next = true, now.Add(bt.every)
			go b.ping(c, bt)
		}
		b.mu.Unlock()
	}
}

func (b *heartbeats) ping(c *conn, bt *beat) {
	ctx, cancel := context.WithTimeout(context.Background(), bt.every)
	err := c.ws.Ping(ctx)
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	bt.busy = false
	if err == nil {
		bt.missed = 0
		return
	}
	bt.missed++
	if bt.missed >= 2 {
		c.Abort()
	}
}
