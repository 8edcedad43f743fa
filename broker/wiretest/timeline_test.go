package wiretest

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestTimeline covers SPEC 16: the entries of one job's life in order (call → deferred →
// progress → result) with at_ms, kind and a detail object; ?follow=1 streaming
// application/x-ndjson, existing entries first, then new ones as they happen.
func TestTimeline(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))
		start := time.Now().UnixMilli()
		id := s.deferJob(h, "a1", "job", "tl-handle", "Timeline job")
		h.Send(map[string]any{"type": "tool_progress", "handle": "tl-handle", "note": "half way"})
		result(h, "", "tl-handle", `{"answer":42}`)
		es := s.waitTimeline("result", has("result", id))
		var kinds []string
		for _, e := range es {
			if e.CallID == id {
				kinds = append(kinds, e.Kind)
			}
			if e.AtMS < start-1000 || e.AtMS > time.Now().UnixMilli()+1000 {
				t.Errorf("entry %v: at_ms is not epoch ms of now", e)
			}
		}
		if strings.Join(kinds, " ") != "call deferred progress result" {
			t.Errorf("entries of the job: %v, want call deferred progress result\n%s", kinds, dumpEntries(es))
		}
		if d := find(es, "deferred", id); len(d) == 1 && d[0].Handle != "tl-handle" {
			t.Errorf("deferred entry %v: want handle tl-handle", d[0])
		}
		if p := find(es, "progress", id); len(p) == 1 && p[0].Detail["note"] != "half way" {
			t.Errorf("progress entry %v: want its note in detail", p[0])
		}

		// Follow: existing entries first, then new ones.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", b.URL+"/v1/sessions/"+s.sid+"/timeline?follow=1", nil)
		req.Header.Set("Authorization", "Bearer "+brokertest.KeyA)
		tr := &http.Transport{DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
			t.Fatalf("follow: status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		lines := make(chan string, 100)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		next := func() Entry {
			t.Helper()
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("follow stream ended")
				}
				return parseEntry(t, []byte(l))
			case <-time.After(DefaultTimeout):
				t.Fatalf("follow: no line within %v", DefaultTimeout)
			}
			return Entry{}
		}
		for i, want := range es {
			if got := next(); got.Kind != want.Kind || got.AtMS != want.AtMS || got.CallID != want.CallID {
				t.Fatalf("follow line %d: %v, want %v", i, got, want)
			}
		}
		// New entries arrive on the open stream.
		id2 := s.call(h, "a2", "job").Str("call_id")
		if e := next(); e.Kind != "call" || e.CallID != id2 {
			t.Errorf("follow: new entry %v, want the call of a2", e)
		}
		h.Send(map[string]any{"type": "tool_progress", "call_id": id2, "note": "streamed"})
		if e := next(); e.Kind != "progress" || e.Detail["note"] != "streamed" {
			t.Errorf("follow: new entry %v, want the progress of a2", e)
		}
		cancel()
		for range lines {
		}

		// The endpoint's errors; health and metrics.
		st, _, body := HTTPDo(t, "GET", b.URL+"/v1/sessions/"+s.sid+"/timeline", "", "", "")
		checkHTTPError(t, "timeline without a key", st, body, http.StatusUnauthorized, "unauthorized")
		st, _, body = HTTPDo(t, "GET", b.URL+"/v1/sessions/"+s.sid+"/timeline?follow=1", "wrong-key", "", "")
		checkHTTPError(t, "follow with a wrong key", st, body, http.StatusUnauthorized, "unauthorized")
		for _, p := range []string{"/healthz", "/readyz"} {
			if st, _, body := HTTPDo(t, "GET", b.URL+p, "", "", ""); st != http.StatusOK {
				t.Errorf("%s: status %d: %s", p, st, body)
			}
		}
		st, _, body = HTTPDo(t, "GET", b.URL+"/metrics", "", "", "")
		if st != http.StatusOK || !strings.Contains(string(body), "# TYPE ") {
			t.Errorf("/metrics: status %d, no # TYPE line", st)
		}
	})
}

