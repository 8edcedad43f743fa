package faulttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// wsConn is one WebSocket connection whose every frame is recorded in its session's history.
type wsConn struct {
	rec *recorder
	idx int
	ws  *websocket.Conn

	wmu    sync.Mutex
	byUs   atomic.Bool // the harness closed it
	closed atomic.Bool // its Closed event is recorded
}

// wsURL turns a node's base URL into its /v1/ws URL.
func wsURL(base string) string {
	return "ws" + strings.TrimPrefix(base, "http") + "/v1/ws"
}

func dialConn(ctx context.Context, rec *recorder, role, base string) (*wsConn, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, wsURL(base), nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(16 << 20)
	return &wsConn{rec: rec, idx: rec.conn(role, base), ws: ws}, nil
}

// send writes one frame; the frame is recorded first, so the history has it even when the
// write fails half-way.
func (c *wsConn) send(ctx context.Context, b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.rec.add(c.idx, Sent, b)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// read reads one frame and records it; a failed read records the connection's end.
func (c *wsConn) read(ctx context.Context) ([]byte, error) {
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		c.recordClose(err)
		return nil, err
	}
	c.rec.add(c.idx, Recv, b)
	return b, nil
}

func (c *wsConn) recordClose(err error) {
	if c.closed.Swap(true) {
		return
	}
	n := CloseNote{By: "server"}
	if c.byUs.Load() {
		n.By = "client"
	}
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		n.Code, n.Reason = int(ce.Code), ce.Reason
	} else if err != nil {
		n.Err = err.Error()
	}
	c.rec.closed(c.idx, n)
}

// abort closes the connection at once, with no close handshake (a dropped transport).
func (c *wsConn) abort() {
	c.byUs.Store(true)
	_ = c.ws.CloseNow()
}

// closeNormally closes the connection with status 1000.
func (c *wsConn) closeNormally() {
	c.byUs.Store(true)
	_ = c.ws.Close(websocket.StatusNormalClosure, "done")
}

// Errors of link requests.
var (
	// errNotApplied: the request's connection dropped and the sync barrier after the resume
	// proved the broker never applied it; send it again.
	errNotApplied = errors.New("faulttest: request not applied")
	// errLost: the link gave up (its slot is gone, or the run is over).
	errLost = errors.New("faulttest: link lost")
)

// requestBound is how long a request may go unanswered on an open connection before the
// client gives the connection up.
const requestBound = 20 * time.Second

// pendingReq waits for the frame answering one request (the first with its id as ref).
type pendingReq struct {
	gen int
	ch  chan *frame // buffered 1; nil frame: not applied
}

// link is one client role of a session (host or agent): it keeps a connection to a live
// node, resumes its slot with resume_token and last_seq after every drop (SPEC 10), drops
// frames it has processed already (by seq), and tells requests that a resume proved
// unapplied to send again.
type link struct {
	s    *sessionRun
	role string
	// helloExtra adds members to a fresh (non-resuming) hello.
	helloExtra func(h map[string]any)
	// handle gets every frame not processed before, in seq order, on the reader goroutine;
	// it must not block.
	handle func(f *frame)
	// ready is called once a connection's sync barrier is answered, before any other sender
	// may use the connection; send writes on it directly (ready must not wait for answers).
	ready func(resumed bool, send func(map[string]any))
	// fresh is called when the link attached a fresh slot after its old one was refused.
	fresh func()

	mu       sync.Mutex
	conn     *wsConn
	gen      int
	readyCh  chan struct{} // closed while a connection is ready
	isReady  bool
	token    string
	lastSeq  int64
	pending  map[string]*pendingReq
	stopped  bool
	lost     bool
	ended    bool // session.ended received
	endedCh  chan struct{}
	dropCh   chan struct{}
	doneCh   chan struct{} // closed when the loop returned
	ids      atomic.Int64
	rng      *rand.Rand // the link loop's own (reconnect delays, replay depth)
	attempts int        // connections opened
	lastIdx  int        // the last connection opened (notes name it)
}

func newLink(s *sessionRun, role string, seed uint64) *link {
	return &link{s: s, role: role, readyCh: make(chan struct{}), pending: map[string]*pendingReq{},
		endedCh: make(chan struct{}), dropCh: make(chan struct{}, 1), doneCh: make(chan struct{}),
		lastIdx: -1, rng: rand.New(rand.NewPCG(seed, 0x11)), helloExtra: func(map[string]any) {}, handle: func(*frame) {}, ready: func(bool, func(map[string]any)) {}, fresh: func() {}}
}

