// Package mcp is the MCP facade of the broker (SPEC 14): `/mcp` serves the Model Context
// Protocol over Streamable HTTP with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk) for text agents that speak MCP. An MCP client is its
// session's root conversation: it sees the session's host tools plus `wait`, `cancel` and
// `status`, gets the texts of SPEC 13 as text content (isError for `error:` results), and
// receives every prompt queued for the session in the header `pending_prompts` of its next
// result.
//
// Authentication is `Authorization: Bearer <api key>` on every request. The session is named
// by the header `Backchannel-Session` at initialize (a new session is created when it is
// absent, and its id is returned in the same header); later requests are bound to it through
// the MCP session (`Mcp-Session-Id`). Only an `initialize` request binds a session: any other
// request without an MCP session (`server/discover`, a malformed body) is answered by the SDK
// on a server that is bound to none.
//
// The agent slot belongs to the conversation, not to one MCP session: an initialize naming a
// session whose conversation another MCP session holds takes it over (the old MCP session is
// closed, its open requests end with JSON-RPC error -32000 "session taken over"). When an MCP
// session ends (DELETE, mcp_idle_ms without a request or an open stream, a takeover) its open
// requests are abandoned — a call is cancelled with reason agent_request, a wait only stops
// waiting — and the conversation stays for the session's next agent; when the Backchannel
// session ends, the open requests are answered and the MCP session is closed.
//
// go-sdk v1.8.0 lacks what SPEC 14 asks in two places, which the facade adds around it: the
// front layer (front.go) answers every malformed or unknown request with a JSON-RPC error and
// keeps the stream of a blocking request alive; MCP Tasks (tasks.go) are the SDK's custom
// methods plus a middleware for task-augmented tools/call.
package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/frames"
)

// SessionHeader names the Backchannel session of an MCP client (SPEC 14).
const SessionHeader = broker.SessionHeaderName

// mcpSessionHeader is the Streamable HTTP transport's session header.
const mcpSessionHeader = "Mcp-Session-Id"

// maxBodyBytes bounds the body of a request without an MCP session, which the facade reads to
// tell an initialize from anything else (the SDK's own default limit).
const maxBodyBytes = sdk.DefaultMaxRequestBodyBytes

// Options configure a Handler.
type Options struct {
	// Logger logs the facade's troubles (slog.Default when nil).
	Logger *slog.Logger
	// KeepAlive is the longest a blocking request's event stream goes without a write (SPEC 14:
	// at least every 15 s; DefaultKeepAlive when 0).
	KeepAlive time.Duration
	// Idle is how long an MCP session with no request and no open stream lives (SPEC 14:
	// mcp_idle_ms; the node's Config.MCPIdle when 0).
	Idle time.Duration
}

// DefaultKeepAlive is the default of Options.KeepAlive.
const DefaultKeepAlive = 15 * time.Second

// Handler serves /mcp for a node.
type Handler struct {
	node      *broker.Node
	log       *slog.Logger
	keepAlive time.Duration
	idle      time.Duration
	stream    *sdk.StreamableHTTPHandler
	// unbound serves the requests without an MCP session that are not initialize (such as
	// server/discover): it is bound to no Backchannel session.
	unbound *sdk.Server

	// modern serves the protocol of 2026-07-28 (modern.go).
	modern *modern

	mu       sync.Mutex
	sessions map[string]*binding // by Mcp-Session-Id
}

// binding is an MCP session's Backchannel session.
type binding struct {
	tenant string
	id     string // the Mcp-Session-Id
	port   *broker.AgentPort
	server *sdk.Server

	// ctx ends when the MCP session ends: the requests still open are abandoned.
	ctx     context.Context
	cancel  context.CancelFunc
	release sync.Once

	// ss is the SDK's session, once initialize succeeded.
	ss atomic.Pointer[sdk.ServerSession]

	mu      sync.Mutex
	posts   int           // POST requests of the MCP session being served
	quiet   chan struct{} // closed when posts drops to zero (made by whoever waits for it)
	streams []*streamWriter
	idleFor time.Duration // mcp_idle_ms
	timer   *time.Timer   // runs while no request and no stream is open
	// afterFunc starts the timer: time.AfterFunc when nil (a test holds stopped timers with it).
	afterFunc func(time.Duration, func()) *time.Timer
	onIdle    func()
	gone      bool // released: no timer is armed again
}

