package wiretest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestCreateSessionHTTP covers POST /v1/sessions (SPEC 3.1): the 201 body, 401 for a missing or
// wrong key, 400 bad_frame for a malformed body, every error body exactly {code, message}.
func TestCreateSessionHTTP(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{}, func(t *testing.T, b *brokertest.Broker) {
		url := b.URL + "/v1/sessions"
		for _, body := range []string{"", "{}", `{"metadata":{"customer":"c-1","n":[1,2]}}`, `{"model":{"kind":"scripted","instructions":"be brief"}}`} {
			ct := ""
			if body != "" {
				ct = "application/json"
			}
			status, hdr, data := HTTPDo(t, "POST", url, brokertest.KeyA, ct, body)
			if status != http.StatusCreated {
				t.Fatalf("POST %q: status %d, want 201: %s", body, status, data)
			}
			if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("POST %q: Content-Type %q", body, ct)
			}
			m := decodeObject(t, "POST /v1/sessions", data)
			for _, k := range []string{"session_id", "join_token", "caller_url"} {
				if s, _ := m[k].(string); s == "" {
					t.Errorf("POST %q: %s missing or not a non-empty string: %s", body, k, data)
				}
			}
			if n, _ := m["resume_window_ms"].(json.Number); n.String() != "3000" {
				t.Errorf("POST %q: resume_window_ms %v, want 3000 (the broker's --resume-window)", body, m["resume_window_ms"])
			}
		}

		for _, key := range []string{"", "not-a-key", brokertest.KeyA + "x"} {
			status, _, data := HTTPDo(t, "POST", url, key, "", "")
			checkHTTPError(t, "POST with key "+key, status, data, http.StatusUnauthorized, "unauthorized")
		}
		// A key sent another way than Bearer is no key.
		req, _ := http.NewRequest("POST", url, nil)
		req.Header.Set("Authorization", "Basic "+brokertest.KeyA)
		tr := &http.Transport{DisableKeepAlives: true}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST with Authorization: Basic: status %d, want 401", resp.StatusCode)
		}

		for _, body := range []string{`{"model":`, `[1,2]`, `"x"`, `{"model":"scripted"}`, `{"metadata":[1]}`, `{"model":{"kind":"bogus"}}`, "\x00\x01",
			`null`, `{} x`, `{}{}`, `{"model":{"kind":"scripted"}} {"metadata":{}}`} {
			status, _, data := HTTPDo(t, "POST", url, brokertest.KeyA, "application/json", body)
			checkHTTPError(t, "POST malformed "+body, status, data, http.StatusBadRequest, "bad_frame")
		}
	})
}

