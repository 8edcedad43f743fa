package backchannel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	backchannel "github.com/backchannel-io/backchannel/sdk/go"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit bounds every wait of these tests.
const waitLimit = 10 * time.Second

// forEachStore runs fn against a fresh broker of each store, in parallel.
func forEachStore(t *testing.T, fn func(t *testing.T, b *brokertest.Broker)) {
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			fn(t, brokertest.Start(t, brokertest.Options{Store: store}))
		})
	}
}

// testLogger discards logs unless BACKCHANNEL_SDK_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("BACKCHANNEL_SDK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// ctxT returns a context bounded by waitLimit.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// connect connects a host and closes it (waiting for Done) when the test ends.
func connect(t *testing.T, opts backchannel.Options) *backchannel.Host {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	h, err := backchannel.Connect(ctxT(t), opts)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { closeHost(t, h) })
	return h
}

// closeHost closes h and waits for Done.
func closeHost(t *testing.T, h *backchannel.Host) {
	t.Helper()
	if err := h.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case <-h.Done():
	case <-time.After(waitLimit):
		t.Errorf("host not done %s after Close", waitLimit)
	}
}

// schema is an object schema with optional properties.
var schema = json.RawMessage(`{"type":"object"}`)

// tool declares a tool with handler.
func tool(name string, deferred bool, handler backchannel.Handler) backchannel.Tool {
	return backchannel.Tool{
		Decl:    frames.ToolDecl{Name: name, Description: "test tool " + name, Parameters: schema, Deferred: deferred},
		Handler: handler,
	}
}

// gate is a dialer for Options.HTTPClient that the test controls: it keeps every TCP
// connection it made so that the test can cut them (an RST, like a dead network), can refuse
// or hold new dials to keep the host away, and can freeze what the host reads (bytes that
// arrive meanwhile are withheld, and lost if the connection is cut before a thaw).
type gate struct {
	mu    sync.Mutex
	conns []*gateConn
	mode  string        // "": dial; "refuse": fail at once; "hold": block until the dial's ctx ends
	thaw  chan struct{} // non-nil while frozen
	lose  bool          // writes are lost on the way (the broker never sees them)
	tr    *http.Transport

	refused atomic.Int64 // dials refused in mode "refuse"
}

// gateConn is one connection of a gate.
type gateConn struct {
	*net.TCPConn
	g    *gate
	dead chan struct{} // closed when it is closed or cut
	once sync.Once
}

// Close closes the connection and ends a withheld Read.
func (c *gateConn) Close() error {
	c.once.Do(func() { close(c.dead) })
	return c.TCPConn.Close()
}

// Read withholds what it read while the gate is frozen.
func (c *gateConn) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	c.g.mu.Lock()
	thaw := c.g.thaw
	c.g.mu.Unlock()
	if thaw != nil {
		select {
		case <-thaw:
		case <-c.dead:
			return 0, net.ErrClosed
		}
	}
	return n, err
}

// Write loses what it writes while the gate loses writes.
func (c *gateConn) Write(p []byte) (int, error) {
	c.g.mu.Lock()
	lose := c.g.lose
	c.g.mu.Unlock()
	if lose {
		return len(p), nil
	}
	return c.TCPConn.Write(p)
}

// loseWrites makes the host's writes vanish on the way to the broker (or not).
func (g *gate) loseWrites(on bool) {
	g.mu.Lock()
	g.lose = on
	g.mu.Unlock()
}

func newGate(t *testing.T) *gate {
	g := &gate{}
	d := &net.Dialer{}
	g.tr = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		g.mu.Lock()
		mode := g.mode
		g.mu.Unlock()
		switch mode {
		case "refuse":
			g.refused.Add(1)
			return nil, errors.New("test gate: network down")
		case "hold":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		gc := &gateConn{TCPConn: c.(*net.TCPConn), g: g, dead: make(chan struct{})}
		g.mu.Lock()
		g.conns = append(g.conns, gc)
		g.mu.Unlock()
		return gc, nil
	}}
	t.Cleanup(g.tr.CloseIdleConnections)
	return g
}

func (g *gate) client() *http.Client { return &http.Client{Transport: g.tr} }

func (g *gate) set(mode string) {
	g.mu.Lock()
	g.mode = mode
	g.mu.Unlock()
}

// freeze withholds what the host's connections read until unfreeze (or a cut).
func (g *gate) freeze() {
	g.mu.Lock()
	g.thaw = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) unfreeze() {
	g.mu.Lock()
	if g.thaw != nil {
		close(g.thaw)
		g.thaw = nil
	}
	g.mu.Unlock()
}

// cut resets every connection the gate made (SO_LINGER 0: the close sends an RST); what a
// frozen connection withheld is lost.
func (g *gate) cut() {
	g.mu.Lock()
	conns := g.conns
	g.conns = nil
	g.mu.Unlock()
	for _, c := range conns {
		_ = c.SetLinger(0)
		_ = c.Close()
	}
}

// agent is a text agent (SPEC 13) speaking raw frames over its own WebSocket.
type agent struct {
	t       *testing.T
	ws      *websocket.Conn
	in      chan frames.Frame
	backlog []frames.Frame
	done    chan struct{}
}

