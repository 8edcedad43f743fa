package wiretest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestIsolation covers SPEC 3.5 and 11: a job of one session is invisible to every other session
// and tenant — defer, cancel, result and progress by its call id or handle are answered exactly
// as for a call that does not exist, and change nothing — and another tenant's timeline is 404.
func TestIsolation(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		owner := newSession(t, b, brokertest.KeyA)
		oh := owner.host("owner-host", decl("job", "deferred", true, "timeout", "30s"))
		deferredID := owner.deferJob(oh, "a1", "job", "iso-handle", "Private")
		pendingID := owner.call(oh, "a2", "job").Str("call_id")

		sameTenant := newSession(t, b, brokertest.KeyA)
		otherTenant := newSession(t, b, brokertest.KeyB)
		for _, intruder := range []*session{sameTenant, otherTenant} {
			ih := intruder.host("intruder", decl("job", "deferred", true, "timeout", "30s"))
			// Each probe is sent twice: about the owner's job, and about one that does not exist;
			// the answers must be the same but for the identifier.
			probe := func(kind string, build func(callID, handle string) map[string]any, callID, handle, missingCall, missingHandle string) {
				t.Helper()
				ask := func(m map[string]any) Frame {
					m["id"] = nextID("probe-")
					ih.Send(m)
					f := ih.Next()
					if f.Str("ref") != m["id"] {
						t.Fatalf("%s probe %v answered %s (no ref)", kind, m, f)
					}
					f.M["ref"] = ""
					return f
				}
				real := ask(build(callID, handle))
				none := ask(build(missingCall, missingHandle))
				if d := sameAnswer(real, none, []string{callID, handle}, []string{missingCall, missingHandle}); d != "" {
					t.Errorf("%s of another session's job is not answered like a missing call:\n  %s", kind, d)
				}
				switch real.Type {
				case "tool_deferred_ack":
					if real.Str("reason") != "unknown_call" {
						t.Errorf("%s: %s, want reason unknown_call", kind, real)
					}
				case "job.cancel_result":
					if real.Str("result") != "unknown_call" || real.Str("call_id") != "" {
						t.Errorf("%s: %s, want unknown_call and no call id", kind, real)
					}
				case "error":
					if real.Str("code") != "unknown_call" {
						t.Errorf("%s: %s, want unknown_call", kind, real)
					}
				default:
					t.Errorf("%s answered %s", kind, real)
				}
			}
			byCall := func(typ string, extra map[string]any) func(string, string) map[string]any {
				return func(callID, _ string) map[string]any {
					m := map[string]any{"type": typ, "call_id": callID}
					for k, v := range extra {
						m[k] = v
					}
					return m
				}
			}
			byHandle := func(typ string, extra map[string]any) func(string, string) map[string]any {
				return func(_, handle string) map[string]any {
					m := map[string]any{"type": typ, "handle": handle}
					for k, v := range extra {
						m[k] = v
					}
					return m
				}
			}
			missingHandle := "iso-missing"
			for _, id := range []string{pendingID, deferredID} {
				probe("tool_deferred", func(callID, _ string) map[string]any {
					return map[string]any{"type": "tool_deferred", "call_id": callID, "handle": "intruder-handle"}
				}, id, "", missingCallID, "")
				probe("job.cancel by call_id", byCall("job.cancel", nil), id, "", missingCallID, "")
				probe("tool_result by call_id", byCall("tool_result", map[string]any{"output": "stolen"}), id, "", missingCallID, "")
				probe("tool_progress by call_id", byCall("tool_progress", map[string]any{"note": "peek"}), id, "", missingCallID, "")
				probe("tool_partial_result by call_id", byCall("tool_partial_result", map[string]any{"segment": 1}), id, "", missingCallID, "")
			}
			probe("job.cancel by handle", byHandle("job.cancel", nil), "", "iso-handle", "", missingHandle)
			probe("tool_result by handle", byHandle("tool_result", map[string]any{"error": "sabotage"}), "", "iso-handle", "", missingHandle)
			probe("tool_progress by handle", byHandle("tool_progress", map[string]any{"note": "peek"}), "", "iso-handle", "", missingHandle)
			probe("tool_partial_result by handle", byHandle("tool_partial_result", map[string]any{"segment": 1}), "", "iso-handle", "", missingHandle)
			ih.Absent(100*time.Millisecond, Any)
		}
		// The intruders' own calls of the same tool name go to their own hosts, never to the owner.
		oh.Absent(200*time.Millisecond, Any)

		// Nothing changed: both jobs are still open and serve their owner.
		for _, e := range owner.timeline() {
			switch e.Kind {
			case "cancel", "result", "progress", "partial", "defer_rejected", "late_result_dropped", "duplicate_cancel":
				t.Errorf("a probe from another session left %s on the owner's timeline", e)
			}
		}
		oh.Send(map[string]any{"type": "tool_progress", "id": "own", "handle": "iso-handle", "note": "mine"})
		result(oh, pendingID, "", `"pending done"`)
		result(oh, "", "iso-handle", `"deferred done"`)
		oh.Absent(200*time.Millisecond, Type("error"))
		// The probes take seconds on a loaded machine, so a call may have run past 5 s and carry
		// duration_seconds (SPEC 13): the body is what this test is about.
		if r := owner.agentResult("a2"); bodyOf(r.Str("content")) != "pending done" {
			t.Errorf("owner's pending call: %s", r)
		}
		if r := owner.waitResult("a1"); bodyOf(r.Str("content")) != "deferred done" {
			t.Errorf("owner's deferred call: %s", r)
		}

		// Timelines: another tenant's session is 404, exactly like a missing one; the owner's
		// tenant and its join token may read it; no key is 401.
		url := func(sid string) string { return b.URL + "/v1/sessions/" + sid + "/timeline" }
		missing := "sess_" + strings.Repeat("q", len(owner.sid)-len("sess_"))
		st, _, other := HTTPDo(t, "GET", url(owner.sid), brokertest.KeyB, "", "")
		m1 := checkHTTPError(t, "other tenant's timeline", st, other, http.StatusNotFound, "not_found")
		st, _, none := HTTPDo(t, "GET", url(missing), brokertest.KeyB, "", "")
		m2 := checkHTTPError(t, "missing timeline", st, none, http.StatusNotFound, "not_found")
		if strings.ReplaceAll(m1, owner.sid, "ID") != strings.ReplaceAll(m2, missing, "ID") {
			t.Errorf("another tenant's timeline answers %q, a missing one %q", m1, m2)
		}
		st, _, _ = HTTPDo(t, "GET", url(owner.sid), owner.jt, "", "")
		if st != http.StatusOK {
			t.Errorf("timeline with the session's join token: status %d", st)
		}
		st, _, body := HTTPDo(t, "GET", url(owner.sid), "", "", "")
		checkHTTPError(t, "timeline without a key", st, body, http.StatusUnauthorized, "unauthorized")
		st, _, body = HTTPDo(t, "GET", url(owner.sid), otherTenant.jt, "", "")
		if st == http.StatusOK {
			t.Errorf("another session's join token read the timeline: %s", body)
		}
	})
}
