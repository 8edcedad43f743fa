package redisstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/internal/redistest"
	"github.com/backchannel-io/backchannel/jobs"
)

// TestTimelineSizeKey checks the key that keeps a timeline's size for its cap (SPEC 18
// --timeline-max-bytes): it holds the sum of the sizes of the entries offered, lives exactly as
// long as the timeline (both renewed when a job ends), and a timeline kept from before the key
// existed counts as a new one.
func TestTimelineSizeKey(t *testing.T) {
	client := redistest.New(t)
	prefix := redistest.Prefix(t)
	s := newStoreWithPrefix(t, client, prefix)
	ctx := context.Background()
	sess := "sess-size"
	tlKey, sizeKey := prefix+"{t:acme}:timeline:"+sess, prefix+"{t:acme}:tlsize:"+sess
	offered := int64(0)
	apply := func(tr *jobs.Transition) {
		t.Helper()
		tr.ID, tr.Tenant, tr.SessionID, tr.TimelineMax, tr.NowMS = jobs.NewCallID(), "acme", sess, 4096, 5
		for _, e := range tr.Entries {
			b, _ := json.Marshal(e)
			offered += int64(len(b))
		}
		if err := s.Apply(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	size := func() int64 {
		t.Helper()
		n, err := client.Get(ctx, sizeKey).Int64()
		if err != nil {
			t.Fatalf("GET %s: %v", sizeKey, err)
		}
		return n
	}
	sameTTL := func(what string, maxTTL time.Duration) {
		t.Helper()
		a, _ := client.PTTL(ctx, tlKey).Result()
		b, _ := client.PTTL(ctx, sizeKey).Result()
		// One script sets both; Redis 7.0 takes the time per command even in a script, so
		// the size key may expire a millisecond after the timeline.
		if a <= 0 || b <= 0 || a > maxTTL || b > maxTTL || (a-b).Abs() > 50*time.Millisecond {
			t.Fatalf("%s: timeline TTL %v, size TTL %v, want both the same, at most %v", what, a, b, maxTTL)
		}
	}
	note := func(n int) jobs.Entry {
		return jobs.Entry{AtMS: 1, Kind: jobs.KindProgress, CallID: "call_1", Detail: map[string]any{"note": strings.Repeat("x", n)}}
	}
	apply(&jobs.Transition{CallID: "call_1", Retention: time.Minute, Entries: []jobs.Entry{note(10), note(20)}})
	if got := size(); got != offered {
		t.Fatalf("size %d, want %d", got, offered)
	}
	sameTTL("new timeline", time.Minute)
	// Past the cap the size still counts the entries whole.
	apply(&jobs.Transition{CallID: "call_1", Retention: time.Hour, Entries: []jobs.Entry{note(5000), note(3000)}})
	if got := size(); got != offered {
		t.Fatalf("size %d past the cap, want %d (the entries as offered)", got, offered)
	}
	sameTTL("appended", time.Minute)
	if n, _ := client.LLen(ctx, tlKey).Result(); n != 5 {
		t.Fatalf("timeline of %d entries, want 5 (two, the notice, two cut)", n)
	}
	// A job that ends renews both.
	j := &jobs.Job{Tenant: "acme", SessionID: sess, CallID: "call_2", State: jobs.Pending, Version: 1, Tool: jobs.Tool{Name: "t"}}
	apply(&jobs.Transition{CallID: j.CallID, Check: true, Job: j, Retention: time.Hour})
	done := j.Clone()
	done.State, done.Version = jobs.Completed, 2
	apply(&jobs.Transition{CallID: j.CallID, Check: true, Expect: 1, Job: done, From: jobs.Pending, Retention: time.Hour,
		Entries: []jobs.Entry{{AtMS: 2, Kind: jobs.KindResult, CallID: j.CallID, Detail: map[string]any{}}}})
	if a, _ := client.PTTL(ctx, tlKey).Result(); a <= time.Minute {
		t.Fatalf("timeline TTL %v after a job ended, want it renewed to an hour", a)
	}
	sameTTL("job ended", time.Hour)
	// A timeline without a size key (written before the cap) counts as a new one: the size
	// starts from the entries appended now, and both keys get the retention.
	if err := client.Del(ctx, sizeKey).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.PExpire(ctx, tlKey, 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	offered = 0
	apply(&jobs.Transition{CallID: "call_1", Retention: time.Hour, Entries: []jobs.Entry{note(1)}})
	if got := size(); got != offered {
		t.Fatalf("size %d, want %d", got, offered)
	}
	sameTTL("timeline without a size key", time.Hour)
	if a, _ := client.PTTL(ctx, tlKey).Result(); a <= 30*time.Second {
		t.Fatalf("timeline TTL %v, want the retention", a)
	}
}
