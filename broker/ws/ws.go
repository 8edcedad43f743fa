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
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
)

// Options configure the transport.
type Options struct {
	// HelloTimeout is how long a new connection has to send hello (SPEC 3.2: 10 s).
	HelloTimeout time.Duration
	// HardReadLimit is the largest message read at all; bigger ones close the connection
	// with 1009 (default 64 MiB). Messages over the broker's frame limit but under this one are
	// discarded as they arrive and answered with limit_exceeded.
	HardReadLimit int64
	Logger        *slog.Logger
}

// Handler serves /v1/ws for a node.
type Handler struct {
	node *broker.Node
	opts Options

	mu    sync.Mutex
	conns map[*conn]struct{}
	wg    sync.WaitGroup
}

// NewHandler returns the /v1/ws handler of node.
func NewHandler(node *broker.Node, opts Options) *Handler {
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = 10 * time.Second
	}
	if opts.HardReadLimit <= 0 {
		opts.HardReadLimit = 64 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Handler{node: node, opts: opts, conns: make(map[*conn]struct{})}
}

// ServeHTTP accepts one WebSocket connection and runs it until it ends.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	wc, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// Clients authenticate with keys and tokens inside the protocol, never with cookies,
		// so pages of any origin may connect (the browser SDK).
		InsecureSkipVerify: true,
	})
	if err != nil {
		return
	}
	h.wg.Add(1)
	defer h.wg.Done()
	cfg := h.node.Config()
	wc.SetReadLimit(h.opts.HardReadLimit)
	c := &conn{ws: wc, log: h.opts.Logger, queue: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{}),
		maxQueued: int64(cfg.Limits.SendQueueBytes), frameLimit: cfg.Limits.MaxFrameBytes}
	h.track(c, true)
	defer h.track(c, false)
	go c.writeLoop()
	c.run(h.node, h.opts.HelloTimeout, cfg.Heartbeat)
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
	h.mu.Lock()
	cs := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		cs = append(cs, c)
	}
	h.mu.Unlock()
	for _, c := range cs {
		c.Close(code, reason)
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
	queue      chan struct{} // a wake-up for the writer; the items are in pending
	queued     atomic.Int64  // bytes waiting in queue
	maxQueued  int64
	frameLimit int
	closing    atomic.Bool
	done       chan struct{} // closed when the writer stopped
	stop       chan struct{} // closed when the reader is done: the writer stops too
	mu         sync.Mutex
	pending    []item // overflow of queue, in order (the queue channel is only a wake-up)
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
}

func (c *conn) enqueue(it item) {
	c.mu.Lock()
	c.pending = append(c.pending, it)
	c.mu.Unlock()
	select {
	case c.queue <- struct{}{}:
	default:
	}
}

func (c *conn) take() []item {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.pending
	c.pending = nil
	return out
}

// writeLoop writes queued frames in order until a close item or an error.
func (c *conn) writeLoop() {
	defer close(c.done)
	for {
		select {
		case <-c.queue:
		case <-c.stop:
			return
		}
		for _, it := range c.take() {
			if it.close {
				_ = c.ws.Close(websocket.StatusCode(it.code), truncate(it.reason, 120))
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			typ := websocket.MessageText
			if it.binary {
				typ = websocket.MessageBinary
			}
			err := c.ws.Write(ctx, typ, it.data)
			cancel()
			c.queued.Add(-int64(len(it.data)))
			if err != nil {
				return
			}
		}
	}
}

// waitWriter lets the writer send the refusal and the close, for at most 5 s.
func (c *conn) waitWriter() {
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		close(c.stop)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// run reads the hello, attaches the connection, then reads frames until the connection ends.
func (c *conn) run(node *broker.Node, helloTimeout, heartbeat time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := c.readHello(ctx, helloTimeout)
	if err != nil {
		c.Close(broker.StatusPolicy, "hello expected within 10 s")
		c.waitWriter()
		return
	}
	client := node.Hello(c, first)
	if client == nil {
		c.waitWriter()
		_ = c.ws.CloseNow()
		return
	}
	go c.heartbeat(ctx, heartbeat)
	for {
		data, size, binary, err := c.read(ctx)
		if err != nil {
			break
		}
		switch {
		case binary:
			client.ReceiveAudio(data)
		case data == nil:
			client.Oversized(size)
		default:
			client.Receive(data)
		}
	}
	client.Dropped()
	c.closing.Store(true)
	close(c.stop)
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
			data, _, binary, err := c.read(ctx)
			if err != nil || (data != nil && !binary) {
				ch <- res{data, err}
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

// read returns the next message: a text frame, or (binary) caller audio. A message over the
// frame limit is discarded as it arrives and reported with data nil and its size.
func (c *conn) read(ctx context.Context) (data []byte, size int, binary bool, err error) {
	typ, r, err := c.ws.Reader(ctx)
	if err != nil {
		return nil, 0, false, err
	}
	binary = typ == websocket.MessageBinary
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r, int64(c.frameLimit)+1))
	if err != nil {
		return nil, 0, binary, err
	}
	if n > int64(c.frameLimit) {
		rest, err := io.Copy(io.Discard, r)
		if err != nil {
			return nil, 0, binary, err
		}
		if binary {
			return nil, int(n + rest), true, nil // an oversized audio message is dropped
		}
		return nil, int(n + rest), false, nil
	}
	return buf.Bytes(), int(n), binary, nil
}

// heartbeat pings every interval; two missed pongs in a row drop the transport.
func (c *conn) heartbeat(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := c.ws.Ping(pctx)
		cancel()
		if err == nil {
			missed = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		missed++
		if missed >= 2 {
			c.Abort()
			return
		}
	}
}
