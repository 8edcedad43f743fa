package mcp_test

// The scenarios of SPEC 14's "Behaving as MCP clients expect": JSON-RPC answers for every
// request, the event stream of a blocking request opened at once and kept alive, a takeover on
// initialize, mcp_idle_ms, and results that outlive DELETE.

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/mcp"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// mcpSessionStatus is the HTTP status a ping of MCP session id answers.
func mcpSessionStatus(t *testing.T, e *env, id string) int {
	t.Helper()
	resp, _ := mcpPost(t, e, map[string]string{"Authorization": "Bearer " + brokertest.KeyA, "Mcp-Session-Id": id,
		"Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	return resp.StatusCode
}

// TestJSONRPCAnswers: every malformed or unknown request of an MCP session gets a JSON-RPC
// error as application/json — -32601 for a method the broker does not serve, tasks/* it does
// not know included, -32600 for what is no request, -32602 for missing params — and the
// session goes on (SPEC 14; go-sdk v1.8.0 answers these with a plain-text 400).
func TestJSONRPCAnswers(t *testing.T) {
	eachStore(t, suiteConfig(), func(t *testing.T, e *env) {
		a, _ := mustConnect(t, e, clientKinds[0], brokertest.KeyA, "")
		hdr := map[string]string{"Authorization": "Bearer " + brokertest.KeyA, "Mcp-Session-Id": a.MCPSession(),
			"Mcp-Protocol-Version": "2025-11-25"}
		for _, c := range []struct {
			what, body string
			code       int
		}{
			{"an unknown method", `{"jsonrpc":"2.0","id":7,"method":"no/such"}`, -32601},
			{"an unknown tasks method", `{"jsonrpc":"2.0","id":7,"method":"tasks/frobnicate","params":{}}`, -32601},
			{"a body that is not JSON", `{"jsonrpc":"2.0","id":7,`, -32600},
			{"a message without jsonrpc", `{"id":7,"method":"ping"}`, -32600},
			{"a message without method", `{"jsonrpc":"2.0","id":7}`, -32600},
			{"tools/call without params", `{"jsonrpc":"2.0","id":7,"method":"tools/call"}`, -32602},
			{"tasks/get without params", `{"jsonrpc":"2.0","id":7,"method":"tasks/get"}`, -32602},
			{"params that are not an object", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[1]}`, -32602},
			{"tasks/get of an unknown task", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"call_aaaaaaaaaaaaaaaaaaaa"}}`, -32602},
			{"a task whose ttl is not a number", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","task":{"ttl":"soon"}}}`, -32602},
			{"a task-augmented call of a built-in", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"wait","arguments":{},"task":{}}}`, -32601},
			{"a task-augmented call of a tool no host serves", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"nosuch","arguments":{},"task":{}}}`, -32602},
		} {
			resp, body := mcpPost(t, e, hdr, c.body)
			ct := resp.Header.Get("Content-Type")
			if resp.StatusCode != http.StatusOK || !(strings.HasPrefix(ct, "application/json") || strings.HasPrefix(ct, "text/event-stream")) {
				t.Errorf("%s: HTTP %d %s %q, want 200 and a JSON-RPC answer", c.what, resp.StatusCode, ct, body)
				continue
			}
			ans := parseAnswer(t, resp, body)
			if ans.Error == nil || ans.Error.Code != c.code {
				t.Errorf("%s: %s, want JSON-RPC error %d", c.what, body, c.code)
			}
		}
		// A notification the server does not handle is accepted and ignored.
		if resp, body := mcpPost(t, e, hdr, `{"jsonrpc":"2.0","method":"notifications/no_such"}`); resp.StatusCode != http.StatusAccepted {
			t.Errorf("an unknown notification: HTTP %d %q, want 202", resp.StatusCode, body)
		}
		// The MCP session survived all of it (the task calls queued the status reminder).
		if got := call(t, a, "status", map[string]any{"state": "working", "title": testTitle}).text(t); !strings.HasSuffix(got, textStatusWorking) {
			t.Errorf("status after the refused requests: %q", got)
		}
	})
}

