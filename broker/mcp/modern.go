package mcp

// The protocol revision 2026-07-28 (SEP-2575, SEP-2567): no initialize and no MCP session —
// every request carries its protocol version and client capabilities in _meta, and go-sdk
// v1.8.0 serves it only with a stateless handler. A Backchannel session is named by the
// Backchannel-Session header on every request; the facade keeps, per session, one binding of
// the session's conversation (as an MCP session of the 2025-11-25 protocol has), taken over
// from any MCP session that held it when a request arrives, and released after mcp_idle_ms
// without a request. A request that names no session is served by a server bound to none
// (server/discover; the built-ins' list).

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// modernVersion is the first protocol revision without MCP sessions.
const modernVersion = "2026-07-28"

// modern serves the requests of the protocol of 2026-07-28.
type modern struct {
	h       *Handler
	stream  *sdk.StreamableHTTPHandler
	unbound *sdk.Server

	mu       sync.Mutex
	bindings map[string]*binding // by tenant + "/" + Backchannel session id
}

type modernKey struct{}

func newModern(h *Handler) *modern {
	m := &modern{h: h, bindings: make(map[string]*binding)}
	m.unbound = sdk.NewServer(implementation, &sdk.ServerOptions{Instructions: instructions, Capabilities: capabilities()})
	m.stream = sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		if srv, ok := r.Context().Value(modernKey{}).(*sdk.Server); ok {
			return srv
		}
		return m.unbound
	}, &sdk.StreamableHTTPOptions{Stateless: true, Logger: h.log, DisableLocalhostProtection: true})
	return m
}

// is reports whether r speaks the protocol of 2026-07-28: its Mcp-Protocol-Version header
// names it (or a later one). Such a request never carries Mcp-Session-Id.
func (m *modern) is(r *http.Request) bool {
	v := r.Header.Get("Mcp-Protocol-Version")
	return v >= modernVersion && r.Header.Get(mcpSessionHeader) == ""
}

// serveHTTP serves one request of the protocol of 2026-07-28.
func (m *modern) serveHTTP(w http.ResponseWriter, r *http.Request, tenant string) {
	if r.Method != http.MethodPost {
		m.stream.ServeHTTP(w, r) // 405: there is no GET stream and no DELETE
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	sid := r.Header.Get(SessionHeader)
	o := front(body, sid != "")
	if o.answer != nil || o.accepted {
		writeAnswer(w, o)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(o.body))
	r.ContentLength = int64(len(o.body))
	if sid == "" || isMethod(o.body, "server/discover") {
		m.stream.ServeHTTP(w, r)
		return
	}
	b, err := m.bind(tenant, sid)
	if m.h.refused(w, r, sid, err) {
		return
	}
	b.enter()
	defer b.leave()
	w.Header().Set(SessionHeader, sid)
	r = r.WithContext(context.WithValue(r.Context(), modernKey{}, b.server))
	if o.blocking && acceptsEventStream(r) {
		sw := openStream(w, m.h.keepAlive)
		defer sw.close()
		m.stream.ServeHTTP(sw, r)
		return
	}
	m.stream.ServeHTTP(w, r)
}

// isMethod reports whether body is a request of method.
func isMethod(body []byte, method string) bool {
	var msg struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(body, &msg) == nil && msg.Method == method
}

// bind returns the binding of session sid's conversation, attaching (and taking over) it when
// this node has none that is live.
func (m *modern) bind(tenant, sid string) (*binding, error) {
	key := tenant + "/" + sid
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.bindings[key]; b != nil {
		select {
		case <-b.port.Done():
			m.h.release(b)
			delete(m.bindings, key)
		default:
			return b, nil
		}
	}
	port, err := m.h.node.AttachAgent(tenant, sid)
	if err != nil {
		return nil, err
	}
	b := &binding{tenant: tenant, id: "", port: port, idleFor: m.h.idle}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.server = m.h.newServer(b)
	b.onIdle = func() {
		m.mu.Lock()
		if m.bindings[key] == b {
			delete(m.bindings, key)
		}
		m.mu.Unlock()
		m.h.release(b)
	}
	m.bindings[key] = b
	go func() {
		select {
		case <-port.Done(): // taken over, or the session ended
			m.mu.Lock()
			if m.bindings[key] == b {
				delete(m.bindings, key)
			}
			m.mu.Unlock()
			m.h.release(b)
		case <-b.ctx.Done():
		}
	}()
	return b, nil
}
