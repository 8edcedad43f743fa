package wiretest

import (
	"net/http"
	"testing"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestSessionQuota: a tenant has at most --max-sessions-per-tenant open sessions; one more is
// limit_exceeded — HTTP 429 for POST /v1/sessions, an error frame for a creating hello — and
// other tenants are not affected; a session that ends frees its place (SPEC 18).
func TestSessionQuota(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{Limits: broker.Limits{MaxSessionsPerTenant: 2}}, func(t *testing.T, b *brokertest.Broker) {
		first, jt := createSession(t, b, brokertest.KeyA)
		createSession(t, b, brokertest.KeyA)
		status, _, body := HTTPDo(t, "POST", b.URL+"/v1/sessions", brokertest.KeyA, "", "")
		checkHTTPError(t, "a third session of the tenant", status, body, http.StatusTooManyRequests, "limit_exceeded")
		c := Dial(t, b.WSURL, "creating-hello")
		if e := c.Hello(map[string]any{"id": "h", "role": "host", "api_key": brokertest.KeyA}); e.Type != "error" || e.Str("code") != "limit_exceeded" || e.Str("ref") != "h" {
			t.Errorf("a creating hello past the quota: %s, want limit_exceeded", e)
		}
		c.ExpectClosed(websocket.StatusPolicyViolation)
		createSession(t, b, brokertest.KeyB) // another tenant has its own quota

		// An ended session frees its place.
		s := &session{t: t, b: b, key: brokertest.KeyA, sid: first, jt: jt}
		h := s.host("ender")
		h.Send(map[string]any{"type": "session.end"})
		h.ExpectClosed(websocket.StatusNormalClosure)
		createSession(t, b, brokertest.KeyA)
	})
}

// TestHostSlotQuota: a session has at most --max-host-slots host slots, attached or waiting
// for a resume; one more hello is limit_exceeded and closed (SPEC 18).
func TestHostSlotQuota(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{Limits: broker.Limits{MaxHostSlots: 2}}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		s.host("one")
		away := s.host("two")
		away.Cut()
		s.waitDisconnect(away)
		c := Dial(t, b.WSURL, "three")
		if e := c.Hello(map[string]any{"id": "h", "role": "host", "session_id": s.sid, "join_token": s.jt}); e.Type != "error" || e.Str("code") != "limit_exceeded" {
			t.Errorf("a third host slot: %s, want limit_exceeded", e)
		}
		c.ExpectClosed(websocket.StatusPolicyViolation)
		// The slot that dropped is still the session's: it resumes.
		if _, w := s.resume("two-again", away.Welcome.Str("resume_token"), away.LastSeq(), nil); w.Type != "welcome" {
			t.Errorf("resuming a slot at the quota: %s", w)
		}
	})
}
