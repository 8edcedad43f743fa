package wiretest

import (
	"bufio"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestTimelineFromAnotherNode runs two broker nodes on one Redis (the same client and key
// prefix): a session lives on node A, and node B, which does not hold it, answers its timeline
// (forwarded to A) for an API key of its tenant or its join token (SPEC 15, 16) — whole, and with
// ?follow=1 until the session ends on A. Another tenant's key, and an id nobody used, get
// not_found as before; the memory store, which no other node shares, keeps answering not_found.
func TestTimelineFromAnotherNode(t *testing.T) {
	t.Parallel()
	opts := brokertest.SharedRedis(t)
	a := brokertest.Start(t, opts)
	b := brokertest.Start(t, opts)

	s := newSession(t, a, brokertest.KeyA)
	h := s.host("host", decl("export", "deferred", true))
	s.deferJob(h, "c1", "export", "h-export", "exporting")
	onA := s.timeline()

	url := b.URL + "/v1/sessions/" + s.sid + "/timeline"
	onB := timeline(t, b, s.sid, brokertest.KeyA)
	if len(onB) != len(onA) || len(find(onB, "deferred", "")) != 1 {
		t.Fatalf("node B's timeline:\n%s\nwant node A's:\n%s", dumpEntries(onB), dumpEntries(onA))
	}
	for _, c := range []struct{ name, url, key string }{
		{"another tenant's key", url, brokertest.KeyB},
		{"an unknown id", b.URL + "/v1/sessions/sess_nobodyusedthisidxx/timeline", brokertest.KeyA},
	} {
		status, _, body := HTTPDo(t, "GET", c.url, c.key, "", "")
		checkHTTPError(t, "node B, "+c.name, status, body, http.StatusNotFound, "not_found")
	}
	if status, _, body := HTTPDo(t, "GET", url, s.jt, "", ""); status != http.StatusOK {
		t.Errorf("node B with the join token of a session node A holds: %d %s, want 200 (forwarded to A)", status, body)
	}
	// A request another node forwarded already is answered where it arrives, never forwarded
	// again: node B cannot check a join token of a session it does not hold.
	fwd, _ := http.NewRequest("GET", url, nil)
	fwd.Header.Set("Authorization", "Bearer "+s.jt)
	fwd.Header.Set(broker.ForwardedHeader, "another-node")
	if resp, err := http.DefaultClient.Do(fwd); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a forwarded request on node B: %d, want 401 (answered on B, not forwarded on)", resp.StatusCode)
		}
	}

	// Follow on B while A ends the session: the stream has the old entries, then the end, and
	// closes.
	req, _ := http.NewRequest("GET", url+"?follow=1", nil)
	req.Header.Set("Authorization", "Bearer "+brokertest.KeyA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("follow on node B: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan Entry, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var e Entry
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				lines <- e
			}
		}
	}()
	h.Send(map[string]any{"type": "session.end", "id": "end-1"})
	h.Expect("session.ended")
	var kinds []string
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case e, ok := <-lines:
			if !ok {
				done = true
				break
			}
			kinds = append(kinds, e.Kind)
		case <-deadline:
			t.Fatalf("node B's follow stream did not end after the session ended; got %v", kinds)
		}
	}
	if len(kinds) < len(onA)+1 || kinds[len(kinds)-1] != "session_end" {
		t.Errorf("node B's follow stream %v, want node A's %d entries, then session_end last", kinds, len(onA))
	}

	mem := brokertest.Start(t, brokertest.Options{Store: "memory", Config: broker.Config{}})
	status, _, body := HTTPDo(t, "GET", mem.URL+"/v1/sessions/"+s.sid+"/timeline", brokertest.KeyA, "", "")
	checkHTTPError(t, "a memory-store node", status, body, http.StatusNotFound, "not_found")
}
