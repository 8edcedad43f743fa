package broker

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"

	"github.com/backchannel-io/backchannel/frames"
)

// Forwarding HTTP. A request about a session another live node holds — an MCP session's
// requests, above all (its state is the go-sdk server's, in the holder's process) — is passed
// on to the holder's HTTP server, which each node advertises in the shared store (Advertise).
// A forwarded request carries ForwardedHeader and is never forwarded again.

// ForwardedHeader marks a request one node forwarded to another.
const ForwardedHeader = "Backchannel-Forwarded"

// advertisedURL is where other nodes reach this node's HTTP server ("" until Advertise). Its
// mutex also orders the writes of the node's liveness, so the last one names the latest URL.
type advertisedURL struct {
	mu  sync.Mutex
	url string
}

// Advertise tells the nodes sharing the store where this node's HTTP server is reached
// (http://HOST:PORT), so that they can forward requests about its sessions: at once, and with
// every renewal of the node's liveness.
func (n *Node) Advertise(baseURL string) {
	n.url.mu.Lock()
	n.url.url = baseURL
	n.url.mu.Unlock()
	ctx, cancel := context.WithTimeout(n.ctx, relayTimeout)
	defer cancel()
	n.alive(ctx)
}

// alive records the node alive, with its URL, for HoldTTL.
func (n *Node) alive(ctx context.Context) {
	n.url.mu.Lock()
	defer n.url.mu.Unlock()
	if err := n.dir.NodeAlive(ctx, n.addr, n.url.url, n.cfg.HoldTTL); err != nil {
		n.log.Warn("broker: recording the node alive", "err", err)
	}
}

// ForwardHTTP passes r on to the node that holds sessionID, if that is another live node this
// node can reach (locate.go), and reports whether it did (the response is then written).
func (n *Node) ForwardHTTP(w http.ResponseWriter, r *http.Request, sessionID string) bool {
	if sessionID == "" || r.Header.Get(ForwardedHeader) != "" {
		return false
	}
	return n.forward(w, r, n.locate(r.Context(), sessionID))
}

// forward is ForwardHTTP for the session at loc.
func (n *Node) forward(w http.ResponseWriter, r *http.Request, loc location) bool {
	if loc.place != placeNode || r.Header.Get(ForwardedHeader) != "" {
		return false
	}
	sessionID, holder := loc.id, loc.holder
	ctx, cancel := context.WithTimeout(r.Context(), relayTimeout)
	defer cancel()
	base, err := n.dir.NodeURL(ctx, holder)
	if err != nil || base == "" {
		return false
	}
	target, err := url.Parse(base)
	if err != nil {
		return false
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set(ForwardedHeader, n.addr)
		},
		FlushInterval: -1, // event streams go through as they are written
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			n.log.Warn("broker: forwarding a request to the session's node", "session", sessionID, "node", holder, "err", err)
			WriteHTTPError(w, http.StatusBadGateway, frames.CodeInternal, "the node that holds the session cannot be reached; try again")
		},
	}
	proxy.ServeHTTP(w, r)
	return true
}