// enter counts a POST request of the MCP session in; leave counts it out.
func (b *binding) enter() {
	b.mu.Lock()
	b.posts++
	b.stopTimerLocked()
	b.mu.Unlock()
}

func (b *binding) leave() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.posts--
	if b.posts == 0 && b.quiet != nil {
		close(b.quiet)
		b.quiet = nil
	}
	b.armLocked()
}

// openStream counts a standalone stream (GET) in, until closeStream.
func (b *binding) openStream(s *streamWriter) {
	b.mu.Lock()
	b.streams = append(b.streams, s)
	b.stopTimerLocked()
	b.mu.Unlock()
}

func (b *binding) closeStream(s *streamWriter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, x := range b.streams {
		if x == s {
			b.streams = append(b.streams[:i:i], b.streams[i+1:]...)
			break
		}
	}
	b.armLocked()
}

// notify writes a notification of the facade's own on the MCP session's standalone streams.
func (b *binding) notify(method string, params any) {
	data, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", method, params})
	if err != nil {
		return
	}
	b.mu.Lock()
	streams := slices.Clone(b.streams)
	b.mu.Unlock()
	for _, s := range streams {
		s.event(data)
	}
}

// armLocked starts the idle timer when nothing of the MCP session is open (SPEC 14).
func (b *binding) armLocked() {
	if b.gone || b.posts > 0 || len(b.streams) > 0 || b.timer != nil || b.onIdle == nil {
		return
	}
	after := b.afterFunc
	if after == nil {
		after = time.AfterFunc
	}
	// The timer holds the binding weakly: Go keeps a stopped timer, with its function, until
	// the moment it was due (mcp_idle, minutes), and a released binding — its port, its
	// session, their tools — must not live on in it. While the binding is in use the handler
	// holds it.
	wb := weak.Make(b)
	b.timer = after(b.idleFor, func() {
		if b := wb.Value(); b != nil {
			b.expire()
		}
	})
}

func (b *binding) stopTimerLocked() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
}

// expire closes an MCP session that stayed idle for mcp_idle_ms.
func (b *binding) expire() {
	b.mu.Lock()
	fire := !b.gone && b.posts == 0 && len(b.streams) == 0 && b.timer != nil
	b.timer = nil
	fn := b.onIdle
	b.mu.Unlock()
	if fire {
		fn()
	}
}

// idle is closed once no POST request of the MCP session is being served: their responses
// (written before the SDK's handler returns) went out.
func (b *binding) idle() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.posts == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if b.quiet == nil {
		b.quiet = make(chan struct{})
	}
	return b.quiet
}

// answerGrace bounds how long the MCP session of an ended Backchannel session stays open for
// the answers of its open requests to go out.
const answerGrace = 5 * time.Second

// answerLinger is how long that MCP session stays open once the answers went out.
const answerLinger = 250 * time.Millisecond

type ctxKey struct{}

// New returns the /mcp handler of node.
func New(node *broker.Node, log *slog.Logger) *Handler {
	return NewHandler(node, Options{Logger: log})
}

// NewHandler returns the /mcp handler of node with opts.
func NewHandler(node *broker.Node, opts Options) *Handler {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.Idle <= 0 {
		opts.Idle = node.Config().MCPIdle
	}
	h := &Handler{node: node, log: log, keepAlive: opts.KeepAlive, idle: opts.Idle, sessions: make(map[string]*binding)}
	h.unbound = sdk.NewServer(implementation, &sdk.ServerOptions{
		Instructions: instructions,
		Capabilities: capabilities(),
	})
	// The SDK's DNS-rebinding protection (a request that arrived on a loopback address must
	// name a loopback Host) stays off: the broker's own rules, which Node.Handler puts in front
	// of /mcp as of every route (SPEC 18, broker/guard.go), are the one rule. In dev mode —
	// the only mode with a key a page could know — they refuse every Host that is not
	// loopback, on every address; with API keys a rebound page has no key, and the SDK's rule
	// would refuse a proxy on the same machine that passes the public Host on. Its
	// cross-origin protection is off too (nil): the guard checks Origin against the broker's
	// own origin and --allowed-origins.
	h.stream = sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		if srv, ok := r.Context().Value(ctxKey{}).(*sdk.Server); ok {
			return srv
		}
		return nil
	}, &sdk.StreamableHTTPOptions{Logger: log, DisableLocalhostProtection: true})
	h.modern = newModern(h)
	return h
}

