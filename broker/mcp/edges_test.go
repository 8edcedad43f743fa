package mcp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/mcp"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// eachStore runs fn against a fresh broker over each store, in parallel (the scenarios that
// need only one client).
func eachStore(t *testing.T, cfg broker.Config, fn func(t *testing.T, e *env)) {
	t.Helper()
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			fn(t, startEnv(t, store, cfg))
		})
	}
}

// mcpPost sends one raw JSON-RPC message to /mcp and returns the response with its body read.
func mcpPost(t *testing.T, e *env, headers map[string]string, body string) (*http.Response, string) {
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
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

// TestForeignMCPSession: every request is authenticated; an MCP session is only usable with a
// key of its own tenant (SPEC 3.5, 14).
func TestForeignMCPSession(t *testing.T) {
	eachStore(t, suiteConfig(), func(t *testing.T, e *env) {
		a, _ := mustConnect(t, e, clientKinds[0], brokertest.KeyA, "")
		id := a.(*goAgent).cs.ID()
		if id == "" {
			t.Fatal("no Mcp-Session-Id")
		}
		list := `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`
		for _, c := range []struct {
			what   string
			key    string
			status int
		}{
			{"another tenant's key", brokertest.KeyB, http.StatusNotFound},
			{"a wrong key", "not-a-key", http.StatusUnauthorized},
			{"no key", "", http.StatusUnauthorized},
			{"the session's key", brokertest.KeyA, http.StatusOK},
		} {
			h := map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": legacyProtocol}
			if c.key != "" {
				h["Authorization"] = "Bearer " + c.key
			}
			resp, body := mcpPost(t, e, h, list)
			if resp.StatusCode != c.status {
				t.Errorf("tools/list in a tenant-a MCP session with %s: HTTP %d %s, want %d", c.what, resp.StatusCode, body, c.status)
			}
		}
	})
}

// TestDiscoverBindsNoSession: the Go SDK v1.8.0 client opens with server/discover (SEP-2575,
// protocol 2026-07-28) before it falls back to initialize. That request is not initialize: it
// must neither create a Backchannel session nor bind one (SPEC 14: "The Backchannel-Session
// header is read at MCP initialize only (the response carries the id of a newly created
// session in the same header)").
func TestDiscoverBindsNoSession(t *testing.T) {
	eachStore(t, suiteConfig(), func(t *testing.T, e *env) {
		discover := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{` +
			`"io.modelcontextprotocol/clientCapabilities":{},` +
			`"io.modelcontextprotocol/clientInfo":{"name":"backchannel-mcp-go-test","version":"1.0.0"},` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
		headers := func(key, session string) map[string]string {
			h := map[string]string{"Authorization": "Bearer " + key, "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
			if session != "" {
				h[mcp.SessionHeader] = session
			}
			return h
		}
		resp, body := mcpPost(t, e, headers(brokertest.KeyA, ""), discover)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("server/discover: HTTP %d %s", resp.StatusCode, body)
		}
		if s := resp.Header.Get(mcp.SessionHeader); s != "" {
			status, _, _ := e.timeline(s, brokertest.KeyA)
			t.Errorf("server/discover created Backchannel session %s (its timeline answers %d): a request that is not "+
				"initialize must not create a session (HTTP %d, body %.300s)", s, status, resp.StatusCode, body)
		}
		// Naming a session, the discover is not bound to it either: it is answered whatever
		// the session — one that has its MCP client, or another tenant's.
		sid, _ := e.createSession(brokertest.KeyA)
		mustConnect(t, e, clientKinds[0], brokertest.KeyA, sid)
		for _, c := range []struct{ what, key string }{
			{"a session that has its MCP client", brokertest.KeyA},
			{"another tenant's session", brokertest.KeyB},
		} {
			if resp, body := mcpPost(t, e, headers(c.key, sid), discover); resp.StatusCode != http.StatusOK {
				t.Errorf("server/discover with Backchannel-Session of %s: HTTP %d %s, want 200 (the header is read at initialize only)",
					c.what, resp.StatusCode, strings.TrimSpace(body))
			}
		}
	})
}

// TestGoClientDefaultHandshake: the official Go client with its defaults (server/discover, then
// initialize) binds to a named session. The facade binds the session at the first POST without
// Mcp-Session-Id — the discover — and releases it only when that request's handler returns,
// after the response went out; the initialize the client sends as soon as it has read the
// discover answer then finds the session taken (403). On an idle machine that happens to a few
// connects in a hundred; here every response flush of a session-less POST is followed by
// 300 ms before the handler goes on (as when its goroutine is not scheduled), which makes it
// happen every time.
func TestGoClientDefaultHandshake(t *testing.T) {
	slowFlush := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
				w = &flushDelay{ResponseWriter: w, delay: 300 * time.Millisecond}
			}
			next.ServeHTTP(w, r)
		})
	}
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			e := startEnvWith(t, store, suiteConfig(), slowFlush)
			for range 3 {
				sid, _ := e.createSession(brokertest.KeyA)
				a, info, err := connectGoWith(t, e, brokertest.KeyA, sid, goOptions{discover: true})
				if err != nil {
					t.Fatalf("the default Go SDK client (server/discover, then initialize) naming session %s: HTTP %d %s(%v)",
						sid, info.Status, info.Body, err)
				}
				a.Close()
			}
		})
	}
}

// flushDelay delays the return of every Flush of a response (after the flush).
type flushDelay struct {
	http.ResponseWriter
	delay time.Duration
}

func (f *flushDelay) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
	time.Sleep(f.delay)
}

// TestProgressWithoutStandaloneStream: progress notes reach a request that carried a progress
// token even when the client opened no standalone SSE stream (GET), which Streamable HTTP makes
// optional: notifications about a request belong on that request's stream (SPEC 14: "forwarded
// as MCP notifications/progress while the request is open").
func TestProgressWithoutStandaloneStream(t *testing.T) {
	eachStore(t, suiteConfig(), func(t *testing.T, e *env) {
		sid, h := e.sessionWithHost(slowTool)
		a, _, err := connectGoWith(t, e, brokertest.KeyA, sid, goOptions{noStandaloneSSE: true})
		if err != nil {
			t.Fatal(err)
		}
		setWorking(t, a)
		id := startBackground(t, a, h, 1)
		notes := make(chan note, 64)
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		ch := callAsync(ctx, a, "wait", map[string]any{"tool_call_id": id}, func(n note) { notes <- n })
		// Give the wait time to be installed, then send notes for a while.
		for i := 1; i <= 10; i++ {
			time.Sleep(100 * time.Millisecond)
			h.progress(id, fmt.Sprintf("step %d", i))
		}
		select {
		case <-notes:
		case <-time.After(time.Second):
			t.Errorf("no notifications/progress reached the open wait on its own stream (10 notes sent over 1 s)")
		}
		h.result(id, `"done"`)
		if o := await(t, ch, "wait"); o.err != nil {
			t.Fatal(o.err)
		} else {
			expectText(t, "wait", o.r, "done", false)
		}
	})
}

// TestUnservedTool: a call of a tool that no attached (or resumable) host serves gets the error
// result `Tool NAME is not available` (SPEC 4, with the texts of SPEC 13 as MCP text content:
// SPEC 14) — whether its host's slot expired, the host withdrew the tool, or no host ever
// declared it.
func TestUnservedTool(t *testing.T) {
	cfg := suiteConfig()
	cfg.ResumeWindow = time.Second
	each(t, cfg, func(t *testing.T, e *env, k clientKind) {
		sid, h := e.sessionWithHost(lookupTool, slowTool)
		h2 := e.dialHost(map[string]any{"session_id": sid, "api_key": brokertest.KeyA,
			"tools": []any{map[string]any{"name": "ephemeral", "description": "Served by a host that goes away.",
				"parameters": map[string]any{"type": "object"}}}})
		a, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		setWorking(t, a)
		awaitTools(t, a, "ephemeral is listed", func(n []string) bool { return has(n, "ephemeral") })

		t.Run("expired host", func(t *testing.T) {
			h2.drop()
			e.awaitEntry(sid, "the expiry of the dropped host's slot", func(en entry) bool {
				return en.Kind == "notice" && en.Detail["text"] == "slot expired"
			})
			expectUnavailable(t, a, "ephemeral")
		})
		t.Run("withdrawn tool", func(t *testing.T) {
			h.send(map[string]any{"type": "tools.declare", "tools": []any{lookupTool}})
			h.expect("tools.declared")
			awaitTools(t, a, "slow, withdrawn by its host, must go", func(n []string) bool { return !has(n, "slow") })
			expectUnavailable(t, a, "slow")
		})
		t.Run("never declared", func(t *testing.T) {
			expectUnavailable(t, a, "nosuch")
		})
	})
}

// expectUnavailable calls name and expects the not-available error result.
func expectUnavailable(t *testing.T, a agent, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	r, err := a.Call(ctx, name, map[string]any{}, nil)
	if err != nil {
		t.Errorf("tools/call %s: the protocol error %q instead of the result `error: Tool %s is not available` (isError)", name, err, name)
		return
	}
	expectText(t, "tools/call "+name, r, "error: Tool "+name+" is not available", true)
}

// TestToolListFollowsHosts: tools/list shows the session's host tools (SPEC 14): a tool whose
// only host's slot expired (SPEC 10: "its tools are withdrawn") is no longer listed.
func TestToolListFollowsHosts(t *testing.T) {
	cfg := suiteConfig()
	cfg.ResumeWindow = time.Second
	each(t, cfg, func(t *testing.T, e *env, k clientKind) {
		sid, _ := e.sessionWithHost(lookupTool)
		h2 := e.dialHost(map[string]any{"session_id": sid, "api_key": brokertest.KeyA,
			"tools": []any{map[string]any{"name": "ephemeral", "description": "Served by a host that goes away.",
				"parameters": map[string]any{"type": "object"}}}})
		a, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		awaitTools(t, a, "ephemeral is listed", func(n []string) bool { return has(n, "ephemeral") })
		h2.drop()
		e.awaitEntry(sid, "the expiry of the dropped host's slot", func(en entry) bool {
			return en.Kind == "notice" && en.Detail["text"] == "slot expired"
		})
		want := []string{"cancel", "lookup", "status", "wait"}
		deadline := time.Now().Add(2 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			names, err := a.Tools(ctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(names, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("tools/list 2 s after the host's slot expired: %v, want %v", names, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// TestSessionEndReleasesRequests: when the session ends (session.end from a host), an MCP
// request blocked in the session — here `wait {"timeout_minutes": 5}` — is answered instead
// of hanging until its own deadline (SPEC 3.6: the session's connections are closed; SPEC 14).
func TestSessionEndReleasesRequests(t *testing.T) {
	each(t, suiteConfig(), func(t *testing.T, e *env, k clientKind) {
		sid, h := e.sessionWithHost(slowTool)
		a, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		setWorking(t, a)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := callAsync(ctx, a, "wait", map[string]any{"timeout_minutes": 5}, nil)
		time.Sleep(200 * time.Millisecond) // let the wait be installed
		h.send(map[string]any{"type": "session.end"})
		h.expect("session.ended")
		e.awaitEntry(sid, "session_end", func(en entry) bool { return en.Kind == "session_end" })
		select {
		case o := <-ch:
			t.Logf("the blocked wait ended with %+v / %v", o.r, o.err)
		case <-time.After(3 * time.Second):
			t.Errorf("a blocked `wait {\"timeout_minutes\": 5}` still hangs 3 s after its session ended")
			cancel()
			<-ch
			// The Go client sends notifications/cancelled asynchronously: give it time to go
			// out before the client is closed (see TestCloseDuringCall for what happens if not).
			time.Sleep(500 * time.Millisecond)
		}
	})
}

// TestHostToolSchemaWithoutType: a host tool whose parameters are a valid JSON Schema without
// `"type": "object"` (here `{}`, which accepts any arguments) is served to MCP clients like any
// other. The MCP SDK's Server.AddTool panics on such a schema; a panic on the goroutine of
// AgentPort.OnToolsChanged kills the whole broker process, so this scenario runs in a child
// process (the test binary again, TestHostToolSchemaWithoutTypeChild).
func TestHostToolSchemaWithoutType(t *testing.T) {
	for _, when := range []string{"after", "before"} {
		t.Run("declared "+when+" initialize", func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHostToolSchemaWithoutTypeChild$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), "BACKCHANNEL_MCP_CHILD="+when)
			out, err := cmd.CombinedOutput()
			if err != nil {
				lines := strings.Split(string(out), "\n")
				var keep []string
				for _, l := range lines {
					if strings.Contains(l, "panic") || strings.Contains(l, "FAIL") || strings.Contains(l, "Error") ||
						strings.Contains(l, "_test.go") || strings.Contains(l, "broker/mcp/mcp.go") {
						keep = append(keep, l)
					}
				}
				if len(keep) > 30 {
					keep = keep[:30]
				}
				t.Errorf("a host tool with parameters {} declared %s the MCP client's initialize: the child broker failed (%v):\n%s",
					when, err, strings.Join(keep, "\n"))
			}
		})
	}
}