func (l *link) nextID(prefix string) string {
	return fmt.Sprintf("%s-%s-%d", prefix, l.role[:1], l.ids.Add(1))
}

// start runs the link's connection loop.
func (l *link) start() { go l.loop() }

// loop connects, serves the connection until it ends, and reconnects, until the link stops.
func (l *link) loop() {
	defer close(l.doneCh)
	ctx := l.s.run.ctx
	var failingSince time.Time
	backoff := 50 * time.Millisecond
	for {
		l.mu.Lock()
		stop := l.stopped || l.ended
		l.mu.Unlock()
		if stop || ctx.Err() != nil {
			l.giveUp("")
			return
		}
		conn, outcome, detail := l.connect(ctx)
		switch outcome {
		case connOK:
			if l.serve(ctx, conn) {
				failingSince, backoff = time.Time{}, 50*time.Millisecond
			} else {
				// A welcome but no answer to the sync barrier: as bad as no welcome.
				if failingSince.IsZero() {
					failingSince = time.Now()
				}
				if time.Since(failingSince) > l.s.run.cfg.reconnectBound() {
					l.s.rec.note(conn.idx, HarnessNote{Note: NoteGaveUp, Role: l.role,
						Text: fmt.Sprintf("no answered sync barrier for %v", l.s.run.cfg.reconnectBound())})
					l.giveUp("")
					return
				}
			}
			// A short pause, so that frames queue in the slot's outbox while we are away.
			l.sleep(ctx, time.Duration(l.rng.IntN(200))*time.Millisecond)
			continue
		case connEnded:
			l.markEnded()
			l.giveUp("")
			return
		case connRefused:
			if l.role == "host" && l.token != "" {
				l.s.rec.note(l.noteConn(conn), HarnessNote{Note: NoteSlotLost, Role: l.role, Text: detail})
				l.mu.Lock()
				l.token, l.lastSeq = "", 0
				l.mu.Unlock()
				l.failPending(-1)
				l.fresh()
				continue
			}
			l.s.rec.note(l.noteConn(conn), HarnessNote{Note: NoteSlotLost, Role: l.role, Text: detail})
			l.giveUp(detail)
			return
		case connRetry:
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if time.Since(failingSince) > l.s.run.cfg.reconnectBound() {
				l.s.rec.note(l.noteConn(conn), HarnessNote{Note: NoteGaveUp, Role: l.role,
					Text: fmt.Sprintf("no welcome for %v: %s", l.s.run.cfg.reconnectBound(), detail)})
				l.giveUp(detail)
				return
			}
			l.sleep(ctx, backoff/2+time.Duration(l.rng.Int64N(int64(backoff))))
			backoff = min(backoff*2, time.Second)
		}
	}
}

// noteConn is the connection a note about conn names: conn, or the last one opened.
func (l *link) noteConn(conn *wsConn) int {
	if conn != nil {
		return conn.idx
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastIdx
}

func (l *link) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// giveUp marks the link lost: every request and send fails from now on.
func (l *link) giveUp(string) {
	l.mu.Lock()
	l.lost = true
	if !l.isReady {
		close(l.readyCh) // wake the senders: they see lost
		l.isReady = true
	}
	l.mu.Unlock()
	l.failPending(-1)
}

func (l *link) markEnded() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		l.ended = true
		close(l.endedCh)
	}
}

type connOutcome int

const (
	connOK connOutcome = iota
	connRetry
	connRefused // resume refused for good
	connEnded   // session_ended
)

