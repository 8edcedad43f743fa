package wiretest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/mcp"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	"github.com/backchannel-io/backchannel/internal/redistest"
)

// This file covers the HTTP limits and the origin rules of SPEC 18 over real TCP on loopback:
// the header, body and idle timeouts (short ones, set through brokertest's HTTP limits, which
// `backchannel serve` builds its server with), the long-lived requests they must spare, the
// Origin and dev-mode Host checks in front of every route, /readyz's answer while the store is
// down, and --max-timeline-followers.

// shortLimits are the HTTP limits of the timing tests: long enough for a loopback request,
// short enough to wait for.
var shortLimits = broker.HTTPLimits{HeaderTimeout: 300 * time.Millisecond, BodyTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}

// withMCP mounts the MCP facade at /mcp, as `backchannel serve` does.
func withMCP(n *broker.Node, mux *http.ServeMux) { mux.Handle("/mcp", mcp.New(n, nil)) }

// rawConn opens a TCP connection to the broker, closed when the test ends.
func rawConn(t *testing.T, b *brokertest.Broker) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", b.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitClosed reads c until the server closes it and returns what came and how long that took;
// it fails the test when the connection is still open after limit.
func waitClosed(t *testing.T, c net.Conn, limit time.Duration) ([]byte, time.Duration) {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	data, err := io.ReadAll(c)
	took := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server did not close the connection within %v (read so far: %q)", limit, data)
	}
	return data, took
}

// TestHTTPBodyTimeout: a POST that announces a body of 100 bytes and sends 10 is cut once the
// body timeout has passed — whether its handler was reading the body (an API key: the session
// is being created) or had answered without it (no key) — and the server closes the connection.
func TestHTTPBodyTimeout(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.Options{HTTP: shortLimits})
	for _, c := range []struct{ name, auth string }{
		{"reading the body", "Authorization: Bearer " + brokertest.KeyA + "\r\n"},
		{"answered without the body", ""},
	} {
		conn := rawConn(t, b)
		req := "POST /v1/sessions HTTP/1.1\r\nHost: " + b.Addr + "\r\n" + c.auth +
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"metadat"
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		data, took := waitClosed(t, conn, 5*time.Second)
		if took < 250*time.Millisecond {
			t.Errorf("%s: the connection closed after %v, before the body timeout (300 ms); it sent %q", c.name, took, data)
		}
		if bytes.Contains(data, []byte(" 201 ")) {
			t.Errorf("%s: a body that never came created a session: %q", c.name, data)
		}
	}
}

// TestHTTPHeaderAndIdleTimeouts: headers that do not arrive within the header timeout, and a
// keep-alive connection idle for the idle timeout after a complete exchange, are closed by the
// server.
func TestHTTPHeaderAndIdleTimeouts(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.Options{HTTP: shortLimits})

	conn := rawConn(t, b)
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: "+b.Addr+"\r\n"); err != nil {
		t.Fatal(err)
	}
	if data, took := waitClosed(t, conn, 5*time.Second); took < 250*time.Millisecond {
		t.Errorf("headers cut short: closed after %v (%q), want after the header timeout (300 ms)", took, data)
	}

	conn = rawConn(t, b)
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: "+b.Addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("/healthz on a keep-alive connection: %d (close %v), want 200 kept alive", resp.StatusCode, resp.Close)
	}
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(5 * time.Second))
	rest, err := io.ReadAll(br)
	took := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("an idle keep-alive connection was still open after 5 s (idle timeout 300 ms)")
	}
	if took < 250*time.Millisecond || len(rest) != 0 {
		t.Errorf("idle keep-alive: closed after %v with %q, want closed after the idle timeout (300 ms) with nothing sent", took, rest)
	}
}