// TestResultsOutliveDelete: a background call's result outlives the MCP session that made
// it: after DELETE (the client's Close), the next MCP client of the session waits for it by the
// same id (SPEC 14; problem 4 of issue 19: "Unknown tool call id").
func TestResultsOutliveDelete(t *testing.T) {
	each(t, suiteConfig(), func(t *testing.T, e *env, k clientKind) {
		sid, h := e.sessionWithHost(slowTool)
		a, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		setWorking(t, a)
		id := startBackground(t, a, h, 1)
		a.Close()
		h.result(id, `"done after the client left"`)
		b, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		r := call(t, b, "wait", map[string]any{"tool_call_id": id})
		// The wait consumes the result before its completion prompt was delivered: the prompt
		// is withdrawn (SPEC 13).
		expectText(t, "wait by the same id in the next MCP session", r, "done after the client left", false)
		expectCall(t, b, "wait", map[string]any{"tool_call_id": id}, textConsumed, true)
	})
}

// TestTakeoverOnInitialize: an initialize naming a session whose conversation another MCP
// session holds takes it over: the old MCP session's open wait ends with JSON-RPC error -32000
// "session taken over", its Mcp-Session-Id answers 404, and the new client continues the
// conversation — its background call and the result (SPEC 14). A WebSocket agent's slot is
// never taken: such a session answers 403.
func TestTakeoverOnInitialize(t *testing.T) {
	each(t, suiteConfig(), func(t *testing.T, e *env, k clientKind) {
		sid, h := e.sessionWithHost(slowTool)
		a, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		setWorking(t, a)
		id := startBackground(t, a, h, 2)
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		waiting, _, _ := openWait(t, ctx, a, h, id)
		b, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		o := await(t, waiting, "the taken-over session's wait")
		if o.err == nil || !strings.Contains(o.err.Error(), "session taken over") {
			t.Errorf("the wait of the MCP session taken over ended with %+v %v, want JSON-RPC error -32000 \"session taken over\"", o.r, o.err)
		}
		if te, ok := o.err.(*tsError); ok && (te.Code == nil || *te.Code != -32000) {
			t.Errorf("the wait of the MCP session taken over: %v, want code -32000", te)
		}
		if code := mcpSessionStatus(t, e, a.MCPSession()); code != http.StatusNotFound {
			t.Errorf("the MCP session taken over answers HTTP %d, want 404", code)
		}
		h.result(id, `"finished"`)
		expectCall(t, b, "wait", map[string]any{"tool_call_id": id}, "finished", false)

		// A session with a WebSocket agent: its slot is never taken by an initialize.
		sid2, join := e.createSession(brokertest.KeyA)
		ag := e.dialHost(map[string]any{"session_id": sid2, "join_token": join, "role": "agent"})
		_ = ag
		if _, info, err := k.connect(t, e, brokertest.KeyA, sid2); err == nil || info.Status != http.StatusForbidden {
			t.Errorf("initialize naming a session with a WebSocket agent: HTTP %d (%v), want 403", info.Status, err)
		}
	})
}

// TestIdleClosesMCPSession: an MCP session with no request and no open stream for
// mcp_idle_ms is closed (its id answers 404), without a takeover, and its conversation stays:
// the next client waits for the background result (SPEC 14; problem 1 of issue 19).
func TestIdleClosesMCPSession(t *testing.T) {
	cfg := suiteConfig()
	cfg.MCPIdle = 700 * time.Millisecond
	eachStore(t, cfg, func(t *testing.T, e *env) {
		sid, h := e.sessionWithHost(slowTool)
		a, _, err := connectGoWith(t, e, brokertest.KeyA, sid, goOptions{noStandaloneSSE: true})
		if err != nil {
			t.Fatal(err)
		}
		setWorking(t, a)
		id := startBackground(t, a, h, 3)
		start := time.Now()
		deadline := start.Add(waitLimit)
		for mcpSessionStatus(t, e, a.MCPSession()) != http.StatusNotFound {
			if time.Now().After(deadline) {
				t.Fatalf("the idle MCP session still answers after %v (mcp_idle_ms 700)", waitLimit)
			}
			time.Sleep(1200 * time.Millisecond) // each ping is a request: it restarts the clock
		}
		h.result(id, `"kept"`)
		b, _ := mustConnect(t, e, clientKinds[0], brokertest.KeyA, sid)
		r := call(t, b, "wait", map[string]any{"tool_call_id": id})
		if got := r.text(t); !strings.HasSuffix(got, "kept") {
			t.Errorf("wait after the idle close: %q, want the result kept", got)
		}
	})
}