// implementation is how the facade names itself to MCP clients.
var implementation = &sdk.Implementation{Name: "backchannel", Version: "1"}

// instructions tell an MCP client how the session's tools behave.
const instructions = "Slow tools run in the background: use `wait` to get their results, `cancel` to stop them and `status` to report what you are doing."

// capabilities are the facade's server capabilities as go-sdk declares them: tools, whose list
// changes as hosts declare theirs (the tasks capability is added to initialize's answer:
// tasks.go).
func capabilities() *sdk.ServerCapabilities {
	return &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}}
}

// ServeHTTP authenticates the request, binds the MCP session an initialize creates to its
// Backchannel session, and hands the request to the SDK's Streamable HTTP transport.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tenant, ok := h.node.Tenant(broker.BearerToken(r))
	if !ok {
		broker.WriteHTTPError(w, http.StatusUnauthorized, frames.CodeUnauthorized, "a valid API key is required: Authorization: Bearer KEY")
		return
	}
	if h.modern.is(r) {
		h.modern.serveHTTP(w, r, tenant) // the protocol of 2026-07-28: no MCP session
		return
	}
	if id := r.Header.Get(mcpSessionHeader); id != "" {
		h.mu.Lock()
		b := h.sessions[id]
		h.mu.Unlock()
		if b == nil {
			// An MCP session another node made: its id starts with its Backchannel session's,
			// whose node has it.
			if sid, _, ok := strings.Cut(id, "."); ok && h.node.ForwardHTTP(w, r, sid) {
				return
			}
		}
		if b == nil || b.tenant != tenant || b.port.TakenOver() {
			broker.WriteHTTPError(w, http.StatusNotFound, frames.CodeNotFound, "no such MCP session")
			return
		}
		switch r.Method {
		case http.MethodDelete:
			// The client ends its MCP session: its open requests are abandoned, so that the
			// SDK's close (which waits for them) completes, and the Backchannel session is
			// free for the next client at once.
			h.release(b)
		case http.MethodGet:
			sw := shareStream(w, h.keepAlive)
			b.openStream(sw)
			defer b.closeStream(sw)
			defer sw.close()
			h.stream.ServeHTTP(sw, r)
			return
		case http.MethodPost:
			body, ok := readBody(w, r)
			if !ok {
				return
			}
			o := front(body, true)
			if o.answer != nil || o.accepted {
				b.enter()
				writeAnswer(w, o)
				b.leave()
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(o.body))
			r.ContentLength = int64(len(o.body))
			b.enter()
			defer b.leave()
			if o.blocking && acceptsEventStream(r) {
				// Opened at once, and written to at least every keepAlive while the request
				// blocks (SPEC 14).
				sw := openStream(w, h.keepAlive)
				defer sw.close()
				h.stream.ServeHTTP(sw, r)
				return
			}
		}
		h.stream.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		h.stream.ServeHTTP(w, r)
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	if o := front(body, false); o.answer != nil || o.accepted {
		writeAnswer(w, o)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !isInitialize(body) {
		// Not an initialize (server/discover, a request without its session): the SDK answers
		// it; no Backchannel session is created or bound (SPEC 14).
		h.stream.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, h.unbound)))
		return
	}
	h.initialize(w, r, tenant)
}

// readBody reads a POST body within the SDK's limit; a body it cannot read is answered.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		broker.WriteHTTPError(w, http.StatusBadRequest, frames.CodeBadFrame, "reading the request body: "+err.Error())
		return nil, false
	}
	if len(body) > maxBodyBytes {
		broker.WriteHTTPError(w, http.StatusRequestEntityTooLarge, frames.CodeLimitExceeded, "the request body is over the limit of 4 MiB")
		return nil, false
	}
	return body, true
}