// TestHostToolSchemaWithoutTypeChild is the scenario of TestHostToolSchemaWithoutType; it does
// nothing unless run as that test's child.
func TestHostToolSchemaWithoutTypeChild(t *testing.T) {
	when := os.Getenv("BACKCHANNEL_MCP_CHILD")
	if when == "" {
		return
	}
	e := startEnv(t, "memory", suiteConfig())
	loose := map[string]any{"name": "loose", "description": "Takes anything.", "parameters": map[string]any{}}
	sid, join := e.createSession(brokertest.KeyA)
	var h *host
	if when == "before" {
		h = e.dialHost(map[string]any{"session_id": sid, "join_token": join, "tools": []any{loose}})
	}
	a, info, err := connectGo(t, e, brokertest.KeyA, sid)
	if err != nil {
		t.Fatalf("initialize: HTTP %d %s: %v", info.Status, info.Body, err)
	}
	if when == "after" {
		h = e.dialHost(map[string]any{"session_id": sid, "join_token": join, "tools": []any{loose}})
	}
	awaitTools(t, a, "loose is listed", func(n []string) bool { return has(n, "loose") })
	setWorking(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	ch := callAsync(ctx, a, "loose", map[string]any{"anything": []int{1}}, nil)
	tc := h.toolCall("loose")
	h.result(tc.str("call_id"), `"ok"`)
	if o := await(t, ch, "loose"); o.err != nil {
		t.Fatal(o.err)
	} else {
		expectText(t, "loose", o.r, "ok", false)
	}
}

// TestCloseDuringCall: a client that ends its MCP session (DELETE, the way the Streamable HTTP
// transport ends a session) while one of its requests is blocked — here a `wait` for a
// background call — gets its DELETE answered promptly, and the Backchannel session is free
// again for the next MCP client (SPEC 14: an MCP client is bound to its session only through
// the MCP session).
func TestCloseDuringCall(t *testing.T) {
	each(t, suiteConfig(), func(t *testing.T, e *env, k clientKind) {
		sid, h := e.sessionWithHost(slowTool)
		a, _ := mustConnect(t, e, k, brokertest.KeyA, sid)
		setWorking(t, a)
		id := startBackground(t, a, h, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		waitCh, _, _ := openWait(t, ctx, a, h, id)

		req, err := http.NewRequest(http.MethodDelete, e.mcpURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+brokertest.KeyA)
		req.Header.Set("Mcp-Session-Id", a.MCPSession())
		req.Header.Set("Mcp-Protocol-Version", legacyProtocol)
		deleted := make(chan string, 1)
		go func() {
			resp, err := noKeepAlive.Do(req)
			if err != nil {
				deleted <- err.Error()
				return
			}
			resp.Body.Close()
			deleted <- resp.Status
		}()
		answered := false // the DELETE's answer was received
		select {
		case status := <-deleted:
			answered = true
			t.Logf("DELETE: %s", status)
		case <-time.After(3 * time.Second):
			t.Errorf("DELETE of the MCP session with a wait in flight: no answer within 3 s")
		}
		deadline := time.Now().Add(3 * time.Second)
		for {
			b, info, err := k.connect(t, e, brokertest.KeyA, sid)
			if err == nil {
				b.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("3 s after the MCP session bound to %s was deleted (with a wait in flight), "+
					"a new client's initialize still gets HTTP %d %s(%v)", sid, info.Status, info.Body, err)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		// Release the blocked wait (the job completes), and with it whatever waits for it.
		h.result(id, `"done"`)
		if !answered {
			<-deleted
		}
		cancel()
		<-waitCh
	})
}
