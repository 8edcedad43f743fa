package wiretest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestTimelineCap covers SPEC 18 --timeline-max-bytes over a real broker: 100 tool_progress
// notes of 100 KiB on one job (10 MiB offered) leave a timeline of about the cap: the notes
// that fit are whole, the rest keep their kind and ids with the note cut to 256 bytes and
// "truncated": true, and one notice says so. On Redis, the timeline key's memory stays bounded
// too.
func TestTimelineCap(t *testing.T) {
	t.Parallel()
	const capBytes, notes, noteBytes = 1 << 20, 100, 100 << 10
	// What a cut entry may add past the cap: its ids, at_ms, 256 bytes of note, JSON.
	const perEntry = 1024
	cfg := broker.Config{BackgroundAfter: 30 * time.Second, Limits: broker.Limits{TimelineMaxBytes: capBytes}}
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			opts := brokertest.Options{Store: store, Config: cfg}
			if store == "redis" {
				opts = brokertest.SharedRedis(t)
				opts.Config = cfg
			}
			b := brokertest.Start(t, opts)
			s := newSession(t, b, brokertest.KeyA)
			h := s.host("host", decl("job", "deferred", true, "timeout", "30s"))
			id := s.deferJob(h, "a1", "job", "cap-handle", "Big notes")
			// Two-byte characters where the cut falls (byte 256 is inside one), ASCII after.
			note := func(i int) string {
				p := fmt.Sprintf("note %03d:", i) + strings.Repeat("ü", 200)
				return p + strings.Repeat("x", noteBytes-len(p))
			}
			for i := range notes {
				h.Send(map[string]any{"type": "tool_progress", "id": nextID("p-"), "handle": "cap-handle", "note": note(i)})
			}
			result(h, "", "cap-handle", `{"done":true}`)
			// The broker works through 10 MiB of notes: slow under the race detector, so the
			// timeline is polled less often and for longer than waitTimeline does.
			var es []Entry
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				if es = s.timeline(); has("result", id)(es) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no result entry within 60 s; %d entries", len(es))
				}
			}
			for _, f := range h.History() {
				if f.Type == "error" {
					t.Fatalf("the host got %s", f)
				}
			}

			total := timelineBytes(t, b, s.sid)
			if limit := capBytes + (notes+8)*perEntry; total > limit {
				t.Fatalf("timeline of %d bytes after %d notes of %d bytes, want at most %d (the cap %d plus %d per entry)",
					total, notes, noteBytes, limit, capBytes, perEntry)
			}
			t.Logf("%d notes of %d bytes: a timeline of %d entries, %d bytes", notes, noteBytes, len(es), total)
			var notices []Entry
			whole, cut := 0, 0
			for _, e := range es {
				switch e.Kind {
				case "notice":
					notices = append(notices, e)
				case "progress":
					n, _ := e.Detail["note"].(string)
					i := whole + cut
					if e.CallID != id || e.Handle != "cap-handle" {
						t.Fatalf("progress entry %v lost its ids", e)
					}
					if e.Detail["truncated"] == true {
						if len(n) > 256 || len(n) < 250 || !utf8.ValidString(n) || !strings.HasPrefix(note(i), n) {
							t.Fatalf("cut note %d: %d bytes %.40q…, want the first (up to) 256 bytes", i, len(n), n)
						}
						cut++
						continue
					}
					if cut > 0 || n != note(i) {
						t.Fatalf("progress entry %d is neither whole nor cut (after %d cut): %.80s", i, cut, e)
					}
					whole++
				}
			}
			if whole+cut != notes || whole == 0 || whole > capBytes/noteBytes || cut == 0 {
				t.Fatalf("%d whole and %d cut notes, want %d in all, the first ones whole (at most %d)", whole, cut, notes, capBytes/noteBytes)
			}
			if len(notices) != 1 || notices[0].Detail["text"] != fmt.Sprintf("timeline over %d bytes: entry details are cut to 256 bytes", capBytes) {
				t.Fatalf("notices %v, want exactly one saying the timeline passed %d bytes", notices, capBytes)
			}
			if r := find(es, "result", id); len(r) != 1 || r[0].Detail["state"] != "completed" {
				t.Fatalf("result entries %v", r)
			}

			if store != "redis" {
				return
			}
			ctx := context.Background()
			tlKey := opts.Prefix + "{t:" + brokertest.TenantA + "}:timeline:" + s.sid
			mem, err := opts.Redis.MemoryUsage(ctx, tlKey, 0).Result()
			if err != nil {
				t.Fatalf("MEMORY USAGE %s: %v", tlKey, err)
			}
			if limit := int64(capBytes + (notes+8)*perEntry + 64<<10); mem > limit {
				t.Fatalf("the timeline key uses %d bytes of Redis memory, want at most %d", mem, limit)
			}
			t.Logf("Redis: MEMORY USAGE of the timeline key %d bytes", mem)
			// The size the cap is measured against counts every note whole.
			sizeKey := opts.Prefix + "{t:" + brokertest.TenantA + "}:tlsize:" + s.sid
			if n, err := opts.Redis.Get(ctx, sizeKey).Int64(); err != nil || n < notes*noteBytes {
				t.Fatalf("timeline size key %s: %d (%v), want at least %d", sizeKey, n, err, notes*noteBytes)
			}
		})
	}
}

// timelineBytes is the sum of the sizes of the session's timeline entries as GET answers them.
func timelineBytes(t *testing.T, b *brokertest.Broker, sid string) int {
	t.Helper()
	status, _, body := HTTPDo(t, "GET", b.URL+"/v1/sessions/"+sid+"/timeline", brokertest.KeyA, "", "")
	if status != http.StatusOK {
		t.Fatalf("timeline: status %d: %.300s", status, body)
	}
	var doc struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range doc.Entries {
		n += len(e)
	}
	return n
}