// TestHello covers hello and welcome (SPEC 3.2–3.3, 3.5, 10): creating a session with an API
// key, attaching with a join token or a key of the tenant, the welcome's fields, and every
// refusal (error frame then close 1008), other tenants answered exactly like a missing session.
func TestHello(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{}, func(t *testing.T, b *brokertest.Broker) {
		// welcomed sends a hello with the id "hello-"+name and checks its welcome.
		welcomed := func(c *Conn, name string, members map[string]any, sid string, created bool, before time.Time) Frame {
			t.Helper()
			members["id"] = "hello-" + name
			w := c.Hello(members)
			if w.Type != "welcome" {
				t.Fatalf("%s: hello answered %s, want welcome", name, w)
			}
			if w.Str("ref") != "hello-"+name {
				t.Errorf("%s: welcome %s: want ref %q, the hello's id (SPEC 2: every answer carries ref)", name, w, "hello-"+name)
			}
			if sid != "" && w.Str("session_id") != sid {
				t.Errorf("%s: welcome session_id %q, want %q", name, w.Str("session_id"), sid)
			}
			if w.Str("session_id") == "" || w.Str("connection_id") == "" {
				t.Errorf("%s: welcome without session_id/connection_id: %s", name, w)
			}
			if tok := w.Str("resume_token"); len(tok) < 22 {
				t.Errorf("%s: resume_token %q shorter than 22 characters", name, tok)
			}
			if w.Int("heartbeat_ms") != 15000 || w.Int("resume_window_ms") != 3000 {
				t.Errorf("%s: welcome %s: want heartbeat_ms 15000, resume_window_ms 3000", name, w)
			}
			now := time.Now()
			if st := w.Int("server_time_ms"); st < before.Add(-2*time.Second).UnixMilli() || st > now.Add(2*time.Second).UnixMilli() {
				t.Errorf("%s: server_time_ms %d is not now (%d)", name, st, now.UnixMilli())
			}
			if w.Has("seq") {
				t.Errorf("%s: welcome carries seq: %s", name, w)
			}
			if created != w.Has("join_token") {
				t.Errorf("%s: welcome join_token present=%v, want %v: %s", name, w.Has("join_token"), created, w)
			}
			if created && len(w.Str("join_token")) < 16 {
				t.Errorf("%s: join_token %q too short", name, w.Str("join_token"))
			}
			return w
		}
		refused := func(name string, members map[string]any, code string) Frame {
			t.Helper()
			c := Dial(t, b.WSURL, name)
			members["id"] = "hello-" + name
			e := c.Hello(members)
			if e.Type != "error" || e.Str("code") != code {
				t.Fatalf("%s: hello answered %s, want error %s", name, e, code)
			}
			if e.Str("ref") != "hello-"+name || e.Str("message") == "" || !e.Has("retryable") {
				t.Errorf("%s: error %s: want ref %q, a message and retryable", name, e, "hello-"+name)
			}
			c.ExpectClosed(websocket.StatusPolicyViolation)
			return e
		}

		// POST, then attach with the join token and with the tenant's key.
		sid, jt := createSession(t, b, brokertest.KeyA)
		start := time.Now()
		h1 := Dial(t, b.WSURL, "host-jt")
		welcomed(h1, "join token", map[string]any{"role": "host", "session_id": sid, "join_token": jt}, sid, false, start)
		h2 := Dial(t, b.WSURL, "host-key")
		welcomed(h2, "api key", map[string]any{"role": "host", "session_id": sid, "api_key": brokertest.KeyA}, sid, false, start)
		if h1.Welcome.Str("connection_id") == h2.Welcome.Str("connection_id") || h1.Welcome.Str("resume_token") == h2.Welcome.Str("resume_token") {
			t.Errorf("two connections share a connection_id or resume_token: %s / %s", h1.Welcome, h2.Welcome)
		}

		// An API key alone creates a session; its welcome carries the join token, which attaches.
		c := Dial(t, b.WSURL, "creator")
		w := welcomed(c, "api key alone", map[string]any{"role": "host", "api_key": brokertest.KeyB}, "", true, start)
		if w.Str("session_id") == sid {
			t.Fatalf("hello with api_key alone attached to an existing session")
		}
		j := Dial(t, b.WSURL, "joiner")
		welcomed(j, "join token of a created session", map[string]any{"role": "agent", "session_id": w.Str("session_id"), "join_token": w.Str("join_token")}, w.Str("session_id"), false, start)
		// The session is usable: the agent gets an answer to a call (no host serves "x").
		j.Send(map[string]any{"type": "agent.tool_call", "call_id": "a1", "conversation_id": "root", "name": "x", "arguments": map[string]any{}})
		if r := j.Expect(TypeWith("agent.tool_result", "call_id", "a1")); r.Str("content") != "error: Tool x is not available" || r.Str("kind") != "error" {
			t.Errorf("call of an undeclared tool answered %s, want kind error, content %q", r, "error: Tool x is not available")
		}

		// Refusals: error, then close 1008.
		refused("wrong-token", map[string]any{"role": "host", "session_id": sid, "join_token": jt + "x"}, "unauthorized")
		refused("other-session-token", map[string]any{"role": "host", "session_id": sid, "join_token": w.Str("join_token")}, "unauthorized")
		refused("unknown-key", map[string]any{"role": "host", "api_key": "no-such-key"}, "unauthorized")
		refused("unknown-key-with-session", map[string]any{"role": "host", "session_id": sid, "api_key": "no-such-key"}, "unauthorized")
		refused("no-credentials", map[string]any{"role": "host", "session_id": sid}, "unauthorized")
		refused("nothing", map[string]any{"role": "host"}, "unauthorized")

		// A session of another tenant is not_found, exactly like one that does not exist.
		missing := "sess_" + strings.Repeat("q", len(sid)-len("sess_"))
		other := refused("other-tenant", map[string]any{"role": "host", "session_id": sid, "api_key": brokertest.KeyB}, "not_found")
		none := refused("missing", map[string]any{"role": "host", "session_id": missing, "api_key": brokertest.KeyB}, "not_found")
		other.M["ref"], none.M["ref"] = "", ""
		if d := sameAnswer(other, none, []string{sid}, []string{missing}); d != "" {
			t.Errorf("another tenant's session is not answered like a missing one:\n  %s", d)
		}
		// A wrong token answers unauthorized whether or not the session exists (SPEC 18): a join
		// token for a missing session is answered exactly like a wrong one for an existing one.
		noneJT := refused("missing-jt", map[string]any{"role": "host", "session_id": missing, "join_token": jt}, "unauthorized")
		wrongJT := refused("wrong-jt-again", map[string]any{"role": "host", "session_id": sid, "join_token": jt + "x"}, "unauthorized")
		noneJT.M["ref"], wrongJT.M["ref"] = "", ""
		if d := sameAnswer(noneJT, wrongJT, []string{missing}, []string{sid}); d != "" {
			t.Errorf("a join token for a missing session is answered differently from a wrong one:\n  %s", d)
		}

		// One text agent per session, never beside a caller (SPEC 10): a second agent is forbidden.
		a1 := Dial(t, b.WSURL, "agent-1")
		welcomed(a1, "first agent", map[string]any{"role": "agent", "session_id": sid, "join_token": jt}, sid, false, start)
		refused("second-agent", map[string]any{"role": "agent", "session_id": sid, "join_token": jt}, "forbidden")
		refused("caller-beside-agent", map[string]any{"role": "caller", "session_id": sid, "join_token": jt}, "forbidden")

		// Hello is only the first frame; a bad hello is bad_frame.
		refused("bad-protocol", map[string]any{"role": "host", "session_id": sid, "join_token": jt, "protocol": "backchannel.v0"}, "bad_frame")
		refused("bad-role", map[string]any{"role": "janitor", "session_id": sid, "join_token": jt}, "bad_frame")
		h1.Send(map[string]any{"type": "hello", "id": "again", "protocol": "backchannel.v1", "role": "host", "session_id": sid, "join_token": jt})
		if e := h1.Expect("error"); e.Str("code") != "bad_frame" || e.Str("ref") != "again" {
			t.Errorf("a second hello answered %s, want bad_frame with ref", e)
		}
		// The first frame must be hello.
		first := Dial(t, b.WSURL, "no-hello")
		first.Send(map[string]any{"type": "tool_progress", "id": "p", "handle": "h", "note": "x"})
		if e := first.Expect("error"); e.Str("code") != "bad_frame" || e.Str("ref") != "p" {
			t.Errorf("a first frame that is not hello: %s, want bad_frame with ref p (SPEC 2: an answer carries the frame's id)", e)
		}
		first.ExpectClosed(websocket.StatusPolicyViolation)

		// The connections that were accepted are all still open.
		for _, conn := range []*Conn{h1, h2, c, j, a1} {
			if conn.IsClosed() {
				t.Errorf("%s was closed", conn.Name)
			}
		}
	})
}

// TestHelloTimeout covers SPEC 3.2: a connection that sends no hello within 10 s is closed with
// 1008.
func TestHelloTimeout(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{}, func(t *testing.T, b *brokertest.Broker) {
		c := Dial(t, b.WSURL, "silent")
		start := time.Now()
		status, err := c.WaitClosed(13 * time.Second)
		if err != nil || status != websocket.StatusPolicyViolation {
			t.Fatalf("a silent connection: status %d (%v), want 1008 after 10 s", status, err)
		}
		if el := time.Since(start); el < 9500*time.Millisecond {
			t.Errorf("closed %v after connecting, before the 10 s hello timeout", el)
		}
	})
}
