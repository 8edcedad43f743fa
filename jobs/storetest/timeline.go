package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backchannel-io/backchannel/jobs"
)

// runTimelineCap checks the timeline cap of SPEC 18 (--timeline-max-bytes), applied by the
// store in the same atomic step as the append (jobs.Transition.TimelineMax): entries whole
// while the sum of the sizes offered stays within the cap, the rest cut, one notice between.
func runTimelineCap(t *testing.T, newStore Factory) {
	t.Run("Store", func(t *testing.T) { testCapStore(t, newStore) })
	t.Run("ExactlyAtTheCap", func(t *testing.T) { testCapExact(t, newStore) })
	t.Run("NewTimelineAfterRetention", func(t *testing.T) { testCapRetention(t, newStore) })
	t.Run("Engine", func(t *testing.T) { testCapEngine(t, newFixture(t, newStore)) })
	t.Run("TwoNodesRace", func(t *testing.T) { testCapRace(t, newFixture(t, newStore)) })
}

// capBytes is the cap of the tests: 4 KiB.
const capBytes = 4096

// maxCutEntry bounds the size of a cut entry of the tests (a few detail values of at most 256
// bytes, escaped, and the ids).
const maxCutEntry = 2048

// longNote is a note of n bytes (n odd) with two-byte characters: a cut at 256 bytes lands
// inside one. It starts with id.
func longNote(id string, n int) string {
	s := id + "|"
	if len(s)%2 == 0 {
		s += "-"
	}
	return s + strings.Repeat("é", (n-len(s))/2)
}

