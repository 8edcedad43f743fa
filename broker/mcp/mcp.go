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
// the MCP session (`Mcp-Session-Id`).
package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/frames"
)

// SessionHeader names the Backchannel session of an MCP client (SPEC 14).
const SessionHeader = "Backchannel-Session"

// Handler serves /mcp for a node.
type Handler struct {
	node   *broker.Node
	log    *slog.Logger
	stream *sdk.StreamableHTTPHandler

	mu       sync.Mutex
	sessions map[string]*binding // by Mcp-Session-Id
}

// binding is an MCP session's Backchannel session.
type binding struct {
	tenant string
	port   *broker.AgentPort
	server *sdk.Server
}

type ctxKey struct{}

// New returns the /mcp handler of node.
func New(node *broker.Node, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{node: node, log: log, sessions: make(map[string]*binding)}
	h.stream = sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		if b, ok := r.Context().Value(ctxKey{}).(*binding); ok {
			return b.server
		}
		return nil
	}, &sdk.StreamableHTTPOptions{Logger: log, SessionTimeout: 30 * time.Minute, DisableLocalhostProtection: true})
	return h
}

func httpError(w http.ResponseWriter, status int, code frames.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": string(code), "message": msg})
}

// ServeHTTP authenticates the request, binds a new MCP session to its Backchannel session, and
// hands the request to the SDK's Streamable HTTP transport.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := r.Header.Get("Authorization")
	if len(tok) > 7 && strings.EqualFold(tok[:7], "bearer ") {
		tok = strings.TrimSpace(tok[7:])
	} else {
		tok = ""
	}
	tenant, ok := h.node.Tenant(tok)
	if !ok {
		httpError(w, http.StatusUnauthorized, frames.CodeUnauthorized, "a valid API key is required: Authorization: Bearer KEY")
		return
	}
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		h.mu.Lock()
		b := h.sessions[id]
		h.mu.Unlock()
		if b != nil && b.tenant != tenant {
			httpError(w, http.StatusNotFound, frames.CodeNotFound, "no such MCP session")
			return
		}
		h.stream.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		h.stream.ServeHTTP(w, r)
		return
	}
	// A request without an MCP session: initialize. Bind it to its Backchannel session.
	port, err := h.node.AttachAgent(tenant, r.Header.Get(SessionHeader))
	switch {
	case err == broker.ErrUnknownSession:
		httpError(w, http.StatusNotFound, frames.CodeNotFound, "no session "+r.Header.Get(SessionHeader))
		return
	case err == broker.ErrAgentAttached:
		httpError(w, http.StatusForbidden, frames.CodeForbidden, err.Error())
		return
	case err != nil:
		httpError(w, http.StatusServiceUnavailable, frames.CodeInternal, err.Error())
		return
	}
	b := &binding{tenant: tenant, port: port}
	b.server = h.newServer(b)
	w.Header().Set(SessionHeader, port.SessionID())
	rec := &headerWatch{ResponseWriter: w}
	h.stream.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), ctxKey{}, b)))
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		h.mu.Lock()
		h.sessions[id] = b
		h.mu.Unlock()
	} else {
		port.Close() // initialize failed: nothing is bound
	}
}

// headerWatch is the ResponseWriter of an initialize request (it only passes through; the
// session id is read from the headers once the SDK wrote them).
type headerWatch struct{ http.ResponseWriter }

func (h *headerWatch) Flush() {
	if f, ok := h.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// newServer is the MCP server of one MCP session: the session's tools, wait, cancel, status.
func (h *Handler) newServer(b *binding) *sdk.Server {
	var srv *sdk.Server
	srv = sdk.NewServer(&sdk.Implementation{Name: "backchannel", Version: "1"}, &sdk.ServerOptions{
		Instructions: "Backchannel session " + b.port.SessionID() + ". Slow tools run in the background: use `wait` to get their results, `cancel` to stop them and `status` to report what you are doing.",
		InitializedHandler: func(ctx context.Context, req *sdk.InitializedRequest) {
			go func() {
				_ = req.Session.Wait()
				b.port.Close()
				h.forget(b)
			}()
		},
		HasTools: true,
	})
	for _, t := range builtins {
		h.addTool(srv, b, t.Name, t.Description, t.Parameters)
	}
	known := map[string]bool{}
	for _, t := range b.port.Tools(context.Background()) {
		h.addTool(srv, b, t.Name, t.Description, t.Parameters)
		known[t.Name] = true
	}
	var mu sync.Mutex
	b.port.OnToolsChanged(func(tools []broker.ToolInfo) {
		mu.Lock()
		defer mu.Unlock()
		now := map[string]bool{}
		for _, t := range tools {
			h.addTool(srv, b, t.Name, t.Description, t.Parameters)
			now[t.Name] = true
		}
		for name := range known {
			if !now[name] {
				srv.RemoveTools(name)
			}
		}
		known = now
	})
	return srv
}

func (h *Handler) forget(b *binding) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, x := range h.sessions {
		if x == b {
			delete(h.sessions, id)
		}
	}
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

// addTool adds one tool whose calls go to the session's text-agent protocol.
func (h *Handler) addTool(srv *sdk.Server, b *binding, name, description string, params json.RawMessage) {
	schema := params
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	srv.AddTool(&sdk.Tool{Name: name, Description: description, InputSchema: schema}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var progress func(string)
		if tok := req.Params.GetProgressToken(); tok != nil {
			n := 0.0
			progress = func(note string) {
				n++
				_ = req.Session.NotifyProgress(context.Background(), &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: n, Message: note})
			}
		}
		r, err := b.port.Call(ctx, b.port.NewCallID(), name, req.Params.Arguments, progress)
		if err != nil {
			return nil, err
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: r.Content}}, IsError: r.Kind == frames.ResultKindError}, nil
	})
}
