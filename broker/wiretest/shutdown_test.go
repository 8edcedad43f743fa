package wiretest

import (
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestShutdown covers the node shutdown of SPEC 18 with a host and a text agent attached and two
// open jobs (one deferred, one pending). With the memory store it ends every session (SPEC 3.6,
// reason ended): the host gets tool_cancel reason discard for each open job, then every
// connection gets session.ended as its last frame and close 1000. With the Redis store the jobs
// live on: every connection is closed with 1012 and gets neither session.ended nor tool_cancel.
func TestShutdown(t *testing.T) {
	t.Parallel()
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			b := brokertest.Start(t, brokertest.Options{Store: store, Config: broker.Config{BackgroundAfter: 30 * time.Second}})
			s := newSession(t, b, brokertest.KeyA)
			h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))
			deferred := s.deferJob(h, "a1", "job", nextID("shutdown-"+store+"-"), "Shutting down")
			pending := s.call(h, "a2", "job").Str("call_id")
			h.Absent(100*time.Millisecond, Any)

			memory := store == "memory"
			b.Close(memory) // what the process does on SIGTERM with this store

			if !memory {
				for _, c := range []*Conn{h, s.agent} {
					c.ExpectClosed(broker.StatusServiceRestart)
					for _, f := range c.History() {
						if f.Type == "session.ended" || f.Type == "tool_cancel" {
							t.Errorf("SPEC 18: %s got %s at a Redis-store shutdown", c.Name, f)
						}
					}
				}
				return
			}

			for _, c := range []*Conn{h, s.agent} {
				c.ExpectClosed(websocket.StatusNormalClosure)
				hist := c.History()
				if last := hist[len(hist)-1]; last.Type != "session.ended" || last.Str("reason") != "ended" {
					t.Errorf("SPEC 18, 3.6: %s: last frame %s, want session.ended reason ended", c.Name, last)
				}
				n := 0
				for _, f := range hist {
					if f.Type == "session.ended" {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%s: %d session.ended frames, want 1", c.Name, n)
				}
			}
			hist := h.History()
			for _, id := range []string{deferred, pending} {
				n := 0
				for _, f := range hist[:len(hist)-1] {
					if f.Type == "tool_cancel" && f.Str("call_id") == id {
						n++
						if f.Str("reason") != "discard" {
							t.Errorf("SPEC 3.6: %s, want reason discard", f)
						}
					}
				}
				if n != 1 {
					t.Errorf("SPEC 3.6: %d tool_cancel for open job %s before session.ended, want 1:\n%s", n, id, framesOf(hist))
				}
			}
		})
	}
}

// framesOf renders frames one a line.
func framesOf(fs []Frame) string {
	var out string
	for _, f := range fs {
		out += "  " + trunc(f.String(), 300) + "\n"
	}
	return out
}