// refused answers a request whose session could not be attached (err set) and reports whether
// it did: forwarded to the node that holds the session, or an HTTP error (404 unknown session,
// 429 too many sessions, 403 an agent attached, 503 otherwise).
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, sid string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, broker.ErrUnknownSession) && h.node.ForwardHTTP(w, r, sid):
		// another node holds the session: it serves the MCP session too
	case errors.Is(err, broker.ErrUnknownSession):
		e := broker.NoSession(sid)
		broker.WriteHTTPError(w, http.StatusNotFound, e.Code, e.Message)
	case errors.Is(err, broker.ErrTooManySessions):
		broker.WriteHTTPError(w, http.StatusTooManyRequests, frames.CodeLimitExceeded, "the tenant has the most open sessions allowed")
	case errors.Is(err, broker.ErrAgentAttached):
		broker.WriteHTTPError(w, http.StatusForbidden, frames.CodeForbidden, err.Error())
	default:
		broker.WriteHTTPError(w, http.StatusServiceUnavailable, frames.CodeInternal, err.Error())
	}
	return true
}

// initialize serves an initialize request: it attaches a port to the session the request
// names (or to a new one), and binds the MCP session the SDK creates to it.
func (h *Handler) initialize(w http.ResponseWriter, r *http.Request, tenant string) {
	port, err := h.node.AttachAgent(tenant, r.Header.Get(SessionHeader))
	if h.refused(w, r, r.Header.Get(SessionHeader), err) {
		return
	}
	// The MCP session's id starts with the Backchannel session's, so that any node can tell
	// which node serves it.
	b := &binding{tenant: tenant, id: port.SessionID() + "." + rand.Text(), port: port, idleFor: h.idle}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.server = h.newServer(b)
	// The binding is known before the client can learn its Mcp-Session-Id, so that every
	// later request of the MCP session finds it.
	h.mu.Lock()
	h.sessions[b.id] = b
	h.mu.Unlock()
	w.Header().Set(SessionHeader, port.SessionID())
	h.stream.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, b.server)))
	var ss *sdk.ServerSession
	for s := range b.server.Sessions() {
		if s.ID() == b.id && s.InitializeParams() != nil {
			ss = s
		}
	}
	if ss == nil {
		h.release(b) // initialize failed (or the session is gone already): nothing stays bound
		return
	}
	b.ss.Store(ss)
	go h.watchTasks(b)
	// An MCP session with no request and no open stream for mcp_idle_ms is closed as DELETE
	// closes it (SPEC 14): its conversation stays.
	b.mu.Lock()
	b.onIdle = func() {
		h.release(b)
		_ = ss.Close()
	}
	b.armLocked()
	b.mu.Unlock()
	closed := make(chan struct{})
	go func() {
		_ = ss.Wait()
		close(closed)
	}()
	go func() {
		select {
		case <-closed: // the MCP session ended
		case <-b.ctx.Done(): // the client deleted its MCP session
		case <-port.Done():
			// The Backchannel session ended (or the node is shutting down), or another MCP
			// session took the conversation over: the open requests have their answers. The SDK drops the responses that are not written by the
			// time a close starts, so the MCP session is closed once they went out.
			timer := time.NewTimer(answerGrace)
			select {
			case <-b.idle():
				// The answers are written; the client reads them before it sees its
				// standalone stream end (which some clients take for a failure of every
				// request still being read).
				timer.Reset(answerLinger)
				select {
				case <-timer.C:
				case <-closed:
				}
			case <-closed:
			case <-timer.C:
			}
			timer.Stop()
			_ = ss.Close()
		}
		h.release(b)
	}()
}

// release ends a binding: the requests still open are abandoned, the port is detached and the
// MCP session is forgotten. It may be called more than once.
func (h *Handler) release(b *binding) {
	b.release.Do(func() {
		b.mu.Lock()
		b.gone = true
		b.stopTimerLocked()
		b.mu.Unlock()
		b.cancel()
		b.port.Close()
		h.mu.Lock()
		if h.sessions[b.id] == b {
			delete(h.sessions, b.id)
		}
		h.mu.Unlock()
	})
}

// isInitialize reports whether body is a JSON-RPC initialize request (or a batch holding one).
func isInitialize(body []byte) bool {
	body = bytes.TrimSpace(body)
	msgs := []json.RawMessage{body}
	if len(body) > 0 && body[0] == '[' {
		msgs = nil
		if json.Unmarshal(body, &msgs) != nil {
			return false
		}
	}
	for _, m := range msgs {
		var req struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
		}
		if json.Unmarshal(m, &req) == nil && req.Method == "initialize" && len(req.ID) > 0 && string(req.ID) != "null" {
			return true
		}
	}
	return false
}