// encodedSize is the size of e as a store encodes it.
func encodedSize(t testing.TB, e jobs.Entry) int {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// applyEntries applies a timeline-only transition with the cap.
func applyEntries(t testing.TB, s jobs.Store, sess string, retention time.Duration, es ...jobs.Entry) {
	t.Helper()
	if err := s.Apply(context.Background(), &jobs.Transition{ID: jobs.NewCallID(), Tenant: tenantA, SessionID: sess,
		CallID: "call_cap", Retention: retention, NowMS: 77, TimelineMax: capBytes, Entries: es}); err != nil {
		t.Fatal(err)
	}
}

// isCapNotice reports whether e is the notice of a timeline that passed max bytes.
func isCapNotice(e jobs.Entry, max int64) bool {
	return e.Kind == jobs.KindNotice && e.CallID == "" && e.Handle == "" &&
		e.Detail["text"] == jobs.TimelineNoticeText(max) && e.Detail["max_bytes"] == float64(max)
}

// wantCut checks that got is the cut form of the entry offered: same at_ms, kind, call id and
// handle, "truncated": true, every string of its detail at most 256 bytes of valid UTF-8, and
// each a prefix of the value it replaced (a string, or the compact JSON of any other value).
func wantCut(t testing.TB, got, offered jobs.Entry) {
	t.Helper()
	if got.AtMS != offered.AtMS || got.Kind != offered.Kind || got.CallID != offered.CallID || got.Handle != offered.Handle {
		t.Fatalf("cut entry %+v: at_ms, kind, call_id or handle differ from the entry offered (%d %s %s %s)",
			got, offered.AtMS, offered.Kind, offered.CallID, offered.Handle)
	}
	if got.Detail["truncated"] != true {
		t.Fatalf("cut entry %s %v: want truncated true", got.Kind, got.Detail)
	}
	for k, v := range offered.Detail {
		g := got.Detail[k]
		s, isString := g.(string)
		if !isString {
			continue
		}
		if len(s) > jobs.CutBytes || !utf8.ValidString(s) {
			t.Fatalf("cut entry %s: detail %q is %d bytes (valid UTF-8 %v), want at most %d", got.Kind, k, len(s), utf8.ValidString(s), jobs.CutBytes)
		}
		orig, ok := v.(string)
		if !ok {
			b, _ := json.Marshal(v)
			orig = string(b)
		}
		if !strings.HasPrefix(orig, s) || (len(orig) > jobs.CutBytes && len(s) < jobs.CutBytes-3) {
			t.Fatalf("cut entry %s: detail %q = %.80q…, want the first (up to) 256 bytes of %.80q…", got.Kind, k, s, orig)
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if len(v) > jobs.CutBytes {
				t.Fatalf("cut entry %s: a string of %d bytes in its detail", got.Kind, len(v))
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(got.Detail)
	if n := encodedSize(t, got); n > maxCutEntry {
		t.Fatalf("cut entry %s is %d bytes, want at most %d", got.Kind, n, maxCutEntry)
	}
}

// decoded is e as a timeline returns it (numbers as float64).
func decoded(t testing.TB, e jobs.Entry) jobs.Entry {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var out jobs.Entry
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantWhole(t testing.TB, got, offered jobs.Entry) {
	t.Helper()
	if want := decoded(t, offered); !reflect.DeepEqual(got, want) {
		t.Fatalf("entry before the cap: %.300v, want it whole: %.300v", got, want)
	}
}

func testCapStore(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	sess := session()
	note := func(i int) jobs.Entry {
		return jobs.Entry{AtMS: int64(100 + i), Kind: jobs.KindProgress, CallID: "call_cap", Handle: "cap-h",
			Detail: map[string]any{"note": longNote(fmt.Sprint("n", i), 1201)}}
	}
	small := jobs.Entry{AtMS: 200, Kind: jobs.KindInteraction, CallID: "call_cap", Handle: "cap-h",
		Detail: map[string]any{"interaction_id": "ia_1", "state": "ended"}}
	rows := make([]map[string]any, 2000)
	for i := range rows {
		rows[i] = map[string]any{"i": i, "v": []int{i, i}}
	}
	huge, _ := json.Marshal(map[string]any{"rows": rows, "title": strings.Repeat("t", 1000)})
	result := jobs.Entry{AtMS: 300, Kind: jobs.KindResult, CallID: "call_cap", Handle: "cap-h",
		Detail: map[string]any{"state": "completed", "output": json.RawMessage(huge), "list": rows}}

	// 3 × ~1.2 KiB whole; the fourth note takes the sum past 4 KiB, in the middle of a
	// transition; what follows is cut, and a short entry is stored as it is.
	offered := []jobs.Entry{note(0)}
	applyEntries(t, s, sess, time.Hour, note(0))
	applyEntries(t, s, sess, time.Hour, note(1), note(2))
	offered = append(offered, note(1), note(2))
	sum := 0
	for _, e := range offered {
		sum += encodedSize(t, e)
	}
	if sum+encodedSize(t, small) > capBytes || sum+encodedSize(t, small)+encodedSize(t, note(3)) <= capBytes {
		t.Fatalf("test set-up: %d bytes before the crossing transition", sum)
	}
	applyEntries(t, s, sess, time.Hour, small, note(3), result)
	applyEntries(t, s, sess, time.Hour, small)
	applyEntries(t, s, sess, time.Hour, note(4))

	es, err := s.Timeline(context.Background(), tenantA, sess, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 9 {
		t.Fatalf("timeline of %d entries, want 9 (8 offered and one notice):\n%s", len(es), dump(es))
	}
	for i, e := range offered {
		wantWhole(t, es[i], e)
	}
	wantWhole(t, es[3], small)
	if !isCapNotice(es[4], capBytes) || es[4].AtMS != note(3).AtMS {
		t.Fatalf("entry 4: %v, want the notice %q at the time of the entry that passed the cap", es[4], jobs.TimelineNoticeText(capBytes))
	}
	wantCut(t, es[5], note(3))
	wantCut(t, es[6], result)
	if es[6].Detail["state"] != "completed" {
		t.Fatalf("cut result lost its short state: %v", es[6].Detail)
	}
	wantWhole(t, es[7], small) // nothing to cut: stored as it is, no "truncated"
	wantCut(t, es[8], note(4))
	notices := 0
	for _, e := range es {
		if e.Kind == jobs.KindNotice {
			notices++
		}
	}
	if notices != 1 {
		t.Fatalf("%d notices, want exactly one:\n%s", notices, dump(es))
	}
}

// testCapExact: an entry that brings the sum to exactly the cap is whole; one byte more is not.
func testCapExact(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	sess := session()
	base := jobs.Entry{AtMS: 1, Kind: jobs.KindProgress, CallID: "call_cap", Detail: map[string]any{"note": ""}}
	fill := base
	fill.Detail = map[string]any{"note": strings.Repeat("x", capBytes-encodedSize(t, base))}
	if encodedSize(t, fill) != capBytes {
		t.Fatalf("set-up: %d bytes", encodedSize(t, fill))
	}
	applyEntries(t, s, sess, time.Hour, fill)
	tiny := jobs.Entry{AtMS: 2, Kind: jobs.KindNotice, Detail: map[string]any{}}
	applyEntries(t, s, sess, time.Hour, tiny)
	es, err := s.Timeline(context.Background(), tenantA, sess, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 3 || !isCapNotice(es[1], capBytes) {
		t.Fatalf("timeline %s, want the entry of exactly 4096 bytes whole, then the notice, then the next", dump(es))
	}
	wantWhole(t, es[0], fill)
	wantWhole(t, es[2], tiny)
}

// testCapRetention: a timeline that expired starts again from nothing: whole entries, and a
// notice of its own when it passes the cap.
func testCapRetention(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	sess := session()
	big := jobs.Entry{AtMS: 1, Kind: jobs.KindProgress, CallID: "call_cap", Detail: map[string]any{"note": longNote("r", 3001)}}
	applyEntries(t, s, sess, 300*time.Millisecond, big, big)
	if es, _ := s.Timeline(context.Background(), tenantA, sess, 0); len(es) != 3 || !isCapNotice(es[1], capBytes) {
		t.Fatalf("timeline %s, want whole, notice, cut", dump(es))
	}
	time.Sleep(700 * time.Millisecond)
	applyEntries(t, s, sess, time.Hour, big)
	applyEntries(t, s, sess, time.Hour, big)
	es, err := s.Timeline(context.Background(), tenantA, sess, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 3 || !isCapNotice(es[1], capBytes) {
		t.Fatalf("timeline after its retention %s, want whole, notice, cut", dump(es))
	}
	wantWhole(t, es[0], big)
	wantCut(t, es[2], big)
}

// newCappedEngine returns another engine over the fixture's store with a timeline cap.
func (f *fixture) newCappedEngine(max int) *jobs.Engine {
	return jobs.NewEngine(f.store, jobs.Options{
		Clock:            f.clock,
		Tenants:          []string{tenantA, tenantB},
		StoreRetry:       5 * time.Second,
		TimelineMaxBytes: max,
		OnChange: func(c jobs.Change) {
			f.mu.Lock()
			f.changes = append(f.changes, c)
			f.mu.Unlock()
		},
	})
}

// testCapEngine drives the cap through an engine: progress notes and a result with a huge
// output; the changes the engine reports keep the entries whole (the broker acts on them).
func testCapEngine(t *testing.T, f *fixture) {
	f.engine = f.newCappedEngine(capBytes)
	sess := session()
	j := f.call(sess, deferredTool)
	f.deferJob(j, "cap-h")
	notes := map[string]string{}
	for i := range 10 {
		n := longNote(fmt.Sprint("p", i), 1001)
		notes[n[:3]] = n
		if err := f.engine.Progress(f.ctx, addr(j), n); err != nil {
			t.Fatal(err)
		}
	}
	huge := json.RawMessage(`[` + strings.Repeat(`{"k":"value"},`, 20000) + `1]`)
	if _, err := f.engine.Result(f.ctx, addr(j), huge, "", false); err != nil {
		t.Fatal(err)
	}
	es := f.timeline(sess)
	wantKinds(t, kinds(es, j.CallID), "call", "deferred", "progress", "progress", "progress", "progress",
		"progress", "progress", "progress", "progress", "progress", "progress", "result")
	checkCapped(t, es, capBytes, func(e jobs.Entry) jobs.Entry {
		switch e.Kind {
		case jobs.KindProgress:
			note, _ := e.Detail["note"].(string)
			e.Detail = map[string]any{"note": notes[note[:3]]}
		case jobs.KindResult:
			e.Detail = map[string]any{"state": "completed", "output": huge}
		}
		return e
	})
	for _, e := range es {
		if e.Kind != jobs.KindNotice && e.Kind != jobs.KindCall && (e.Handle != "cap-h" || e.CallID != j.CallID) {
			t.Fatalf("entry %v lost its ids", e)
		}
	}
	if out, _ := es[len(es)-1].Detail["output"].(string); !strings.HasPrefix(string(huge), out) || len(out) != jobs.CutBytes {
		t.Fatalf("result output in the timeline: %.300v, want its JSON cut to 256 bytes", es[len(es)-1].Detail["output"])
	}
	// The job itself keeps its whole output, and the changes the whole entries.
	if got := f.load(j.CallID); string(got.Output) != string(huge) {
		t.Fatalf("job output is %d bytes, want %d", len(got.Output), len(huge))
	}
	var last jobs.Change
	for _, c := range f.events(j.CallID) {
		if c.Event == jobs.EventProgress {
			last = c
		}
	}
	if len(last.Entries) != 1 || last.Entries[0].Detail["note"] != notes["p9|"] {
		t.Fatalf("the change of the last progress note: %v, want its whole entry", last.Entries)
	}
}

// testCapRace: two engines write one session's timeline at once — progress notes through both,
// and the deadlines one of them fires. The size is kept exactly: walking the timeline in order
// and adding up the size of each entry as it was offered, every entry is whole while the sum
// is within the cap, the one that passes it comes right after the only notice, and all later
// ones are cut. Nothing is lost.
func testCapRace(t *testing.T, f *fixture) {
	const capRace = 16 << 10
	nodes := []*jobs.Engine{f.newCappedEngine(capRace), f.newCappedEngine(capRace)}
	f.engine = nodes[0]
	sess := session()
	const writers, perWriter, timeouts = 6, 12, 24
	deferred := make([]*jobs.Job, writers)
	for w := range writers {
		deferred[w] = f.call(sess, deferredTool)
		f.deferJob(deferred[w], fmt.Sprintf("race-h%d", w))
	}
	tool := jobs.Tool{Name: "t", Timeout: 10 * time.Second}
	for range timeouts {
		if _, err := nodes[1].Call(f.ctx, jobs.NewCall{Tenant: tenantA, SessionID: sess, Tool: tool}); err != nil {
			t.Fatal(err)
		}
	}
	f.at(11 * time.Second)
	notes := map[string]string{}
	for w := range writers {
		for i := range perWriter {
			n := longNote(fmt.Sprintf("w%d-%02d", w, i), 701)
			notes[n[:strings.IndexByte(n, '|')]] = n
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				n := notes[fmt.Sprintf("w%d-%02d", w, i)]
				if err := nodes[(w+i)%2].Progress(f.ctx, addr(deferred[w]), n); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := nodes[1].Tick(f.ctx, f.clock.Now()); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	es := f.timeline(sess)
	checkCapped(t, es, capRace, func(e jobs.Entry) jobs.Entry {
		if e.Kind == jobs.KindProgress {
			note, _ := e.Detail["note"].(string)
			id, _, _ := strings.Cut(note, "|")
			e.Detail = map[string]any{"note": notes[id]}
		}
		return e
	})
	progress, fired := 0, 0
	for _, e := range es {
		switch e.Kind {
		case jobs.KindProgress:
			progress++
		case jobs.KindToolDeadlineTimeout:
			fired++
		}
	}
	if progress != writers*perWriter || fired != timeouts {
		t.Fatalf("%d progress entries and %d timeouts, want %d and %d", progress, fired, writers*perWriter, timeouts)
	}
}

// checkCapped walks a timeline in order, adding up the size of each entry as it was offered
// (offered rebuilds it from what was stored): every entry is whole while the sum is within
// max, the entry that takes the sum past max comes right after the only notice, and every
// later entry is cut (or whole when it has nothing to cut). The timeline must have passed max.
func checkCapped(t testing.TB, es []jobs.Entry, max int64, offered func(jobs.Entry) jobs.Entry) {
	t.Helper()
	sum, notice, stored, after := int64(0), -1, 0, 0
	for i, e := range es {
		stored += encodedSize(t, e)
		if isCapNotice(e, max) {
			if notice >= 0 {
				t.Fatalf("a second notice at %d (the first at %d):\n%s", i, notice, dump(es))
			}
			notice = i
			continue
		}
		o := offered(e)
		was := sum
		sum += int64(encodedSize(t, o))
		if sum <= max {
			wantWhole(t, e, o)
			continue
		}
		if was <= max && notice != i-1 {
			t.Fatalf("entry %d takes the timeline past its cap (%d → %d bytes), but the notice is at %d:\n%s", i, was, sum, notice, dump(es))
		}
		after++
		_, cut, err := jobs.CutEntry(mustJSON(t, o))
		if err != nil {
			t.Fatal(err)
		}
		if cut {
			wantCut(t, e, o)
		} else {
			wantWhole(t, e, o)
		}
	}
	if notice < 0 || sum <= max {
		t.Fatalf("%d bytes offered to a cap of %d, notice at %d:\n%s", sum, max, notice, dump(es))
	}
	// What the timeline holds: the cap, the notice, and short entries past it.
	if limit := int(max) + 256 + after*maxCutEntry; stored > limit {
		t.Fatalf("the timeline holds %d bytes, want at most %d", stored, limit)
	}
}

func mustJSON(t testing.TB, e jobs.Entry) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dump(es []jobs.Entry) string {
	var b strings.Builder
	for i, e := range es {
		d, _ := json.Marshal(e.Detail)
		fmt.Fprintf(&b, "  %d: %d %s %s %s %.120s\n", i, e.AtMS, e.Kind, e.CallID, e.Handle, d)
	}
	return b.String()
}
