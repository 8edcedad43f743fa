package broker

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/backchannel-io/backchannel/frames"
)

// The origin and host rules of SPEC 18 (--allowed-origins), one rule for every path the
// broker serves — the HTTP API, /v1/ws, /mcp, the WebRTC signaling, the pages:
//
//   - A request without an Origin header (not sent by a browser on behalf of a page) passes.
//   - A request with one passes when the Origin is the broker's own: its host and port are
//     those of the request's Host header (behind a proxy that passes Host on, the public
//     name), or those of Config.PublicURL. The scheme is not compared, so a broker behind a
//     TLS-terminating proxy knows its https:// pages as its own.
//   - Otherwise it passes when the Origin is in Config.AllowedOrigins, or when "*" is; else
//     403 forbidden, before anything else is done with it.
//   - In dev mode (Config.LoopbackHostsOnly: no API keys, the loopback key dev) every request
//     whose Host header does not name localhost, an address of 127.0.0.0/8 or ::1 (any port)
//     gets 403 forbidden: a page that had its own name rebound to 127.0.0.1 (DNS rebinding) is
//     same-origin to itself, and only its Host header gives it away.
//
// The WebSocket transport and the MCP facade leave their own origin and localhost checks off:
// this guard is the rule, for them as for the rest (see broker/ws and broker/mcp).

// guard is what Node.Handler wraps the broker's routes in: the host rule of dev mode, then the
// origin rule.
type guard struct {
	next         http.Handler
	loopbackOnly bool
	anyOrigin    bool
	allowed      map[string]bool // canonical origins (scheme://host:port)
}

func (n *Node) newGuard(next http.Handler) *guard {
	g := &guard{next: next, loopbackOnly: n.cfg.LoopbackHostsOnly, allowed: map[string]bool{}}
	origins := append([]string(nil), n.cfg.AllowedOrigins...)
	if n.cfg.PublicURL != "" {
		origins = append(origins, n.cfg.PublicURL)
	}
	for _, o := range origins {
		o = strings.TrimSpace(o)
		if o == "*" {
			g.anyOrigin = true
			continue
		}
		if c, ok := canonicalOrigin(o); ok {
			g.allowed[c] = true
		}
	}
	return g
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.loopbackOnly && !loopbackHost(r.Host) {
		WriteHTTPError(w, http.StatusForbidden, frames.CodeForbidden,
			"this broker runs without API keys (dev mode) and answers only requests to localhost or a loopback address; start it with --api-keys to serve other host names")
		return
	}
	origin := r.Header.Get("Origin")
	if origin != "" && !g.originAllowed(origin, r.Host) {
		WriteHTTPError(w, http.StatusForbidden, frames.CodeForbidden,
			"origin "+quoteShort(origin)+" is not allowed: the broker accepts browser requests from its own origin and from those of --allowed-origins")
		return
	}
	if origin != "" && allowCORS(w, r, origin) {
		return // a preflight, answered
	}
	g.next.ServeHTTP(w, r)
}

// The CORS answer of an allowed origin: a page of another origin listed in --allowed-origins
// may call the HTTP API, the WebRTC signaling and /mcp with fetch (an Authorization header, a
// JSON or SDP body), and read the headers the broker answers with. No cookies are involved, so
// no credentials are allowed.
const (
	corsMethods = "GET, POST, DELETE, OPTIONS"
	corsHeaders = "Authorization, Content-Type, Accept, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version, " + SessionHeaderName
	corsExpose  = "Location, Mcp-Session-Id, " + SessionHeaderName + ", pending_prompts"
)

// SessionHeaderName is the header an MCP initialize names its session in (SPEC 14).
const SessionHeaderName = "Backchannel-Session"

// allowCORS adds the CORS headers for an allowed origin and answers a preflight (OPTIONS with
// Access-Control-Request-Method), reporting whether it did.
func allowCORS(w http.ResponseWriter, r *http.Request, origin string) bool {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", corsExpose)
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", corsMethods)
	h.Set("Access-Control-Allow-Headers", corsHeaders)
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// originAllowed reports whether a request to host (its Host header) with the Origin header
// origin passes.
func (g *guard) originAllowed(origin, host string) bool {
	if g.anyOrigin {
		return true
	}
	c, ok := canonicalOrigin(origin)
	if !ok {
		return false // "null" (a sandboxed page, a file), or not an origin at all
	}
	if g.allowed[c] {
		return true
	}
	// The broker's own origin: the Origin's host and port are the Host header's (whose port,
	// when it names none, is the default of the Origin's scheme).
	scheme, hostPort, _ := strings.Cut(c, "://")
	return host != "" && canonicalHostPort(host, defaultPort(scheme)) == hostPort
}

// canonicalOrigin renders an origin (scheme://host[:port]) as lower-case scheme://host:port,
// the port always written; ok is false for anything that is not an http(s) origin.
func canonicalOrigin(o string) (string, bool) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(o), "/"))
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	port := defaultPort(scheme)
	if port == "" {
		return "", false
	}
	return scheme + "://" + canonicalHostPort(u.Host, port), true
}

// defaultPort is the port of an origin of scheme that names none ("" for a scheme that is not
// a web origin's).
func defaultPort(scheme string) string {
	switch scheme {
	case "http", "ws":
		return "80"
	case "https", "wss":
		return "443"
	}
	return ""
}

// canonicalHostPort renders host[:port] as lower-case host:port, with port def when it names
// none (an IPv6 address in brackets).
func canonicalHostPort(hostport, def string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), def
	}
	if port == "" {
		port = def
	}
	return net.JoinHostPort(strings.ToLower(host), port)
}

// loopbackHost reports whether a Host header names localhost or a loopback address, with any
// port.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// quoteShort quotes a header value for an error message, cut to 100 bytes.
func quoteShort(v string) string {
	if len(v) > 100 {
		v = v[:100] + "..."
	}
	return strconv.Quote(v)
}
