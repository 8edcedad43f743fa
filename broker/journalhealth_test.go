package broker

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/backchannel-io/backchannel/internal/redistest"
	"github.com/backchannel-io/backchannel/jobs/redisstore"
)

// TestReadyzShowsFailingJournalWrites: a Redis that answers PING but refuses writes (it is
// full) fails the node's journal writes. Each is counted; once they have failed for
// journalFailingAfter, none succeeding, /readyz answers 503 "journal writes failing"; when
// Redis takes writes again the held frames are written and the node is ready.
func TestReadyzShowsFailingJournalWrites(t *testing.T) {
	rdb := redistest.New(t)
	var ahead atomic.Int64
	n, _ := redisNode(t, "a", redisstore.Options{Client: rdb, Prefix: redistest.Prefix(t)}, func(n *Node) {
		n.now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	})
	ready := func() (int, string) {
		w := httptest.NewRecorder()
		n.ready(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		var body struct{ Reason string }
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		return w.Code, body.Reason
	}
	s, err := n.CreateSession("tenant-t", ModelConfig{})
	if err != nil {
		t.Fatal(err)
	}
	host, _ := connect(t, n, map[string]any{"session_id": s.ID(), "join_token": s.JoinToken()})
	if code, _ := ready(); code != http.StatusOK {
		t.Fatalf("/readyz before the fault: %d", code)
	}
	ctx := context.Background()
	full := func(on bool) {
		t.Helper()
		limit := "0"
		if on {
			limit = "1"
		}
		if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ConfigSet(ctx, "maxmemory", limit).Err(); err != nil {
			t.Fatal(err)
		}
	}
	full(true)
	t.Cleanup(func() { full(false) })
	host.send(map[string]any{"type": "job.cancel", "id": "b1", "call_id": "call_00000000000000000000"})
	failed := func() float64 {
		var m dto.Metric
		_ = n.metrics.journalErrors.Write(&m)
		return m.GetCounter().GetValue()
	}
	for deadline := time.Now().Add(10 * time.Second); failed() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no journal write failed while Redis refused writes")
		}
	}
	if code, _ := ready(); code != http.StatusOK {
		t.Errorf("/readyz right after the first failure: %d, want 200 (not failing for %v yet)", code, journalFailingAfter)
	}
	ahead.Store(int64(journalFailingAfter))
	if code, reason := ready(); code != http.StatusServiceUnavailable || reason != "journal writes failing" {
		t.Errorf("/readyz once journal writes failed for %v: %d %q, want 503 journal writes failing", journalFailingAfter, code, reason)
	}
	full(false)
	if f := host.next(); f["ref"] != "b1" {
		t.Fatalf("once Redis took writes again the host got %v, want the held answer", f)
	}
	if code, _ := ready(); code != http.StatusOK {
		t.Errorf("/readyz after the journal wrote again: %d, want 200", code)
	}
}