// connect dials a random live node and says hello: a resume when the link has a token.
func (l *link) connect(ctx context.Context) (*wsConn, connOutcome, string) {
	base := l.s.run.pick()
	if base == "" {
		return nil, connRetry, "no live node"
	}
	conn, err := dialConn(ctx, l.s.rec, l.role, base)
	if err != nil {
		return nil, connRetry, "dial: " + err.Error()
	}
	l.mu.Lock()
	l.attempts++
	l.lastIdx = conn.idx
	token, lastSeq := l.token, l.lastSeq
	l.mu.Unlock()
	h := map[string]any{"type": "hello", "id": l.nextID("hello"), "protocol": "backchannel.v1", "role": l.role,
		"session_id": l.s.id}
	if token != "" {
		// Sometimes resume from a little before what was processed: the replay must then
		// repeat those frames byte for byte (SPEC 10).
		if l.rng.IntN(3) == 0 {
			lastSeq = max(0, lastSeq-int64(1+l.rng.IntN(3)))
		}
		h["resume_token"], h["last_seq"] = token, lastSeq
	} else {
		h["join_token"] = l.s.joinToken
		l.helloExtra(h)
	}
	if err := conn.send(ctx, encode(h)); err != nil {
		conn.abort()
		_, _ = conn.read(ctx)
		return conn, connRetry, "hello: " + err.Error()
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	b, err := conn.read(rctx)
	cancel()
	if err != nil {
		conn.abort()
		return conn, connRetry, "no answer to hello: " + err.Error()
	}
	f := parseFrame(b)
	if f.Type == "welcome" {
		l.mu.Lock()
		l.token = f.str("resume_token")
		l.mu.Unlock()
		return conn, connOK, ""
	}
	// A refusal: the broker closes the connection; read its close.
	conn.abort()
	_, _ = conn.read(ctx)
	code := f.str("code")
	detail := code + ": " + f.str("message")
	switch {
	case code == "internal" && f.bool("retryable"):
		return conn, connRetry, detail
	case code == "session_ended":
		return conn, connEnded, detail
	case code == "not_found":
		// The session exists (the harness made it): a violation the checker reports from
		// the frames; trying again keeps the session under test.
		return conn, connRetry, detail
	}
	return conn, connRefused, detail
}

// serve runs one connection: reads frames, sends the sync barrier, and waits for the end;
// it reports whether the barrier was answered.
func (l *link) serve(ctx context.Context, conn *wsConn) bool {
	l.mu.Lock()
	l.gen++
	gen := l.gen
	l.conn = conn
	resumed := gen > 1
	l.lastIdx = conn.idx
	l.mu.Unlock()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			b, err := conn.read(ctx)
			if err != nil {
				return
			}
			l.dispatch(parseFrame(b))
		}
	}()
	// The sync barrier (docs/protocol.md section 6): once it is answered the replay is over,
	// and a request of an older connection still unanswered was never applied.
	bid := l.nextID("sync")
	p := &pendingReq{gen: gen, ch: make(chan *frame, 1)}
	l.mu.Lock()
	l.pending[bid] = p
	l.mu.Unlock()
	barrier := encode(map[string]any{"type": "job.cancel", "id": bid, "call_id": barrierCallID})
	synced := false
	if err := conn.send(ctx, barrier); err == nil {
		select {
		case f := <-p.ch:
			synced = f != nil
		case <-readDone:
		case <-ctx.Done():
		case <-time.After(l.s.run.cfg.barrierBound()):
			l.s.rec.note(conn.idx, HarnessNote{Note: NoteStalled, Role: l.role,
				Text: fmt.Sprintf("sync barrier %s unanswered for %v on an open connection", bid, l.s.run.cfg.barrierBound())})
		}
	}
	if synced {
		l.failPending(gen)
		l.ready(resumed, func(f map[string]any) { _ = conn.send(ctx, encode(f)) })
		l.mu.Lock()
		l.isReady = true
		close(l.readyCh)
		l.mu.Unlock()
		select {
		case <-readDone:
		case <-l.dropCh:
		case <-ctx.Done():
		}
	}
	conn.abort()
	<-readDone
	l.mu.Lock()
	if l.isReady && !l.lost {
		l.readyCh = make(chan struct{})
		l.isReady = false
	}
	l.conn = nil
	l.mu.Unlock()
	return synced
}

// failPending tells the requests sent on connections older than gen (all, for gen -1) that
// they were never applied.
func (l *link) failPending(gen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, p := range l.pending {
		if gen < 0 || p.gen < gen {
			delete(l.pending, id)
			p.ch <- nil
		}
	}
}

// dispatch handles one received frame on the reader goroutine.
func (l *link) dispatch(f *frame) {
	if f.Type == "welcome" {
		return
	}
	l.mu.Lock()
	if seq := f.seq(); seq > 0 {
		if seq <= l.lastSeq {
			l.mu.Unlock()
			return // replayed: processed before
		}
		l.lastSeq = seq
	}
	var p *pendingReq
	if ref := f.str("ref"); ref != "" {
		if p = l.pending[ref]; p != nil {
			delete(l.pending, ref)
		}
	}
	l.mu.Unlock()
	if p != nil {
		p.ch <- f
	}
	l.handle(f)
	if f.Type == "session.ended" {
		l.markEnded()
	}
}