// TestSessionEnd covers session.end (SPEC 3.6): every open job gets tool_cancel reason discard
// before session.ended {reason: ended}, which is the last frame of every connection, closed with
// 1000; later hellos get session_ended; the timeline gets session_end and stays readable.
func TestSessionEnd(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))
		h2 := s.host("host-2", decl("other"))
		pending := s.call(h, "a1", "job").Str("call_id")
		deferred := s.deferJob(h, "a2", "job", "end-handle", "")
		other := s.call(h2, "a3", "other").Str("call_id")
		done := s.call(h, "a4", "job").Str("call_id")
		result(h, done, "", `"finished before the end"`)
		s.agentResult("a4")

		// A host that dropped just before the end (its slot still within its window).
		gone := s.host("dropped-host")
		goneToken, goneLast := gone.Welcome.Str("resume_token"), gone.LastSeq()
		gone.Cut()
		s.waitDisconnect(gone)

		h2.Send(map[string]any{"type": "session.end", "id": "bye"})
		for _, c := range []*Conn{h, h2, s.agent} {
			c.ExpectClosed(websocket.StatusNormalClosure)
			hist := c.History()
			lastF := hist[len(hist)-1]
			if lastF.Type != "session.ended" || lastF.Str("reason") != "ended" {
				t.Errorf("%s: last frame %s, want session.ended reason ended", c.Name, lastF)
			}
		}
		// The hosts got their tool_cancel (discard) for every open job, before session.ended.
		want := map[*Conn][]string{h: {pending, deferred}, h2: {other}}
		for c, ids := range want {
			hist := c.History()
			ended := len(hist) - 1
			for _, id := range ids {
				n := 0
				for i, f := range hist {
					if f.Type == "tool_cancel" && f.Str("call_id") == id {
						n++
						if f.Str("reason") != "discard" || i > ended {
							t.Errorf("%s: %s, want reason discard before session.ended", c.Name, f)
						}
					}
				}
				if n != 1 {
					t.Errorf("%s: %d tool_cancel for %s, want 1", c.Name, n, id)
				}
			}
			for _, f := range hist {
				if f.Type == "tool_cancel" && f.Str("call_id") == done {
					t.Errorf("a finished job got a tool_cancel: %s", f)
				}
			}
		}

		for _, m := range []map[string]any{
			{"role": "host", "session_id": s.sid, "join_token": s.jt},
			{"role": "agent", "session_id": s.sid, "api_key": brokertest.KeyA},
		} {
			c := Dial(t, b.WSURL, "late")
			if e := c.Hello(m); e.Type != "error" || e.Str("code") != "session_ended" {
				t.Errorf("hello after the end answered %s, want session_ended", e)
			}
			c.ExpectClosed(websocket.StatusPolicyViolation)
		}
		// Its slot had not expired: a resume is answered like any other hello to an ended session.
		late := Dial(t, b.WSURL, "late-resume")
		if e := late.Hello(map[string]any{"role": "host", "session_id": s.sid, "resume_token": goneToken, "last_seq": goneLast}); e.Type != "error" || e.Str("code") != "session_ended" {
			t.Errorf("resume of a slot within its window after the end: %s, want session_ended", e)
		}
		late.ExpectClosed(websocket.StatusPolicyViolation)
		// The timeline stays readable, with the key and with the join token.
		if st, _, body := HTTPDo(t, "GET", b.URL+"/v1/sessions/"+s.sid+"/timeline", s.jt, "", ""); st != http.StatusOK {
			t.Errorf("timeline of an ended session with its join token: %d %s", st, body)
		}
		es := s.timeline()
		if e := find(es, "session_end", ""); len(e) != 1 || e[0].Detail["reason"] != "ended" {
			t.Errorf("session_end entries %v, want one with reason ended", e)
		}
		for _, id := range []string{pending, deferred, other} {
			if c := find(es, "cancel", id); len(c) != 1 || c[0].Detail["reason"] != "discard" {
				t.Errorf("cancel entries for %s: %v, want one with reason discard", id, c)
			}
		}
		if es[len(es)-1].Kind != "session_end" {
			t.Errorf("last timeline entry %v, want session_end", es[len(es)-1])
		}
	})
}