// TestHTTPLongRequestsOutliveBodyTimeout: what rightly lasts longer than the body timeout is
// not cut by it — an MCP tools/call whose host answers after a second (a POST with a body,
// answered as an event stream), a ?follow=1 timeline that sees that call's result, and a
// WebSocket connection that is used a second after it opened.
func TestHTTPLongRequestsOutliveBodyTimeout(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.Options{HTTP: shortLimits, Routes: withMCP,
		Config: broker.Config{BackgroundAfter: 30 * time.Second, Heartbeat: 200 * time.Millisecond}})
	sid, jt := createSession(t, b, brokertest.KeyA)
	s := &session{t: t, b: b, key: brokertest.KeyA, sid: sid, jt: jt}
	h := s.host("host", decl("slow"))

	// The follower, open from the start.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lines := follow(t, ctx, b, sid, brokertest.KeyA)

	// The MCP client, over a keep-alive transport of its own.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := sdk.NewClient(&sdk.Implementation{Name: "guard-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: b.URL + "/mcp",
		HTTPClient: &http.Client{Transport: headerTransport{base: tr, set: map[string]string{
			"Authorization": "Bearer " + brokertest.KeyA, mcp.SessionHeader: sid}}},
		MaxRetries: -1, DisableStandaloneSSE: true}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("MCP initialize: %v", err)
	}
	defer cs.Close()
	answered := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		if err == nil && (res.IsError || len(res.Content) == 0) {
			err = errors.New("the call answered an error")
		}
		answered <- err
	}()
	call := h.Expect(Type("tool_call"))
	time.Sleep(time.Second) // > the body timeout: the MCP request, the follower and the WebSocket wait
	result(h, call.Str("call_id"), "", `"done"`)
	if err := <-answered; err != nil {
		t.Errorf("an MCP tools/call answered after 1 s (body timeout 300 ms): %v", err)
	}
	seen := false
	for e := range lines {
		if e.Kind == "result" && e.CallID == call.Str("call_id") {
			seen = true
			break
		}
	}
	if !seen {
		t.Errorf("the ?follow=1 stream ended before the result a second later (body timeout 300 ms)")
	}

	// The WebSocket: still usable a second after the upgrade.
	h.Send(map[string]any{"type": "tools.declare", "id": "decl-late", "tools": []map[string]any{decl("later")}})
	if d := h.Expect(func(f Frame) bool { return f.Type == "tools.declared" || f.Type == "error" }); d.Type != "tools.declared" {
		t.Errorf("a WebSocket a second after its upgrade (body timeout 300 ms): %s, want tools.declared", d)
	}
}