// waitReady returns the ready connection and its generation.
func (l *link) waitReady(ctx context.Context) (*wsConn, int, error) {
	for {
		l.mu.Lock()
		if l.lost || l.stopped {
			l.mu.Unlock()
			return nil, 0, errLost
		}
		ch, ready, conn, gen := l.readyCh, l.isReady, l.conn, l.gen
		l.mu.Unlock()
		if ready && conn != nil {
			return conn, gen, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, 0, errLost
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// send writes a frame on the ready connection, waiting for one.
func (l *link) send(f map[string]any) error {
	ctx := l.s.run.ctx
	conn, _, err := l.waitReady(ctx)
	if err != nil {
		return err
	}
	return conn.send(ctx, encode(f))
}

// request sends the frame build makes (with a fresh id) and returns the frame answering it
// (the first with that id as ref), sending it again while a resume proves it unapplied.
func (l *link) request(prefix string, build func(id string) map[string]any) (*frame, error) {
	ctx := l.s.run.ctx
	for {
		conn, gen, err := l.waitReady(ctx)
		if err != nil {
			return nil, err
		}
		id := l.nextID(prefix)
		p := &pendingReq{gen: gen, ch: make(chan *frame, 1)}
		l.mu.Lock()
		l.pending[id] = p
		l.mu.Unlock()
		// A failed write means the connection is dying: the resume's barrier will tell
		// whether the frame got through.
		_ = conn.send(ctx, encode(build(id)))
		if f, err := l.await(ctx, conn, id, p); f != nil || err != nil {
			return f, err
		}
	}
}

// await waits for the answer of request id; after requestBound on a connection that stays
// open it notes the stall and drops the connection (a client's read timeout), then goes on
// waiting: the resume's barrier tells whether the request was applied. A nil frame and nil
// error mean it was not.
func (l *link) await(ctx context.Context, conn *wsConn, id string, p *pendingReq) (*frame, error) {
	timeout := time.After(requestBound)
	for {
		select {
		case f := <-p.ch:
			if f == nil && l.isLost() {
				return nil, errLost
			}
			return f, nil
		case <-ctx.Done():
			return nil, errLost
		case <-timeout:
			l.mu.Lock()
			same := l.conn == conn
			l.mu.Unlock()
			if same {
				l.s.rec.note(conn.idx, HarnessNote{Note: NoteStalled, Role: l.role,
					Text: fmt.Sprintf("request %s unanswered for %v on an open connection", id, requestBound)})
				l.drop()
			}
			timeout = nil
		}
	}
}

// silent sends a frame that is answered only when it fails (tool_result, tool_progress),
// followed by a sync barrier: it returns the error frame answering it, nil once it is known
// applied, or errNotApplied when its connection dropped first (then it may or may not have
// been applied).
func (l *link) silent(prefix string, f map[string]any) (*frame, error) {
	ctx := l.s.run.ctx
	conn, gen, err := l.waitReady(ctx)
	if err != nil {
		return nil, err
	}
	id, bid := l.nextID(prefix), l.nextID("bar")
	f["id"] = id
	p := &pendingReq{gen: gen, ch: make(chan *frame, 1)}
	b := &pendingReq{gen: gen, ch: make(chan *frame, 1)}
	l.mu.Lock()
	l.pending[id], l.pending[bid] = p, b
	l.mu.Unlock()
	_ = conn.send(ctx, encode(f))
	_ = conn.send(ctx, encode(map[string]any{"type": "job.cancel", "id": bid, "call_id": barrierCallID}))
	got, err := l.await(ctx, conn, bid, b)
	if err != nil {
		return nil, err
	}
	select {
	case e := <-p.ch:
		if e != nil {
			return e, nil
		}
		return nil, errNotApplied
	default:
	}
	l.mu.Lock()
	delete(l.pending, id)
	l.mu.Unlock()
	if got == nil {
		if l.isLost() {
			return nil, errLost
		}
		return nil, errNotApplied
	}
	return nil, nil
}

// barrier sends a sync barrier and waits for its answer.
func (l *link) barrier() error {
	_, err := l.request("final", func(id string) map[string]any {
		return map[string]any{"type": "job.cancel", "id": id, "call_id": barrierCallID}
	})
	return err
}

func (l *link) isLost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost || l.stopped
}

// drop closes the current connection abruptly (the link then resumes).
func (l *link) drop() {
	select {
	case l.dropCh <- struct{}{}:
	default:
	}
}

// stop ends the link: its connection is closed normally and it does not reconnect.
func (l *link) stop() {
	l.mu.Lock()
	l.stopped = true
	conn := l.conn
	l.mu.Unlock()
	if conn != nil {
		conn.closeNormally()
	}
	l.drop()
	select {
	case <-l.doneCh:
	case <-time.After(10 * time.Second):
	}
}