// newServer is the MCP server of one MCP session: the session's tools, wait, cancel, status.
func (h *Handler) newServer(b *binding) *sdk.Server {
	srv := sdk.NewServer(implementation, &sdk.ServerOptions{
		Instructions: "Backchannel session " + b.port.SessionID() + ". " + instructions,
		Capabilities: capabilities(),
		GetSessionID: func() string { return b.id },
	})
	// Every tools/call goes to the session's text-agent protocol, whether or not the SDK lists
	// the tool: a tool that no host serves (withdrawn, never declared) gets the result
	// `Tool NAME is not available` from the broker (SPEC 4), not a protocol error.
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			switch method {
			case "tools/call":
				if call, ok := req.(*sdk.CallToolRequest); ok && call.Params != nil {
					if task, ok := call.Params.Meta[taskMetaKey]; ok {
						return h.createTask(ctx, b, call, task)
					}
					res, err := h.callTool(ctx, b, call)
					if err != nil {
						return nil, err
					}
					return &rawResult{v: res}, nil // resultType under 2026-07-28 (rawResult)
				}
			case "tools/list":
				res, err := next(ctx, method, req)
				if err != nil {
					return res, err
				}
				return withExecution(res)
			case "initialize":
				res, err := next(ctx, method, req)
				if err != nil {
					return res, err
				}
				return withTasksCapability(res)
			}
			return next(ctx, method, req)
		}
	})
	h.addTaskMethods(srv, b)
	for _, t := range builtins {
		h.addTool(srv, b, t)
	}
	offered := map[string]broker.ToolInfo{}
	for _, t := range b.port.Tools(context.Background()) {
		if h.addTool(srv, b, t) {
			offered[t.Name] = t
		}
	}
	var mu sync.Mutex
	b.port.OnToolsChanged(func(tools []broker.ToolInfo) {
		mu.Lock()
		defer mu.Unlock()
		now := map[string]broker.ToolInfo{}
		for _, t := range tools {
			if old, ok := offered[t.Name]; ok && sameTool(old, t) {
				now[t.Name] = t
				continue
			}
			if h.addTool(srv, b, t) {
				now[t.Name] = t
			}
		}
		var gone []string
		for name := range offered {
			if _, ok := now[name]; !ok {
				gone = append(gone, name)
			}
		}
		if len(gone) > 0 {
			srv.RemoveTools(gone...)
		}
		offered = now
	})
	return srv
}

// sameTool reports whether two descriptions of a tool are the same for an MCP client.
func sameTool(a, b broker.ToolInfo) bool {
	return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.Parameters, b.Parameters)
}

// builtins are the tools every MCP client has (SPEC 13).
var builtins = []broker.ToolInfo{
	{Name: "wait", Description: "Wait for a background tool call's result: {tool_call_id} for that call, {} for the next completion, or {timeout_minutes} for new input.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"tool_call_id":{"type":"string"},"timeout_minutes":{"type":"integer"}}}`)},
	{Name: "cancel", Description: "Cancel a running tool call: {tool_call_id}.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"tool_call_id":{"type":"string"}},"required":["tool_call_id"]}`)},
	{Name: "status", Description: "Report what you are doing: {state: working|waiting|blocked|done, title}.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"state":{"type":"string","enum":["working","waiting","blocked","done"]},"title":{"type":"string"}},"required":["state","title"]}`)},
}

// addTool offers one tool to the MCP client; its calls go to the session's text-agent
// protocol. A tool the SDK refuses (it panics on what it finds invalid) is logged and left
// unlisted — its calls still reach the broker — and never takes the process down. It reports
// whether the tool is listed.
func (h *Handler) addTool(srv *sdk.Server, b *binding, t broker.ToolInfo) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("mcp: a host tool cannot be offered to MCP clients", "session", b.port.SessionID(),
				"tool", t.Name, "panic", p)
			ok = false
		}
	}()
	srv.AddTool(&sdk.Tool{Name: t.Name, Description: t.Description, InputSchema: inputSchema(t.Parameters)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return h.callTool(ctx, b, req)
		})
	return true
}

