package mcp_test

// This file is the test environment: a broker on loopback with /mcp and /v1/ws on one HTTP
// server, a WebSocket host, and the HTTP calls of the broker's API the scenarios need.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/mcp"
	"github.com/backchannel-io/backchannel/broker/ws"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// waitLimit bounds every wait of a scenario for something the broker or a client does.
const waitLimit = 15 * time.Second

// syncBuffer is a bytes.Buffer safe for concurrent use (logs, a child's stderr).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is a running broker that serves /mcp next to /v1/ws and the HTTP API.
type env struct {
	t      *testing.T
	store  string
	b      *brokertest.Broker
	url    string // http://127.0.0.1:PORT
	mcpURL string // http://127.0.0.1:PORT/mcp
	wsURL  string // ws://127.0.0.1:PORT/v1/ws
	logs   *syncBuffer
	srv    *http.Server // the HTTP server of /mcp and /v1/ws
}

// suiteConfig is the broker configuration of the scenarios: calls go to the background only
// when their host defers them (BackgroundAfter is far beyond any scenario step), so that what
// a scenario sees does not depend on how fast the machine is.
func suiteConfig() broker.Config {
	return broker.Config{BackgroundAfter: 30 * time.Second}
}

// startEnv starts a broker over store with brokertest and serves its node — the WebSocket
// transport and the MCP facade, as `backchannel serve` mounts them — on a free loopback port of
// its own.
func startEnv(t *testing.T, store string, cfg broker.Config) *env {
	t.Helper()
	return startEnvWith(t, store, cfg, nil)
}

// startEnvWith is startEnv with the /mcp handler wrapped by wrap (when not nil).
func startEnvWith(t *testing.T, store string, cfg broker.Config, wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	return startEnvOpts(t, brokertest.Options{Store: store, Config: cfg}, wrap)
}

// startEnvOpts is startEnvWith with the brokertest options (a Redis client and key prefix
// shared with another env make two nodes of one store).
func startEnvOpts(t *testing.T, opts brokertest.Options, wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	return startEnvMCP(t, opts, mcp.Options{}, wrap)
}

// startEnvMCP is startEnvOpts with the facade's options (its Logger is the env's).
func startEnvMCP(t *testing.T, opts brokertest.Options, mo mcp.Options, wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	store := opts.Store
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts.Config.Logger = log
	b := brokertest.Start(t, opts)
	wsh := ws.NewHandler(b.Node, ws.Options{Logger: log})
	mo.Logger = log
	var facade http.Handler = mcp.NewHandler(b.Node, mo)
	if wrap != nil {
		facade = wrap(facade)
	}
	handler := b.Node.Handler(wsh, func(mux *http.ServeMux) {
		mux.Handle("/mcp", facade)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	e := &env{t: t, store: store, b: b, url: "http://" + ln.Addr().String(), logs: logs, srv: srv}
	b.Node.Advertise(e.url) // the server with /mcp: other nodes forward MCP requests here
	e.mcpURL = e.url + "/mcp"
	e.wsURL = "ws://" + ln.Addr().String() + "/v1/ws"
	// Runs before brokertest's own cleanup (and after the cleanups of the clients and hosts
	// the scenario made later): shut the node down as brokertest does, then this server.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Node.Shutdown(ctx, store != "redis")
		wsh.CloseAll(broker.StatusServiceRestart, "service restart")
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			var stacks strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
			t.Errorf("the HTTP server did not shut down within 5 s (a request of /mcp or /v1/ws still running): %v\n%s", err, stacks.String())
			_ = srv.Close()
		}
		if err := wsh.Wait(ctx); err != nil {
			t.Errorf("WebSocket handlers still running after shutdown: %v", err)
		}
		<-served
		if t.Failed() {
			if l := logs.String(); l != "" {
				t.Logf("broker log (warnings and errors):\n%s", l)
			}
		}
	})
	return e
}

// createSession is POST /v1/sessions with key: the session's id and join token.
func (e *env) createSession(key string) (id, joinToken string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/v1/sessions", strings.NewReader(`{}`))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		SessionID string `json:"session_id"`
		JoinToken string `json:"join_token"`
	}
	if resp.StatusCode != http.StatusCreated {
		raw, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("POST /v1/sessions: %s %s", resp.Status, raw)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.SessionID == "" || body.JoinToken == "" {
		e.t.Fatalf("POST /v1/sessions: body %+v (%v)", body, err)
	}
	return body.SessionID, body.JoinToken
}

