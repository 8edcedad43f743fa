package wiretest

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// guideResumeAnswers reads the table of docs/protocol.md section 6 that says what a refused
// resuming hello is answered: each row's situation (its first column) and the error code (the
// first `code` of its second column).
func guideResumeAnswers(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## 6. ")
	end := strings.Index(text, "\n## 7. ")
	if start < 0 || end < start {
		t.Fatal("docs/protocol.md has no section 6 followed by section 7")
	}
	code := regexp.MustCompile("`([a-z_]+)`")
	rows := map[string]string{}
	for _, line := range strings.Split(text[start:end], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "|") {
			continue
		}
		if m := code.FindStringSubmatch(cells[2]); m != nil {
			rows[strings.TrimSpace(cells[1])] = m[1]
		}
	}
	return rows
}

// guideAnswer is the code the guide's row about situation (a phrase of its first column) gives.
func guideAnswer(t *testing.T, rows map[string]string, situation string) string {
	t.Helper()
	for s, c := range rows {
		if strings.Contains(s, situation) {
			return c
		}
	}
	t.Fatalf("docs/protocol.md section 6 has no row about %q in its table of resume answers (rows: %v)", situation, rows)
	return ""
}

// TestGuideResumeAnswers: what docs/protocol.md section 6 says a refused resume is answered is
// what the broker answers (SPEC 3.6, 10) — a slot whose window ran out, a used token, frames
// lost, a session ended by session.end while the slot was within its window, a session that
// does not exist. The guide once said resume_expired for the ended session; it is session_ended.
func TestGuideResumeAnswers(t *testing.T) {
	t.Parallel()
	rows := guideResumeAnswers(t)
	want := map[string]string{
		"resume window ran out":               guideAnswer(t, rows, "resume window ran out"),
		"token already used":                  guideAnswer(t, rows, "token already used"),
		"older than what the slot's outbox":   guideAnswer(t, rows, "older than what the slot's outbox"),
		"a session that ended (`session.end`": guideAnswer(t, rows, "a session that ended (`session.end`"),
		"a session that does not exist":       guideAnswer(t, rows, "a session that does not exist"),
	}
	cfg := broker.Config{ResumeWindow: time.Second, Limits: broker.Limits{OutboxFrames: 4}}
	eachStore(t, cfg, func(t *testing.T, b *brokertest.Broker) {
		answer := func(situation, sid, token string, lastSeq int64) {
			t.Helper()
			c := Dial(t, b.WSURL, "resume: "+situation)
			e := c.Hello(map[string]any{"id": "r", "role": "host", "session_id": sid, "resume_token": token, "last_seq": lastSeq})
			if e.Type != "error" || e.Str("code") != want[situation] || e.Str("ref") != "r" {
				t.Errorf("a resume where %s: answered %s; docs/protocol.md section 6 says %s", situation, e, want[situation])
			}
			c.ExpectClosed(websocket.StatusPolicyViolation)
		}
		s := newSession(t, b, brokertest.KeyA) // its agent keeps the session alive

		// A slot whose window ran out while the session went on.
		gone := s.host("expiring")
		goneToken := gone.Welcome.Str("resume_token")
		gone.Cut()
		s.waitTimeline("the slot's expiry", func(es []Entry) bool {
			for _, e := range find(es, "notice", "") {
				if e.Detail["text"] == "slot expired" {
					return true
				}
			}
			return false
		})
		answer("resume window ran out", s.sid, goneToken, 0)

		// A token already used.
		h := s.host("rotating")
		old := h.Welcome.Str("resume_token")
		h.Cut()
		s.waitDisconnect(h)
		if _, w := s.resume("rotated", old, 0, nil); w.Type != "welcome" {
			t.Fatalf("the first resume was answered %s", w)
		}
		answer("token already used", s.sid, old, 0)

		// Frames lost: more frames than the outbox (4) holds went out after last_seq 0.
		lossy := s.host("lossy")
		for i := 0; i < 6; i++ {
			lossy.Send(map[string]any{"type": "tool_progress", "id": nextID("p-"), "handle": "none", "note": "x"})
			lossy.Expect("error")
		}
		lossyToken := lossy.Welcome.Str("resume_token")
		lossy.Cut()
		s.waitDisconnect(lossy)
		answer("older than what the slot's outbox", s.sid, lossyToken, 0)

		// A session ended by session.end while the slot was within its window.
		ended := newSession(t, b, brokertest.KeyA)
		away := ended.host("away")
		awayToken := away.Welcome.Str("resume_token")
		away.Cut()
		ended.waitDisconnect(away)
		ended.agent.Send(map[string]any{"type": "session.end"})
		ended.agent.ExpectClosed(websocket.StatusNormalClosure)
		answer("a session that ended (`session.end`", ended.sid, awayToken, 0)

		// A session that does not exist.
		answer("a session that does not exist", "sess_"+strings.Repeat("q", 20), awayToken, 0)
	})
}