// inputSchema is the MCP input schema of a tool whose declared parameters are params (SPEC 4: any
// valid JSON Schema). MCP requires an object schema (`"type": "object"`), and tool arguments
// are always a JSON object, so a schema is presented as one that accepts the same objects:
// without a type, "type": "object" is added to its constraints; with a list of types that
// holds "object", the type becomes "object"; with any other type (which no object satisfies),
// it is kept under allOf of an object schema, and so is the boolean schema false. Empty params
// and the boolean schema true are {"type":"object"}.
func inputSchema(params json.RawMessage) json.RawMessage {
	object := json.RawMessage(`{"type":"object"}`)
	raw := bytes.TrimSpace(params)
	if len(raw) == 0 || bytes.Equal(raw, []byte("true")) {
		return object
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		if bytes.Equal(raw, []byte("false")) {
			return json.RawMessage(`{"type":"object","allOf":[false]}`)
		}
		return object // not a schema the broker accepts
	}
	typ, has := m["type"]
	if has {
		var one string
		if json.Unmarshal(typ, &one) == nil && one == "object" {
			return params
		}
		var many []string
		if json.Unmarshal(typ, &many) != nil || !contains(many, "object") {
			return json.RawMessage(`{"type":"object","allOf":[` + string(raw) + `]}`)
		}
	}
	m["type"] = json.RawMessage(`"object"`)
	out, err := json.Marshal(m)
	if err != nil {
		return object
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// callTool runs one tools/call in the session's text-agent protocol. The request ends with its
// result, or when the client cancels it or its MCP session ends (the call is then abandoned:
// AgentPort.Call).
func (h *Handler) callTool(ctx context.Context, b *binding, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	if err := checkArguments(req.Params.Arguments); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(b.ctx, cancel)
	defer stop()

	var progress func(string)
	if tok := req.Params.GetProgressToken(); tok != nil {
		p := newProgressSender(ctx, h.log, req.Session, tok)
		defer p.stop()
		progress = p.add
	}
	r, err := b.port.Call(ctx, b.port.NewCallID(), req.Params.Name, req.Params.Arguments, progress)
	if errors.Is(err, broker.ErrTakenOver) {
		return nil, errTakenOver
	}
	if err != nil {
		return nil, err
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: r.Content}}, IsError: r.Kind == frames.ResultKindError}, nil
}

// errTakenOver answers the open requests of an MCP session whose conversation another MCP
// session took over (SPEC 14).
var errTakenOver = &jsonrpc.Error{Code: -32000, Message: "session taken over"}

// progressSender forwards the progress notes of an open request as notifications/progress on
// the request's own stream (SPEC 14: "while the request is open"), in order, from a goroutine
// of its own: notes arrive on the session's event loop, which must not wait for the network.
type progressSender struct {
	ctx     context.Context // the request's: it routes the notifications to its stream
	log     *slog.Logger
	session *sdk.ServerSession
	token   any

	mu    sync.Mutex
	notes []string
	wake  chan struct{}
	done  chan struct{}
	count float64
}

func newProgressSender(ctx context.Context, log *slog.Logger, session *sdk.ServerSession, token any) *progressSender {
	p := &progressSender{ctx: ctx, log: log, session: session, token: token, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go p.run()
	return p
}

// add queues a note; it never blocks.
func (p *progressSender) add(note string) {
	p.mu.Lock()
	p.notes = append(p.notes, note)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// stop ends the sender (the request is answered); notes not sent by now are dropped.
func (p *progressSender) stop() { close(p.done) }

func (p *progressSender) run() {
	for {
		select {
		case <-p.done:
			return
		case <-p.wake:
		}
		p.mu.Lock()
		notes := p.notes
		p.notes = nil
		p.mu.Unlock()
		for _, note := range notes {
			select {
			case <-p.done:
				return
			default:
			}
			p.count++
			if err := p.session.NotifyProgress(p.ctx, &sdk.ProgressNotificationParams{ProgressToken: p.token, Progress: p.count, Message: note}); err != nil {
				p.log.Debug("mcp: a progress notification was not delivered", "err", err)
			}
		}
	}
}