// noKeepAlive is the HTTP client of the API calls: no idle connection outlives a call.
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: waitLimit}

// entry is one timeline entry.
type entry struct {
	Kind   string         `json:"kind"`
	CallID string         `json:"call_id"`
	Handle string         `json:"handle"`
	Detail map[string]any `json:"detail"`
}

// timeline is GET /v1/sessions/{id}/timeline with key: the status, the session id of the
// body and its entries.
func (e *env) timeline(id, key string) (status int, sessionID string, entries []entry) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url+"/v1/sessions/"+id+"/timeline", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, "", nil
	}
	var body struct {
		SessionID string  `json:"session_id"`
		Entries   []entry `json:"entries"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		e.t.Fatalf("timeline of %s: %v in %s", id, err, raw)
	}
	return resp.StatusCode, body.SessionID, body.Entries
}

// awaitEntry polls the timeline of session id until an entry satisfies match.
func (e *env) awaitEntry(id, what string, match func(entry) bool) entry {
	e.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		status, _, entries := e.timeline(id, brokertest.KeyA)
		if status != http.StatusOK {
			e.t.Fatalf("timeline of %s: status %d", id, status)
		}
		for _, en := range entries {
			if match(en) {
				return en
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the timeline of %s has no %s after %v: %+v", id, what, waitLimit, entries)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// frame is one frame a host received.
type frame map[string]any

func (f frame) str(k string) string { s, _ := f[k].(string); return s }

func (f frame) String() string {
	b, _ := json.Marshal(f)
	return string(b)
}

// host is a host connection over WebSocket /v1/ws.
type host struct {
	t       *testing.T
	c       *websocket.Conn
	in      chan frame
	done    chan struct{}
	backlog []frame // received, not yet taken by expect
	welcome frame
}

// dialHost connects a host, sends hello (with protocol and role filled in) and waits for its
// welcome (and tools.declared when it declares tools).
func (e *env) dialHost(hello map[string]any) *host {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, _, err := websocket.Dial(ctx, e.wsURL, nil)
	if err != nil {
		e.t.Fatalf("dial %s: %v", e.wsURL, err)
	}
	c.SetReadLimit(8 << 20)
	h := &host{t: e.t, c: c, in: make(chan frame, 4096), done: make(chan struct{})}
	go h.read()
	e.t.Cleanup(h.drop)
	hello["type"], hello["protocol"] = "hello", "backchannel.v1"
	if _, ok := hello["role"]; !ok {
		hello["role"] = "host"
	}
	h.send(hello)
	h.welcome = h.expect("welcome")
	if _, ok := hello["tools"]; ok {
		h.expect("tools.declared")
	}
	return h
}

func (h *host) read() {
	defer close(h.done)
	for {
		_, data, err := h.c.Read(context.Background())
		if err != nil {
			return
		}
		var f frame
		if json.Unmarshal(data, &f) == nil {
			h.in <- f
		}
	}
}

// drop closes the connection at once (no close handshake): a dropped transport.
func (h *host) drop() {
	_ = h.c.CloseNow()
	<-h.done
}

// send sends one frame.
func (h *host) send(f map[string]any) {
	h.t.Helper()
	data, err := json.Marshal(f)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.c.Write(ctx, websocket.MessageText, data); err != nil {
		h.t.Fatalf("host: sending %s: %v", data, err)
	}
}

// expect returns the first frame of type typ (an error frame fails the test unless typ is
// "error"); frames of other types stay in the backlog for later expects.
func (h *host) expect(typ string) frame {
	h.t.Helper()
	return h.expectMatch(typ, func(frame) bool { return true })
}

// expectMatch returns the first frame of type typ that satisfies match.
func (h *host) expectMatch(typ string, match func(frame) bool) frame {
	h.t.Helper()
	for i, f := range h.backlog {
		if f.str("type") == typ && match(f) {
			h.backlog = append(h.backlog[:i:i], h.backlog[i+1:]...)
			return f
		}
	}
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for {
		select {
		case f := <-h.in:
			if f.str("type") == typ && match(f) {
				return f
			}
			if f.str("type") == "error" && typ != "error" {
				h.t.Fatalf("host: error frame while waiting for %s: %s", typ, f)
			}
			h.backlog = append(h.backlog, f)
		case <-h.done:
			// The reader has stopped; frames it received before the close may still be
			// buffered (select picks at random between ready cases).
			for {
				select {
				case f := <-h.in:
					if f.str("type") == typ && match(f) {
						return f
					}
					h.backlog = append(h.backlog, f)
					continue
				default:
				}
				break
			}
			h.t.Fatalf("host: connection closed while waiting for %s (received %v)", typ, h.backlog)
		case <-timer.C:
			h.t.Fatalf("host: no %s within %v (received %v)", typ, waitLimit, h.backlog)
		}
	}
}

// expectNone fails if a frame of type typ arrives within d (or is in the backlog).
func (h *host) expectNone(typ string, d time.Duration) {
	h.t.Helper()
	for _, f := range h.backlog {
		if f.str("type") == typ {
			h.t.Fatalf("host: unexpected %s", f)
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case f := <-h.in:
			if f.str("type") == typ {
				h.t.Fatalf("host: unexpected %s", f)
			}
			h.backlog = append(h.backlog, f)
		case <-timer.C:
			return
		case <-h.done:
			return
		}
	}
}

// toolCall waits for the tool_call of tool name and returns it.
func (h *host) toolCall(name string) frame {
	h.t.Helper()
	return h.expectMatch("tool_call", func(f frame) bool { return f.str("name") == name })
}

// deferCall defers a call with handle and checks that the defer is accepted.
func (h *host) deferCall(callID, handle string) {
	h.t.Helper()
	h.send(map[string]any{"type": "tool_deferred", "call_id": callID, "handle": handle, "status_label": "test job"})
	ack := h.expectMatch("tool_deferred_ack", func(f frame) bool { return f.str("call_id") == callID })
	if ok, _ := ack["accepted"].(bool); !ok {
		h.t.Fatalf("host: defer of %s with handle %s rejected: %s", callID, handle, ack)
	}
}

// result sends the tool_result of a call with output (raw JSON).
func (h *host) result(callID, output string) {
	h.t.Helper()
	h.send(map[string]any{"type": "tool_result", "call_id": callID, "output": json.RawMessage(output)})
}

// progress sends a tool_progress note.
func (h *host) progress(callID, note string) {
	h.t.Helper()
	h.send(map[string]any{"type": "tool_progress", "call_id": callID, "note": note})
}

// The host tools of the scenarios.
var (
	// lookupTool is an instant lookup.
	lookupTool = map[string]any{"name": "lookup", "description": "Look something up.",
		"parameters": json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
	// slowTool is a background job.
	slowTool = map[string]any{"name": "slow", "description": "A slow job that runs in the background.",
		"parameters": json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		"deferred":   true, "expected_duration": "minutes"}
	// guardedTool needs spoken permission.
	guardedTool = map[string]any{"name": "guarded", "description": "An action the caller must approve.",
		"parameters":          json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}}}`),
		"requires_permission": true, "expected_duration": "seconds"}
)

// sessionWithHost creates a session with KeyA and attaches a host with its join token that
// declares tools.
func (e *env) sessionWithHost(tools ...map[string]any) (sessionID string, h *host) {
	e.t.Helper()
	id, join := e.createSession(brokertest.KeyA)
	decls := make([]any, len(tools))
	for i, t := range tools {
		decls[i] = t
	}
	h = e.dialHost(map[string]any{"session_id": id, "join_token": join, "tools": decls})
	return id, h
}

var handleSeq struct {
	sync.Mutex
	n int
}

// newHandle returns a handle no other scenario uses (handles are per tenant, and the tenants
// of a Redis shared by scenarios are the same).
func newHandle() string {
	handleSeq.Lock()
	defer handleSeq.Unlock()
	handleSeq.n++
	return fmt.Sprintf("job-%d-%d", time.Now().UnixNano(), handleSeq.n)
}