// headerTransport sets headers on every request.
type headerTransport struct {
	base http.RoundTripper
	set  map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.set {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// follow opens the session's ?follow=1 timeline with key and sends its entries on the channel,
// closed when the stream ends (or ctx does).
func follow(t *testing.T, ctx context.Context, b *brokertest.Broker, sid, key string) <-chan Entry {
	t.Helper()
	resp, err := followReq(ctx, b.URL, sid, key)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET timeline?follow=1: %d %s", resp.StatusCode, body)
	}
	out := make(chan Entry)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var e Entry
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				return
			}
			select {
			case out <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// followReq sends GET /v1/sessions/{sid}/timeline?follow=1 with key over a connection of its
// own; the response's body is the stream.
func followReq(ctx context.Context, base, sid, key string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/sessions/"+sid+"/timeline?follow=1", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	return (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
}

// originProbe is one request of the origin tests: its method, path, headers and body.
type originProbe struct {
	name    string
	method  string
	path    string
	headers map[string]string
	body    string
	ok      int // the status of a request that passes
}

// probes are a request of each kind the origin rule covers: the HTTP API, a WebSocket upgrade,
// an MCP initialize.
func originProbes() []originProbe {
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	return []originProbe{
		{name: "POST /v1/sessions", method: "POST", path: "/v1/sessions", body: "{}", ok: http.StatusCreated,
			headers: map[string]string{"Authorization": "Bearer " + brokertest.KeyA, "Content-Type": "application/json"}},
		{name: "WebSocket upgrade", method: "GET", path: "/v1/ws", ok: http.StatusSwitchingProtocols,
			headers: map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
				"Sec-WebSocket-Key": base64.StdEncoding.EncodeToString(key)}},
		{name: "MCP initialize", method: "POST", path: "/mcp", ok: http.StatusOK,
			body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"guard-test","version":"1"}}}`,
			headers: map[string]string{"Authorization": "Bearer " + brokertest.KeyA, "Content-Type": "application/json",
				"Accept": "application/json, text/event-stream"}},
	}
}

// send makes p with the Host header host (none: the broker's address) and the Origin header
// origin (none when ""), and returns the status and, unless the connection was upgraded, the
// body.
func (p originProbe) send(t *testing.T, b *brokertest.Broker, host, origin string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if p.body != "" {
		rd = strings.NewReader(p.body)
	}
	req, err := http.NewRequest(p.method, b.URL+p.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range p.headers {
		req.Header.Set(k, v)
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, nil // the body is the connection
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		defer func() { // the MCP session ends; its Backchannel session does not matter
			del, _ := http.NewRequest("DELETE", b.URL+"/mcp", nil)
			del.Header.Set("Authorization", "Bearer "+brokertest.KeyA)
			del.Header.Set("Mcp-Session-Id", id)
			if r, err := http.DefaultClient.Do(del); err == nil {
				r.Body.Close()
			}
		}()
	}
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// expectPass and expectForbidden check the answer to p.
func (p originProbe) expectPass(t *testing.T, what string, status int, body []byte) {
	t.Helper()
	if status != p.ok {
		t.Errorf("%s, %s: %d %s, want %d", p.name, what, status, body, p.ok)
	}
}

func (p originProbe) expectForbidden(t *testing.T, what string, status int, body []byte) {
	t.Helper()
	if status != http.StatusForbidden {
		t.Errorf("%s, %s: %d %s, want 403 forbidden", p.name, what, status, body)
		return
	}
	checkHTTPError(t, p.name+", "+what, status, body, http.StatusForbidden, "forbidden")
}

// TestOriginRule: with --allowed-origins https://app.example, a request of each kind (the
// HTTP API, a WebSocket upgrade, MCP initialize) with a foreign Origin, or Origin null, gets
// 403 forbidden; with the broker's own origin (its Host, whatever the scheme), an allowed
// origin (in any case, its default port written or not) or no Origin at all it is served.
// With * any origin is served.
func TestOriginRule(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.Options{Routes: withMCP,
		Config: broker.Config{AllowedOrigins: []string{"https://app.example", "http://localhost:5173"}}})
	for _, p := range originProbes() {
		for _, o := range []string{"https://evil.example", "http://app.example", "https://app.example:8443", "null", "http://localhost:8080"} {
			st, body := p.send(t, b, "", o)
			p.expectForbidden(t, "Origin "+o, st, body)
		}
		for _, o := range []string{"", "http://" + b.Addr, "https://" + b.Addr, "https://app.example", "HTTPS://App.Example:443", "http://localhost:5173"} {
			st, body := p.send(t, b, "", o)
			p.expectPass(t, "Origin "+o, st, body)
		}
	}
	// Behind a proxy the Host header is the public name: that is the broker's own origin.
	p := originProbes()[0]
	st, body := p.send(t, b, "api.example.com", "https://api.example.com")
	p.expectPass(t, "Host api.example.com, Origin https://api.example.com", st, body)
	st, body = p.send(t, b, "api.example.com", "https://other.example.com")
	p.expectForbidden(t, "Host api.example.com, Origin https://other.example.com", st, body)

	star := brokertest.Start(t, brokertest.Options{Routes: withMCP, Config: broker.Config{AllowedOrigins: []string{"*"}}})
	for _, p := range originProbes() {
		for _, o := range []string{"https://evil.example", "null"} {
			st, body := p.send(t, star, "", o)
			p.expectPass(t, "--allowed-origins *, Origin "+o, st, body)
		}
	}
}

// TestDevModeHosts: in dev mode (no --api-keys) every route refuses a Host header that is not
// localhost or a loopback address — what a page whose name was rebound to 127.0.0.1 sends —
// with 403 forbidden, and serves localhost, 127.0.0.1 and [::1] with any port.
func TestDevModeHosts(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.Options{Routes: withMCP, Config: broker.Config{LoopbackHostsOnly: true}})
	_, port, _ := net.SplitHostPort(b.Addr)
	health := originProbe{name: "GET /healthz", method: "GET", path: "/healthz", ok: http.StatusOK}
	for _, p := range append(originProbes(), health) {
		for _, h := range []string{"evil.example", "evil.example:" + port, "localhost.evil.example:" + port, "10.0.0.1:" + port, "127.0.0.1.nip.io:" + port} {
			st, body := p.send(t, b, h, "")
			p.expectForbidden(t, "dev mode, Host "+h, st, body)
		}
		// A rebound page is same-origin to itself: its Origin does not help it.
		st, body := p.send(t, b, "evil.example:"+port, "http://evil.example:"+port)
		p.expectForbidden(t, "dev mode, a rebound page", st, body)
		for _, h := range []string{"localhost:" + port, "LOCALHOST:" + port, "localhost", "127.0.0.1:" + port, "127.1.2.3:" + port, "[::1]:" + port} {
			st, body := p.send(t, b, h, "")
			p.expectPass(t, "dev mode, Host "+h, st, body)
		}
		st, body = p.send(t, b, "localhost:"+port, "http://localhost:"+port)
		p.expectPass(t, "dev mode, the try-it page on localhost", st, body)
	}
}

// lockedBuffer collects a log safely across goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestReadyzHidesStoreError: with its redis-server killed, /readyz answers 503 with exactly
// {"ready": false, "reason": "store unreachable"} — no error text, no address (SPEC 18) — and
// the broker's log has the store's error.
func TestReadyzHidesStoreError(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{}) // its own server: the test stops it
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	logs := &lockedBuffer{}
	b := brokertest.Start(t, brokertest.Options{Store: "redis", Redis: client,
		Config: broker.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))}})
	if st, _, body := HTTPDo(t, "GET", b.URL+"/readyz", "", "", ""); st != http.StatusOK || decodeObject(t, "/readyz", body)["ready"] != true {
		t.Fatalf("/readyz with Redis up: %d %s, want 200 with ready true", st, body)
	}
	srv.Kill()
	st, _, body := HTTPDo(t, "GET", b.URL+"/readyz", "", "", "")
	m := decodeObject(t, "/readyz", body)
	if st != http.StatusServiceUnavailable || len(m) != 2 || m["ready"] != false || m["reason"] != "store unreachable" {
		t.Errorf("/readyz with Redis down: %d %s, want 503 {\"ready\": false, \"reason\": \"store unreachable\"}", st, body)
	}
	_, port, _ := net.SplitHostPort(srv.Addr)
	if strings.Contains(string(body), port) {
		t.Errorf("/readyz names the store's address: %s", body)
	}
	if l := logs.String(); !strings.Contains(l, "readyz") || !strings.Contains(l, "err=") {
		t.Errorf("the broker's log has no /readyz line with the store's error:\n%s", l)
	}
}

// TestTimelineFollowerLimit: with --max-timeline-followers 2 a session's third ?follow=1
// stream gets 429 limit_exceeded while another session's is served; once one of the two ends,
// a new one is served.
func TestTimelineFollowerLimit(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{Limits: broker.Limits{MaxTimelineFollowers: 2}}, func(t *testing.T, b *brokertest.Broker) {
		sid, _ := createSession(t, b, brokertest.KeyA)
		other, _ := createSession(t, b, brokertest.KeyA)
		ctx1, cancel1 := context.WithCancel(context.Background())
		defer cancel1()
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		follow(t, ctx1, b, sid, brokertest.KeyA)
		follow(t, ctx2, b, sid, brokertest.KeyA)
		st, _, body := HTTPDo(t, "GET", b.URL+"/v1/sessions/"+sid+"/timeline?follow=1", brokertest.KeyA, "", "")
		checkHTTPError(t, "a third follower", st, body, http.StatusTooManyRequests, "limit_exceeded")
		if st, _, body := HTTPDo(t, "GET", b.URL+"/v1/sessions/"+sid+"/timeline", brokertest.KeyA, "", ""); st != http.StatusOK {
			t.Errorf("the timeline, not followed, with two followers: %d %s, want 200", st, body)
		}
		ctx3, cancel3 := context.WithCancel(context.Background())
		defer cancel3()
		follow(t, ctx3, b, other, brokertest.KeyA) // another session has places of its own

		cancel1()
		deadline := time.Now().Add(DefaultTimeout)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := followReq(ctx, b.URL, sid, brokertest.KeyA)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			status := resp.StatusCode
			resp.Body.Close()
			cancel()
			if status == http.StatusOK {
				break
			}
			if status != http.StatusTooManyRequests || time.Now().After(deadline) {
				t.Fatalf("a follower after one of two ended: %d, want 200 within %v", status, DefaultTimeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// TestTimelineFollowerLimitAcrossNodes: followers that reach a session through a node that
// does not hold it are forwarded to its holder, which counts them all: two via node B and one
// on node A are three of a limit of two.
func TestTimelineFollowerLimitAcrossNodes(t *testing.T) {
	t.Parallel()
	opts := brokertest.SharedRedis(t)
	opts.Config = broker.Config{Limits: broker.Limits{MaxTimelineFollowers: 2}}
	a := brokertest.Start(t, opts)
	b := brokertest.Start(t, opts)
	sid, _ := createSession(t, a, brokertest.KeyA)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	follow(t, ctx, b, sid, brokertest.KeyA)
	follow(t, ctx, b, sid, brokertest.KeyA)
	st, _, body := HTTPDo(t, "GET", a.URL+"/v1/sessions/"+sid+"/timeline?follow=1", brokertest.KeyA, "", "")
	checkHTTPError(t, "a third follower, on the holder, after two through node B", st, body, http.StatusTooManyRequests, "limit_exceeded")
}

// TestCORS: a page of an origin listed in --allowed-origins may call the HTTP API with fetch:
// its preflight is answered 204 with the methods and headers the API takes (Authorization, the
// MCP and session headers), and the answers carry Access-Control-Allow-Origin and expose
// Location and the session headers; an origin not listed gets 403, preflight included.
func TestCORS(t *testing.T) {
	t.Parallel()
	const app = "https://app.example.com"
	b := brokertest.Start(t, brokertest.Options{Routes: withMCP, Config: broker.Config{AllowedOrigins: []string{app}}})
	do := func(method, path, origin string, hdr map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, b.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", origin)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	pre := do(http.MethodOptions, "/v1/sessions", app, map[string]string{
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"})
	if pre.StatusCode != http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(pre.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight from %s: %d %v, want 204 allowing POST with Authorization", app, pre.StatusCode, pre.Header)
	}
	post := do(http.MethodPost, "/v1/sessions", app, map[string]string{"Authorization": "Bearer " + brokertest.KeyA})
	if post.StatusCode != http.StatusCreated || post.Header.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(post.Header.Get("Access-Control-Expose-Headers"), "Location") {
		t.Errorf("POST /v1/sessions from %s: %d %v, want 201 with Access-Control-Allow-Origin", app, post.StatusCode, post.Header)
	}
	if mcpPre := do(http.MethodOptions, "/mcp", app, map[string]string{"Access-Control-Request-Method": "POST"}); mcpPre.StatusCode != http.StatusNoContent ||
		!strings.Contains(mcpPre.Header.Get("Access-Control-Allow-Headers"), "Mcp-Session-Id") ||
		!strings.Contains(mcpPre.Header.Get("Access-Control-Expose-Headers"), "Backchannel-Session") {
		t.Errorf("MCP preflight from %s: %d %v", app, mcpPre.StatusCode, mcpPre.Header)
	}
	if evil := do(http.MethodOptions, "/v1/sessions", "https://evil.example", map[string]string{"Access-Control-Request-Method": "POST"}); evil.StatusCode != http.StatusForbidden || evil.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from an origin not listed: %d %v, want 403 without CORS headers", evil.StatusCode, evil.Header)
	}
}