// deadlineConn is a connection whose every Read must see data within timeout: a client read
// timeout like httpx's (the MCP Python SDK's default is 300 s).
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
	return c.Conn.Read(p)
}

// TestKeepAliveOutlastsReadTimeout: a blocking wait longer than the client's read timeout
// returns its result: its event stream is opened at once (headers before any result) and
// written to at least every keep-alive interval (SPEC 14; problem 2 of issue 19). The Go SDK's
// client here fails any read that waits 2 s; the wait takes 5 s; the keep-alive is 600 ms.
func TestKeepAliveOutlastsReadTimeout(t *testing.T) {
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			e := startEnvMCP(t, brokertest.Options{Store: store, Config: suiteConfig()}, mcp.Options{KeepAlive: 600 * time.Millisecond}, nil)
			sid, h := e.sessionWithHost(slowTool)
			const readTimeout = 2 * time.Second
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &deadlineConn{Conn: c, timeout: readTimeout}, nil
			}}
			a, _, err := connectGoWith(t, e, brokertest.KeyA, sid, goOptions{transport: tr})
			if err != nil {
				t.Fatal(err)
			}
			setWorking(t, a)

			// The raw stream of a blocking request (a timed wait, which consumes nothing): its
			// headers at once, then comment lines while it blocks.
			hdr := map[string]string{"Authorization": "Bearer " + brokertest.KeyA, "Mcp-Session-Id": a.MCPSession(),
				"Mcp-Protocol-Version": "2025-11-25"}
			start := time.Now()
			resp, lines := streamPost(t, e, hdr, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"wait","arguments":{"timeout_minutes":5}}}`)
			if took := time.Since(start); took > time.Second || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Errorf("a blocking request's response: %s after %v, want text/event-stream at once", resp.Header.Get("Content-Type"), took)
			}
			comments := 0
			for comments < 2 {
				select {
				case line, ok := <-lines:
					if !ok {
						t.Fatalf("the stream of a blocking wait ended after %d comment lines", comments)
					}
					if strings.HasPrefix(line, ":") {
						comments++
					} else if line != "" {
						t.Fatalf("the stream of a blocking wait: %q before its answer was due", line)
					}
				case <-time.After(1500 * time.Millisecond):
					t.Fatalf("no write on a blocking request's stream within 1.5 s (keep-alive 600 ms), %d comment lines so far", comments)
				}
			}
			resp.Body.Close() // the client goes away: its wait is withdrawn

			id := startBackground(t, a, h, 4)
			waited := callAsync(context.Background(), a, "wait", map[string]any{"tool_call_id": id}, nil)
			time.Sleep(5 * time.Second)
			h.result(id, `"worth the wait"`)
			o := await(t, waited, "the long wait")
			if o.err != nil {
				t.Fatalf("a wait of 5 s with a client read timeout of 2 s: %v", o.err)
			}
			expectText(t, "the long wait", o.r, "duration_seconds: 5\n\nworth the wait", false)
		})
	}
}

// streamPost POSTs body and returns the response once its headers arrived, with a channel of
// its body's lines.
func streamPost(t *testing.T, e *env, headers map[string]string, body string) (*http.Response, <-chan string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.mcpURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return resp, lines
}