// newAgent attaches a text agent to the session.
func newAgent(t *testing.T, b *brokertest.Broker, sessionID, joinToken string) *agent {
	t.Helper()
	ctx := ctxT(t)
	ws, _, err := websocket.Dial(ctx, b.WSURL, nil)
	if err != nil {
		t.Fatalf("agent dial: %v", err)
	}
	ws.SetReadLimit(1 << 24)
	a := &agent{t: t, ws: ws, in: make(chan frames.Frame, 1024), done: make(chan struct{})}
	a.send(&frames.Hello{Protocol: frames.Protocol, Role: frames.RoleAgent, SessionID: sessionID, JoinToken: joinToken})
	go a.read()
	t.Cleanup(func() {
		ws.CloseNow()
		<-a.done
	})
	if _, ok := a.next(waitLimit).(*frames.Welcome); !ok {
		t.Fatalf("agent: no welcome")
	}
	return a
}

func (a *agent) read() {
	defer close(a.done)
	defer close(a.in)
	for {
		_, data, err := a.ws.Read(context.Background())
		if err != nil {
			return
		}
		f, err := frames.Decode(data)
		if err != nil {
			a.t.Errorf("agent: undecodable frame %s: %v", data, err)
			return
		}
		a.in <- f
	}
}

func (a *agent) send(f frames.Frame) {
	a.t.Helper()
	data, err := frames.Encode(f)
	if err != nil {
		a.t.Fatalf("agent: encode %s: %v", f.FrameType(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := a.ws.Write(ctx, websocket.MessageText, data); err != nil {
		a.t.Fatalf("agent: write: %v", err)
	}
}

// next returns the next frame (nil when none arrived within d).
func (a *agent) next(d time.Duration) frames.Frame {
	if len(a.backlog) > 0 {
		f := a.backlog[0]
		a.backlog = a.backlog[1:]
		return f
	}
	select {
	case f := <-a.in:
		return f
	case <-time.After(d):
		return nil
	}
}

// waitFor returns the first frame that match accepts; the frames it skips stay for later.
func (a *agent) waitFor(what string, match func(frames.Frame) bool) frames.Frame {
	a.t.Helper()
	for i, f := range a.backlog {
		if match(f) {
			a.backlog = append(a.backlog[:i:i], a.backlog[i+1:]...)
			return f
		}
	}
	deadline := time.After(waitLimit)
	for {
		select {
		case f, ok := <-a.in:
			if !ok {
				a.t.Fatalf("agent: connection closed while waiting for %s", what)
			}
			if match(f) {
				return f
			}
			a.backlog = append(a.backlog, f)
		case <-deadline:
			a.t.Fatalf("agent: no %s within %s (backlog: %s)", what, waitLimit, describe(a.backlog))
		}
	}
}

func describe(fs []frames.Frame) string {
	var parts []string
	for _, f := range fs {
		b, _ := frames.Encode(f)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, " ")
}

// call makes an agent.tool_call in the root conversation.
func (a *agent) call(callID, name string, args any) {
	a.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		a.t.Fatal(err)
	}
	a.send(&frames.AgentToolCall{CallID: callID, ConversationID: "root", Name: name, Arguments: raw})
}

// result waits for the agent.tool_result of callID of one of kinds.
func (a *agent) result(callID string, kinds ...frames.ToolResultKind) *frames.AgentToolResult {
	a.t.Helper()
	f := a.waitFor(fmt.Sprintf("agent.tool_result %s %v", callID, kinds), func(f frames.Frame) bool {
		r, ok := f.(*frames.AgentToolResult)
		if !ok || r.CallID != callID {
			return false
		}
		for _, k := range kinds {
			if r.Kind == k {
				return true
			}
		}
		return false
	})
	return f.(*frames.AgentToolResult)
}

// final returns the final result of callID: the result itself, or — when the call went to
// the background first (a busy machine can take longer than the broker's background_after) —
// the result consumed with wait.
func (a *agent) final(callID string) *frames.AgentToolResult {
	a.t.Helper()
	r := a.result(callID, frames.ResultKindResult, frames.ResultKindError, frames.ResultKindBackgroundPlaceholder)
	if r.Kind != frames.ResultKindBackgroundPlaceholder {
		return r
	}
	return a.waitResult("wait-"+callID, callID)
}

// waitResult consumes a background call's result with `wait {tool_call_id}`.
func (a *agent) waitResult(waitID, callID string) *frames.AgentToolResult {
	a.t.Helper()
	a.call(waitID, "wait", map[string]string{"tool_call_id": callID})
	return a.result(waitID, frames.ResultKindResult, frames.ResultKindError)
}

// recv waits for a value on ch.
func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("no %s within %s", what, waitLimit)
	}
	var zero T
	return zero
}

// closed waits for ch to be closed.
func closed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("%s: not closed within %s", what, waitLimit)
	}
}

// codeOf returns the code of the error frame err wraps ("" when none).
func codeOf(err error) frames.Code {
	var fe *frames.Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return ""
}
